#pragma once
/// The inline path: a small collective runs from start to finish on the
/// thread that called it, when nothing else is in flight on its
/// communicator.
///
/// Why: on the actor path an op crosses threads four times (caller -> CAF
/// worker -> the peer's link -> ... -> caller), and a wake-up that crosses
/// threads costs 20-55 us on small VMs, which is all of a small op's time.
/// Here the caller borrows every link's connection (link_lease.hpp), writes
/// the op's frames itself, waits in poll(2) for the peers' frames, runs the
/// algorithm on them and gives the connections back: no thread hand-off at
/// all, like Open MPI's TCP path.
///
/// It runs the same algorithm through the same op_session as a collective
/// actor, so its frames are identical: a peer that runs the same op on the
/// actor path (its link was busy) interoperates with it. Frames it reads
/// that are not its own (a later op's chunks, an ABORT) go back to the link
/// through the lease, in stream order.
///
/// Bounded: the op fails after MCCL_TIMEOUT_MS, or as soon as the
/// communicator aborts, a peer aborts or a connection fails; the progress
/// actor is then told, so the communicator aborts everywhere as for any
/// failed op.

#include "transport/buffer_pool.hpp"
#include "actors/link_lease.hpp"
#include "actors/progress_actor.hpp"
#include "config/config.hpp"
#include "transport/connection.hpp"
#include "transport/fault/fault_report.hpp"

#include <caf/actor.hpp>

#include <memory>
#include <vector>

namespace mccl::actors {

struct inline_peer {
  transport::connection_ptr conn;
  std::shared_ptr<link_lease> lease;
  caf::actor link;
};

struct inline_init {
  int rank = 0;
  int world = 1;
  uint32_t comm_id = 0;
  config cfg;
  buffer_pool* pool = nullptr;
  caf::actor progress;
  std::shared_ptr<comm_shared> shared;
  std::vector<inline_peer> peers; ///< by rank; empty entry at our own rank
  uint32_t max_payload = 0;       ///< as the links check it
  /// Fault report (MCCL_FAULTS); null: no scenario.
  std::shared_ptr<transport::fault_recorder> recorder;
};

struct inline_channel;

class inline_path {
public:
  explicit inline_path(inline_init init);
  ~inline_path();

  /// Whether `op` may run inline at all (kind, size up to `max_bytes`,
  /// communicator state). The caller also makes sure no other op of the
  /// communicator is in flight.
  bool eligible(const op_request& op, std::size_t max_bytes) const;

  /// Every connection can be lent (none is simulated or decorated beyond
  /// polling).
  bool usable() const noexcept { return usable_; }

  /// Runs `op` inline if every link can be borrowed now: numbers it,
  /// completes op.work (with its error on failure) and returns true. Returns
  /// false, having done nothing, when a link is busy. `on_op_thread`: the
  /// communicator's op thread runs it, not the caller (op_runner.hpp).
  bool try_run(op_request& op, bool on_op_thread);

private:
  inline_init init_;
  std::vector<inline_channel> channels_; ///< by rank; kept between ops
  bool usable_ = true; ///< every connection can be polled
};

} // namespace mccl::actors
