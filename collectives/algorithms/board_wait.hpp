#pragma once
/// What the board's collectives share (board_collectives.cpp, the banks;
/// board_stage.cpp, the stage): waiting for every peer's post of a board
/// op, with the error that names the step, the peer and what it issued.

#include "collectives/algorithms/board_collectives.hpp"
#include "collectives/engine/op.hpp"

#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace mccl::board_detail {

using transport::board_tag;
using transport::shm_board;

// A signature goes onto the board field by field (never as raw bytes: its
// padding is indeterminate, and two ranks would see different tags).
inline op_signature signature_of(const board_tag& t) noexcept {
  op_signature s;
  s.kind = static_cast<op_kind>(t.words[0] & 0xff);
  s.type = static_cast<dtype>((t.words[0] >> 8) & 0xff);
  s.op = static_cast<redop>((t.words[0] >> 16) & 0xff);
  s.arg = static_cast<uint32_t>(t.words[0] >> 32);
  s.count = t.words[1];
  s.codec = static_cast<compression_kind>(t.words[2] & 0xff);
  return s;
}

inline std::string rank_name(int r) {
  return "rank " + std::to_string(r);
}

/// Every rank's part of a reduction, in rank order, for reduce_many (on
/// the stack up to 256 ranks). `source(p)` is rank p's part.
class rank_sources {
public:
  template <class Source>
  rank_sources(int world, Source source) : size_(static_cast<std::size_t>(world)) {
    if (size_ > local_.size()) {
      many_.resize(size_);
      at_ = many_.data();
    }
    for (int p = 0; p < world; ++p)
      at_[p] = source(p);
  }
  rank_sources(const rank_sources&) = delete;
  rank_sources& operator=(const rank_sources&) = delete;

  const void* const* data() const noexcept { return at_; }
  std::size_t size() const noexcept { return size_; }

private:
  std::array<const void*, 256> local_;
  std::vector<const void*> many_;
  const void** at_ = local_.data();
  std::size_t size_;
};

/// Waits for every peer's post of board op n (all at once:
/// shm_board::wait_all); "" or the error. `phase` names the step for the
/// error ("board exchange").
template <class Phase>
board_outcome wait_all(const board_call& call, const board_tag& mine, uint64_t n, Phase phase) {
  shm_board::waiting how;
  how.spin = call.spin;
  how.deadline = call.deadline;
  how.stop = [&] { return call.closed().code != errc::none; };
  how.asleep = call.asleep;
  auto w = call.board->wait_all(n, call.seq, mine, how);
  if (w.result == shm_board::wait_result::posted)
    return {};
  // Spelled out only on failure: building it costs more than a small op.
  auto where = phase() + ", " + std::to_string(w.posted + 1) + " of " + std::to_string(call.world)
               + " ranks posted, waiting on " + rank_name(w.peer);
  switch (w.result) {
    case shm_board::wait_result::other_tag:
    case shm_board::wait_result::other_path:
      return {errc::desync, "ranks issued different collectives at seq " + std::to_string(call.seq) + ": "
                              + rank_name(call.rank) + " issued " + describe(signature_of(mine)) + ", "
                              + rank_name(w.peer) + " issued " + describe(signature_of(w.theirs))
                              + " (all ranks must issue the same collectives in the same order)",
              where};
    case shm_board::wait_result::departed:
      return {errc::peer_lost,
              rank_name(w.peer) + " finalized after issuing " + std::to_string(w.issued)
                + " collective(s); it never issued this one (do all ranks issue the same collectives?)",
              where, w.peer};
    case shm_board::wait_result::stopped: {
      auto closed = call.closed();
      closed.where = where;
      return closed;
    }
    case shm_board::wait_result::timed_out:
      return {errc::timeout, "timed out after MCCL_TIMEOUT_MS=" + std::to_string(call.timeout.count()) + " ms", where};
    case shm_board::wait_result::posted:
      break;
  }
  return {};
}

} // namespace mccl::board_detail
