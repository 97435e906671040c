#pragma once
/// The progress actor: one per communicator. It gives every submitted op the
/// next sequence number (all ranks issue ops in the same order, so equal
/// numbers mean the same op everywhere), picks its algorithm, spawns its
/// collective actor, routes the op's incoming chunks to it at every link, and
/// completes the caller's Work when the op ends.
///
/// It also owns the communicator's failure state: an op failure, a lost peer
/// or a user abort aborts the communicator once. The links send an ABORT
/// frame to every peer and drop every pointer into caller buffers; only then
/// are the failed ops' Works completed (so a caller that frees its buffer
/// after wait() returns is safe), and every later op fails at once with the
/// same reason.

#include "actors/flight_recorder.hpp"
#include "actors/messages.hpp"
#include "collectives/registry.hpp"
#include "config/config.hpp"

#include <caf/event_based_actor.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <set>
#include <vector>

namespace mccl::actors {

/// What the communicator's caller threads (the inline path) and its
/// progress actor share.
struct comm_shared {
  /// Sequence number of the next collective; the progress actor and the
  /// inline path both take theirs from here (never at the same time: the
  /// inline path runs only while no other op is in flight).
  std::atomic<uint64_t> next_seq{0};
  /// Set once the communicator aborted or finalized: ops then take the
  /// actor path, which reports why.
  std::atomic<bool> closed{false};
  /// The last ops of this communicator, both paths; null when not set up
  /// (tests that spawn a progress actor alone).
  std::shared_ptr<flight_recorder> recorder;

  void close(const std::string& why) {
    std::lock_guard<std::mutex> guard{mutex};
    if (!closed.exchange(true))
      reason = why;
  }
  std::string why_closed() const {
    std::lock_guard<std::mutex> guard{mutex};
    return reason;
  }

private:
  mutable std::mutex mutex;
  std::string reason;
};

struct progress_init {
  int rank = 0;
  int world = 1;
  uint32_t comm_id = 0;
  config cfg;
  caf::actor watchdog;
  std::shared_ptr<comm_shared> shared = std::make_shared<comm_shared>();
};

class progress_actor : public caf::event_based_actor {
public:
  progress_actor(caf::actor_config& cfg, progress_init init);

  caf::behavior make_behavior() override;

  const char* name() const override { return "mccl.progress"; }

private:
  struct in_flight {
    op_ptr op;
    caf::actor collective;
    std::string algorithm;
    std::chrono::steady_clock::time_point start;
    uint64_t ticket = 0; ///< in the flight recorder
  };

  void submit(op_ptr op);
  /// Numbers the op: a sequence number for collectives, the next message
  /// number to that peer for a send.
  void number(op_request& op);
  bool complete_locally(const op_ptr& op);
  void complete(in_flight& f, errc code, std::string message);
  void on_done(op_result& r);
  void on_link_down(int peer, const std::string& why, bool graceful, uint64_t issued);
  /// Aborts once: `why` is what local ops report; `wire_text` (default: why)
  /// is what the ABORT frame tells peers, who prefix it with the origin.
  void abort(errc code, const std::string& why, int origin, const std::string& wire_text = {});
  void links_purged();
  /// Records the op's start in the flight recorder; returns its ticket.
  uint64_t record_start(const op_request& op, const std::string& algorithm);
  void record_end(uint64_t ticket, bool ok);
  /// A timeout's message plus the last enqueued and completed seq.
  std::string with_progress_note(errc code, std::string message) const;
  void shutdown(caf::response_promise rp);

  progress_init init_;
  std::vector<caf::actor> links_; ///< by peer rank; null at our own rank
  uint64_t next_id_ = 0;
  std::vector<uint64_t> next_message_; ///< point-to-point sends per peer
  std::map<uint64_t, in_flight> in_flight_; ///< by op id

  // failure state
  bool aborted_ = false;
  errc abort_code_ = errc::none;
  std::string abort_reason_;
  std::size_t link_acks_pending_ = 0;
  std::vector<std::pair<in_flight, op_result>> failed_unpurged_;
  struct departure {
    std::string why;
    uint64_t issued = 0; ///< ops the peer issued before it finalized
  };
  std::map<int, departure> departed_; ///< peers that finalized
  bool finalized_ = false;
  int pending_loss_peer_ = -1; ///< a lost link waiting for an explaining ABORT
  std::string pending_loss_why_;
};

} // namespace mccl::actors
