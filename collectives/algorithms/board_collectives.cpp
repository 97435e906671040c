#include "collectives/algorithms/board_collectives.hpp"

#include "collectives/algorithms/board_wait.hpp"
#include "collectives/engine/op.hpp"
#include "reducers/reduce.hpp"

#include <algorithm>
#include <cstring>

namespace mccl {
namespace {

using transport::board_tag;
using transport::shm_board;
using board_detail::rank_sources;
using board_detail::wait_all;

/// What this rank posts: its whole input, or nothing.
std::size_t posted_bytes(const op_request& op, int rank, int world) noexcept {
  switch (op.kind) {
    case op_kind::allreduce:
    case op_kind::reduce:
    case op_kind::allgather:
      return op.bytes();
    case op_kind::reduce_scatter:
      return op.bytes() * static_cast<std::size_t>(world); // a block for every rank
    case op_kind::broadcast:
      return rank == op.root ? op.bytes() : 0;
    default:
      return 0;
  }
}

/// Reduces every rank's posted input into `out` in rank order 0..n-1.
void reduce_all(const op_request& op, const board_call& call, void* out) {
  rank_sources parts(call.world, [&](int p) -> const void* {
    return p == call.rank ? op.send : call.board->bytes_of(p, call.n);
  });
  reduce_many(op.op, op.type, out, parts.data(), parts.size(), op.count);
  if (op.op == redop::avg)
    finish_avg(op.type, out, op.count, call.world);
}

} // namespace

const char* staged_algorithm_name(op_kind kind) noexcept {
  switch (kind) {
    case op_kind::allreduce:
    case op_kind::reduce:
      return "board_rs";
    case op_kind::broadcast:
    case op_kind::allgather:
    case op_kind::reduce_scatter:
      return "board_stage";
    default:
      return "";
  }
}

std::string_view staged_algorithm(const op_request& op, int world, std::size_t stage_bytes) {
  if (world < 2 || stage_bytes == 0 || op.is_v() || op.compression != compression_kind::none)
    return {};
  // A reduce_scatter puts a piece of every rank's block in one stage bank.
  if (op.kind == op_kind::reduce_scatter && stage_bytes / static_cast<std::size_t>(world) < op.elem_size())
    return {};
  return staged_algorithm_name(op.kind);
}

std::string_view board_algorithm(const op_request& op, int world, std::size_t slot_bytes, std::size_t stage_bytes,
                                 const std::string& named) {
  // The board copies values exactly; compressed ops go through the links.
  if (world < 2 || op.compression != compression_kind::none)
    return {};
  auto staged = staged_algorithm(op, world, stage_bytes);
  if (!named.empty())
    return named == staged ? staged : "";
  if (staged == "board_rs" && world == 2) // two ranks: the engine's direct exchange beyond the banks
    return fits_board(op, world, slot_bytes) ? "board" : "";
  if (fits_board(op, world, slot_bytes)
      && !(staged == "board_rs" && op.bytes() * static_cast<std::size_t>(world) >= board_rs_from_total_bytes))
    return "board";
  return staged;
}

bool prefetch_stage_reads(int world, std::size_t source_bytes) noexcept {
  // The range where it measured faster (prefetch_stage_reads' comment).
  constexpr std::size_t least_per_bank = std::size_t{2} << 10;
  constexpr std::size_t most_per_bank = std::size_t{16} << 10;
  return world >= 16 && world <= 32 && source_bytes >= least_per_bank && source_bytes <= most_per_bank;
}

uint64_t board_rs_ops(std::size_t count, std::size_t elem, std::size_t stage_bytes) noexcept {
  auto piece = stage_bytes / elem;
  return (count + piece - 1) / piece + 1;
}

std::size_t board_stage_piece(const op_request& op, int world, std::size_t stage_bytes) noexcept {
  auto elem = op.elem_size();
  if (op.kind != op_kind::reduce_scatter)
    return stage_bytes / elem;
  // Every rank's block gets an equal part of the bank, cut at 64 bytes
  // where that leaves any: each rank then reduces whole cache lines.
  auto part = stage_bytes / static_cast<std::size_t>(world);
  if (part >= 64)
    part -= part % 64;
  return part / elem;
}

uint64_t board_ops(const op_request& op, int world, std::size_t stage_bytes, std::string_view algorithm) noexcept {
  if (algorithm == "board_rs")
    return board_rs_ops(op.count, op.elem_size(), stage_bytes);
  if (algorithm == "board_stage") {
    auto piece = board_stage_piece(op, world, stage_bytes);
    return std::max<uint64_t>(1, (op.count + piece - 1) / piece);
  }
  return 1;
}

board_share board_rs_share(std::size_t count, std::size_t elem, int world, int r) noexcept {
  auto w = static_cast<std::size_t>(world);
  auto align = elem >= 64 ? 1 : 64 / elem;
  auto per = ((count + w - 1) / w + align - 1) / align * align;
  board_share s;
  s.first = std::min(count, static_cast<std::size_t>(r) * per);
  s.count = std::min(per, count - s.first);
  return s;
}

bool fits_board(const op_request& op, int world, std::size_t slot_bytes) noexcept {
  if (world < 2 || op.is_v())
    return false;
  switch (op.kind) {
    case op_kind::allreduce:
    case op_kind::reduce:
    case op_kind::broadcast:
    case op_kind::allgather:
      return op.bytes() <= slot_bytes;
    case op_kind::reduce_scatter:
      return op.bytes() * static_cast<std::size_t>(world) <= slot_bytes;
    case op_kind::barrier:
      return true;
    default:
      return false;
  }
}

board_tag board_tag_of(const op_request& op, int world) noexcept {
  auto s = op.signature(world);
  board_tag t;
  t.words[0] = static_cast<uint64_t>(static_cast<uint8_t>(s.kind)) | static_cast<uint64_t>(static_cast<uint8_t>(s.type)) << 8
               | static_cast<uint64_t>(static_cast<uint8_t>(s.op)) << 16 | static_cast<uint64_t>(s.arg) << 32;
  t.words[1] = s.count;
  // A rank that compresses takes the links where its peers take the board:
  // its note at this seq must differ, so that they report the desync.
  t.words[2] = static_cast<uint64_t>(static_cast<uint8_t>(s.codec));
  return t;
}

board_outcome run_on_board(const op_request& op, const board_call& call) {
  auto closed = call.closed();
  if (closed.code != errc::none)
    return closed;
  auto mine = board_tag_of(op, call.world);
  // The input goes onto the board first: the result may overwrite the
  // caller's buffer (in place) while peers still read our bank.
  call.board->post(call.n, mine, op.send, posted_bytes(op, call.rank, call.world));
  auto waited = wait_all(call, mine, call.n, [] { return std::string("board exchange"); });
  if (waited.code != errc::none)
    return waited;
  auto bytes = op.bytes();
  switch (op.kind) {
    case op_kind::allreduce:
      if (bytes > 0) {
        // Our own input is on the board too: reduce from there when the
        // output is the input (in place).
        if (op.recv == op.send) {
          auto in_place = op;
          in_place.send = call.board->bytes_of(call.rank, call.n);
          reduce_all(in_place, call, op.recv);
        } else {
          reduce_all(op, call, op.recv);
        }
      }
      break;
    case op_kind::reduce:
      if (call.rank == op.root && bytes > 0) {
        auto from_board = op;
        from_board.send = call.board->bytes_of(call.rank, call.n);
        reduce_all(from_board, call, op.recv);
      }
      break;
    case op_kind::broadcast:
      if (call.rank != op.root && bytes > 0)
        std::memcpy(op.recv, call.board->bytes_of(op.root, call.n), bytes);
      else if (call.rank == op.root && op.recv != op.send && bytes > 0)
        std::memcpy(op.recv, op.send, bytes);
      break;
    case op_kind::reduce_scatter:
      if (bytes > 0) {
        // This rank's block of every rank's posted input, reduced in rank
        // order; its own from the board too, since its output may lie in
        // its input (in place).
        auto block = static_cast<std::size_t>(call.rank) * bytes;
        rank_sources parts(call.world, [&](int p) -> const void* { return call.board->bytes_of(p, call.n) + block; });
        reduce_many(op.op, op.type, op.recv, parts.data(), parts.size(), op.count);
        if (op.op == redop::avg)
          finish_avg(op.type, op.recv, op.count, call.world);
      }
      break;
    case op_kind::allgather:
      for (int p = 0; p < call.world && bytes > 0; ++p)
        std::memcpy(static_cast<uint8_t*>(op.recv) + static_cast<std::size_t>(p) * bytes,
                    call.board->bytes_of(p, call.n), bytes);
      break;
    default:
      break;
  }
  return {};
}

} // namespace mccl
