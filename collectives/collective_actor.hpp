#pragma once
/// The collective actor: one per op in flight. It hosts an algorithm (the
/// op's state machine, see collective.hpp), gives it collective_io (send via
/// the link actors, finish, fail), feeds it chunks and send completions, and
/// reports the outcome to the progress actor.
///
/// Invariants: the op is reported successful only when the algorithm
/// finished *and* every send it queued has left the caller's buffer. A failed
/// op stays alive (ignoring everything) until the progress actor has made the
/// links drop their pointers into its buffers, then it is told to quit.

#include "actors/messages.hpp"
#include "collectives/registry.hpp"

#include <caf/event_based_actor.hpp>

#include <chrono>
#include <memory>
#include <vector>

namespace mccl::actors {

struct collective_init {
  collective_args args;
  uint32_t comm_id = 0;
  std::string algorithm_name;
  algorithm_factory factory;
  std::vector<caf::actor> links; ///< by peer rank; null at our own rank
  caf::actor progress;
  caf::actor watchdog;
  std::chrono::milliseconds timeout{0};
};

class collective_actor : public caf::event_based_actor, public collective_io {
public:
  collective_actor(caf::actor_config& cfg, collective_init init);

  caf::behavior make_behavior() override;

  const char* name() const override { return "mccl.collective"; }

  // collective_io
  void send(int peer, uint32_t step, uint32_t chunk, const void* data, std::size_t bytes) override;
  void send_block(int peer, uint32_t step, uint32_t chunk, const void* data, std::size_t bytes,
                  uint64_t block_bytes) override;
  void finish() override;
  void fail(errc code, const std::string& why) override;

private:
  /// Runs an algorithm callback, turning an exception into an op failure.
  template <class F>
  void guarded(F&& f);
  void maybe_report_success();
  /// Queues one frame at the link to `peer` (flags: wire::frame_flag bits).
  void send_frame(int peer, uint32_t step, uint32_t chunk, const void* data, std::size_t bytes,
                  uint64_t block_bytes, uint16_t flags);
  /// The step number of ack frames (no algorithm uses it).
  static constexpr uint32_t ack_step = 0xFFFFFFFFu;
  void report(errc code, std::string message);
  std::string describe_op() const;
  /// Empty when the chunk's op signature matches ours, else the desync error.
  std::string check_signature(const rx_chunk& c) const;
  bool p2p() const noexcept {
    return init_.args.op.kind == op_kind::send || init_.args.op.kind == op_kind::recv;
  }

  collective_init init_;
  std::unique_ptr<algorithm> algo_;
  op_signature signature_;
  std::size_t outstanding_sends_ = 0;
  bool finished_ = false;
  std::vector<bool> ack_requested_; ///< by peer: our first frame asked for an ack
  std::size_t acks_pending_ = 0;
  bool reported_ = false;
};

} // namespace mccl::actors
