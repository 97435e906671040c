// The board's staged collectives (board_collectives.hpp): ops larger than
// a bank, moved through the stage banks in pieces, one board op each.

#include "collectives/algorithms/board_collectives.hpp"

#include "collectives/algorithms/board_wait.hpp"
#include "reducers/reduce.hpp"

#include <algorithm>
#include <cstring>

namespace mccl {
namespace {

using board_detail::rank_sources;
using board_detail::wait_all;

/// "board_stage piece 2 of 5": where a wait failed.
std::string piece_name(const char* algorithm, uint64_t piece, uint64_t pieces) {
  return std::string(algorithm) + " piece " + std::to_string(piece) + " of " + std::to_string(pieces);
}

/// Asks for `bytes` at `p` into this core's L2 ahead of the reads.
void prefetch(const uint8_t* p, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; i += 64)
    __builtin_prefetch(p + i, 0 /* read */, 2 /* L2 */);
}

/// dst = the reduction of `count` elements at source(0) .. source(world -
/// 1), in rank order (the same bits wherever it runs). Where
/// prefetch_stage_reads says so, every source is asked for first, our own
/// rank's first and the next ranks' after it, so that the ranks do not all
/// read rank 0's bank at once.
template <class Source>
void reduce_in_rank_order(const op_request& op, uint8_t* dst, Source source, int world, int rank,
                          std::size_t count) {
  auto bytes = count * op.elem_size();
  rank_sources sources(world, [&](int p) -> const void* { return source(p); });
  if (prefetch_stage_reads(world, bytes))
    for (int i = 0; i < world; ++i)
      prefetch(static_cast<const uint8_t*>(sources.data()[(rank + i) % world]), bytes);
  reduce_many(op.op, op.type, dst, sources.data(), sources.size(), count);
}

} // namespace

board_outcome run_board_rs(const op_request& op, const board_call& call) {
  auto closed = call.closed();
  if (closed.code != errc::none)
    return closed;
  auto mine = board_tag_of(op, call.world);
  auto* board = call.board;
  auto elem = op.elem_size();
  auto piece = board->stage_bytes() / elem; // elements per piece
  auto ops = board_rs_ops(op.count, elem, board->stage_bytes());
  auto pieces = ops - 1;
  auto piece_count = [&](uint64_t j) { return std::min<std::size_t>(piece, op.count - j * piece); };
  // A reduce gathers the shares on its root only.
  bool gathers = op.kind == op_kind::allreduce || call.rank == op.root;
  auto* in = static_cast<const uint8_t*>(op.send);
  auto* out = static_cast<uint8_t*>(op.recv);
  for (uint64_t j = 0; j < ops; ++j) {
    auto n = call.n + j;
    // Board op n carries piece j's input (stage bank) and piece j - 1's
    // reduced shares (result banks, written last round). Piece j's input
    // is staged before anything of the output is written: in place, the
    // output of piece j - 1 never reaches input not yet staged.
    if (j < pieces)
      std::memcpy(board->stage_of(call.rank, n), in + j * piece * elem, piece_count(j) * elem);
    board->post(n, mine, nullptr, 0);
    auto waited = wait_all(call, mine, n, [&] {
      return piece_name("board_rs", std::min(j + 1, pieces), pieces) + " ("
             + (j == 0 ? "staging" : j < pieces ? "staging the next, gathering the last" : "gathering") + ")";
    });
    if (waited.code != errc::none)
      return waited;
    if (j > 0 && gathers) { // allgather: every rank's share of piece j - 1
      auto count = piece_count(j - 1);
      auto* dst = out + (j - 1) * piece * elem;
      for (int p = 0; p < call.world; ++p) {
        auto s = board_rs_share(count, elem, call.world, p);
        if (s.count > 0)
          std::memcpy(dst + s.first * elem, board->result_of(p, n), s.count * elem);
      }
    }
    if (j < pieces) { // reduce-scatter: our share of piece j, posted with op n + 1
      auto s = board_rs_share(piece_count(j), elem, call.world, call.rank);
      if (s.count > 0) {
        auto at = s.first * elem;
        auto* dst = board->result_of(call.rank, n + 1);
        reduce_in_rank_order(op, dst, [&](int p) { return board->stage_of(p, n) + at; }, call.world, call.rank,
                             s.count);
        if (op.op == redop::avg)
          finish_avg(op.type, dst, s.count, call.world);
      }
    }
  }
  return {};
}

board_outcome run_board_stage(const op_request& op, const board_call& call) {
  auto closed = call.closed();
  if (closed.code != errc::none)
    return closed;
  auto mine = board_tag_of(op, call.world);
  auto* board = call.board;
  auto elem = op.elem_size();
  auto bytes = op.bytes();
  auto piece = board_stage_piece(op, call.world, board->stage_bytes()); // elements per piece
  auto pieces = board_ops(op, call.world, board->stage_bytes(), "board_stage");
  auto* in = static_cast<const uint8_t*>(op.send);
  auto* out = static_cast<uint8_t*>(op.recv);
  for (uint64_t j = 0; j < pieces; ++j) {
    auto n = call.n + j;
    auto first = j * piece; // the piece's first element (of each block, for a reduce_scatter)
    auto count = std::min<std::size_t>(piece, op.count - std::min<std::size_t>(op.count, first));
    auto at = first * elem;
    auto* stage = board->stage_of(call.rank, n);
    // Staged before any output of this piece is written: in place, the
    // output of piece j lies where the input of piece j was (never where
    // a later piece's input is).
    switch (op.kind) {
      case op_kind::broadcast:
        if (call.rank == op.root)
          std::memcpy(stage, in + at, count * elem);
        break;
      case op_kind::allgather:
        std::memcpy(stage, in + at, count * elem);
        break;
      case op_kind::reduce_scatter: // piece j of every rank's block, side by side
        for (int b = 0; b < call.world; ++b)
          std::memcpy(stage + static_cast<std::size_t>(b) * piece * elem,
                      in + static_cast<std::size_t>(b) * bytes + at, count * elem);
        break;
      default:
        break;
    }
    board->post(n, mine, nullptr, 0);
    auto waited = wait_all(call, mine, n, [&] { return piece_name("board_stage", j + 1, pieces); });
    if (waited.code != errc::none)
      return waited;
    if (count == 0)
      continue;
    switch (op.kind) {
      case op_kind::broadcast:
        if (call.rank != op.root)
          std::memcpy(out + at, board->stage_of(op.root, n), count * elem);
        else if (out != in)
          std::memcpy(out + at, in + at, count * elem);
        break;
      case op_kind::allgather:
        for (int p = 0; p < call.world; ++p) {
          auto* dst = out + static_cast<std::size_t>(p) * bytes + at;
          if (p != call.rank)
            std::memcpy(dst, board->stage_of(p, n), count * elem);
          else if (dst != in + at) // in place, our block holds our input already
            std::memcpy(dst, in + at, count * elem);
        }
        break;
      case op_kind::reduce_scatter: { // our block's piece, reduced in rank order 0..n-1
        auto block = static_cast<std::size_t>(call.rank) * piece * elem;
        reduce_in_rank_order(op, out + at, [&](int p) { return board->stage_of(p, n) + block; }, call.world,
                             call.rank, count);
        if (op.op == redop::avg)
          finish_avg(op.type, out + at, count, call.world);
        break;
      }
      default:
        break;
    }
  }
  return {};
}

} // namespace mccl
