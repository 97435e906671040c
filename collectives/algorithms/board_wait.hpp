#pragma once
/// What the board's collectives share (board_collectives.cpp, the banks;
/// board_stage.cpp, the stage): waiting for every peer's post of a board
/// op, with the error that names the step, the peer and what it issued.

#include "collectives/algorithms/board_collectives.hpp"
#include "collectives/engine/op.hpp"

#include <string>

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

/// Waits for every peer's post of board op n; "" or the error. `phase`
/// names the step for the error ("board exchange").
template <class Phase>
board_outcome wait_all(const board_call& call, const board_tag& mine, uint64_t n, Phase phase) {
  shm_board::waiting how;
  how.spin = call.spin;
  how.deadline = call.deadline;
  how.stop = [&] { return call.closed().code != errc::none; };
  how.asleep = call.asleep;
  int seen = 1; // ourselves
  for (int p = 0; p < call.world; ++p) {
    if (p == call.rank)
      continue;
    // Spelled out only on failure: building it costs more than a small op.
    auto where = [&] {
      return phase() + ", " + std::to_string(seen) + " of " + std::to_string(call.world)
             + " ranks posted, waiting on " + rank_name(p);
    };
    board_tag theirs;
    uint64_t issued = 0;
    auto r = call.board->wait(p, n, call.seq, mine, how, &theirs, &issued);
    switch (r) {
      case shm_board::wait_result::posted:
        ++seen;
        continue;
      case shm_board::wait_result::other_tag:
      case shm_board::wait_result::other_path:
        return {errc::desync, "ranks issued different collectives at seq " + std::to_string(call.seq)
                                + ": " + rank_name(call.rank) + " issued " + describe(signature_of(mine)) + ", "
                                + rank_name(p) + " issued " + describe(signature_of(theirs))
                                + " (all ranks must issue the same collectives in the same order)",
                where()};
      case shm_board::wait_result::departed:
        return {errc::peer_lost,
                rank_name(p) + " finalized after issuing " + std::to_string(issued)
                  + " collective(s); it never issued this one (do all ranks issue the same collectives?)",
                where(), p};
      case shm_board::wait_result::stopped: {
        auto closed = call.closed();
        closed.where = where();
        return closed;
      }
      case shm_board::wait_result::timed_out:
        return {errc::timeout, "timed out after MCCL_TIMEOUT_MS=" + std::to_string(call.timeout.count()) + " ms",
                where()};
    }
  }
  return {};
}


} // namespace mccl::board_detail
