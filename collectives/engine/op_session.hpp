#pragma once
/// One op's conversation with its peers, as the engine (engine.hpp) runs
/// it, whichever thread drives the engine.
///
/// The session hosts the algorithm (collective.hpp) and implements the
/// protocol around it: every outgoing frame carries the op's signature and
/// every incoming one is checked against it (a mismatch is a desync on every
/// rank); a rank whose algorithm receives nothing asks each peer it sends to
/// for an ack, so it fails too on a mismatch; and the op succeeds only when
/// the algorithm finished, every send has left the caller's buffer and every
/// ack is in.

#include "collectives/engine/chunk_ledger.hpp"
#include "collectives/engine/landing.hpp"
#include "collectives/extension/registry.hpp"
#include "transport/received_frame.hpp"

#include <memory>
#include <string>
#include <vector>

namespace mccl {

class op_session : public collective_io {
public:
  /// `seq`: the op's wire sequence (a send's message number).
  op_session(collective_args args, uint64_t seq, uint32_t comm_id, std::string algorithm_name,
             algorithm_factory factory);
  ~op_session() override;

  /// Creates and starts the algorithm.
  void start_op();
  /// Starts it, then hands it the chunks that came before it started (read
  /// to pooled memory, in the order they came: their landing spots are
  /// taken).
  void start_op(std::vector<transport::received_frame>& early);
  /// A data frame of this op from a peer.
  void deliver(transport::received_frame& f);
  /// One of this op's frames has fully left (its memory may be reused).
  void frame_sent(int peer, uint32_t step, uint32_t chunk);
  /// From now on a chunk that came before (same peer, step and chunk) is
  /// dropped before the algorithm sees it, and told to dropped_duplicate().
  /// Off by default: without it a copy fails the op (the algorithms check),
  /// and the check costs one branch per chunk.
  void drop_duplicates() { seen_ = std::make_unique<chunk_ledger>(); }

  /// True once the outcome was reported (success or failure).
  bool reported() const noexcept { return reported_; }
  const std::string& algorithm_name() const noexcept { return algorithm_name_; }
  const collective_args& args() const noexcept { return args_; }
  /// "allreduce seq 7 on rank 1 (ring, count 1000, float32, sum)".
  std::string describe_op() const;
  /// The algorithm's where(), guarded.
  std::string where() const;
  /// Appends the peers this op waits on next (algorithm::next_senders);
  /// false when it cannot tell (a point-to-point op, acks outstanding, an
  /// algorithm that does not say).
  bool next_senders(std::vector<int>& peers) const;
  /// Payload bytes sent so far (metrics: bytes on the wire).
  std::size_t payload_sent() const noexcept { return payload_sent_; }

  // collective_io
  void send(int peer, uint32_t step, uint32_t chunk, const void* data, std::size_t bytes) override;
  void send_block(int peer, uint32_t step, uint32_t chunk, const void* data, std::size_t bytes,
                  uint64_t block_bytes) override;
  void finish() override;
  void fail(errc code, const std::string& why) override;
  landing_spots* landing() override { return landing_.get(); }

protected:
  /// Queue data frame `h` (payload `data`, `len` bytes) for `peer`; report
  /// it with frame_sent() once it has left.
  virtual void emit(int peer, const wire::frame_header& h, const uint8_t* data, std::size_t len) = 0;
  /// The outcome, exactly once; message is empty on success.
  virtual void report(errc code, std::string message) = 0;
  /// A copy of a chunk it already had was dropped (drop_duplicates()).
  virtual void dropped_duplicate(int /*peer*/, const wire::frame_header& /*h*/) {}
  /// Where channels may receive this op's chunks in place (set before
  /// start_op() by a host that offers receive in place).
  std::shared_ptr<landing_map> landing_;

private:
  template <class F>
  void guarded(F&& f);
  void maybe_report_success();
  void send_frame(int peer, uint32_t step, uint32_t chunk, const void* data, std::size_t bytes,
                  uint64_t block_bytes, uint16_t flags);
  /// Empty when the frame's op signature matches ours, else the desync error.
  std::string check_signature(const wire::frame_header& h, int peer) const;
  bool p2p() const noexcept {
    return args_.op.kind == op_kind::send || args_.op.kind == op_kind::recv;
  }
  void finish_report(errc code, std::string message);

  collective_args args_;
  uint64_t seq_;
  uint32_t comm_id_;
  std::string algorithm_name_;
  algorithm_factory factory_;
  std::unique_ptr<algorithm> algo_;
  op_signature signature_;
  std::size_t outstanding_sends_ = 0;
  std::size_t payload_sent_ = 0;
  bool finished_ = false;
  std::vector<bool> ack_requested_; ///< by peer: our first frame asked for an ack
  std::size_t acks_pending_ = 0;
  bool reported_ = false;
  std::unique_ptr<chunk_ledger> seen_; ///< drop_duplicates(); null: off
};

/// The step number of ack frames (no algorithm uses it).
inline constexpr uint32_t ack_step = 0xFFFFFFFFu;

} // namespace mccl
