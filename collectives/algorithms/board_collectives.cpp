#include "collectives/algorithms/board_collectives.hpp"

#include "collectives/engine/op.hpp"
#include "reducers/reduce.hpp"

#include <algorithm>
#include <cstring>

namespace mccl {
namespace {

using transport::board_tag;
using transport::shm_board;

// A signature goes onto the board field by field (never as raw bytes: its
// padding is indeterminate, and two ranks would see different tags).
op_signature signature_of(const board_tag& t) noexcept {
  op_signature s;
  s.kind = static_cast<op_kind>(t.words[0] & 0xff);
  s.type = static_cast<dtype>((t.words[0] >> 8) & 0xff);
  s.op = static_cast<redop>((t.words[0] >> 16) & 0xff);
  s.arg = static_cast<uint32_t>(t.words[0] >> 32);
  s.count = t.words[1];
  s.codec = static_cast<compression_kind>(t.words[2] & 0xff);
  return s;
}

std::string rank_name(int r) {
  return "rank " + std::to_string(r);
}

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

/// Reduces every rank's posted input into `out` in rank order 0..n-1.
void reduce_all(const op_request& op, const board_call& call, void* out) {
  auto part = [&](int p) -> const void* {
    return p == call.rank ? op.send : call.board->bytes_of(p, call.n);
  };
  if (out != part(0))
    std::memmove(out, part(0), op.bytes());
  for (int p = 1; p < call.world; ++p)
    reduce(op.op, op.type, out, part(p), op.count);
  if (op.op == redop::avg)
    finish_avg(op.type, out, op.count, call.world);
}

} // namespace

std::string board_algorithm(const op_request& op, int world, std::size_t slot_bytes, std::size_t stage_bytes,
                            const std::string& named) {
  // The board copies values exactly; compressed ops go through the links.
  if (world < 2 || op.compression != compression_kind::none)
    return {};
  bool stageable = op.kind == op_kind::allreduce && !op.is_v() && stage_bytes > 0;
  if (!named.empty())
    return named == "board_rs" && stageable ? "board_rs" : "";
  if (fits_board(op, world, slot_bytes)
      && !(stageable && op.bytes() * static_cast<std::size_t>(world) >= board_rs_from_total_bytes))
    return "board";
  return stageable ? "board_rs" : "";
}

uint64_t board_rs_ops(std::size_t count, std::size_t elem, std::size_t stage_bytes) noexcept {
  auto piece = stage_bytes / elem;
  return (count + piece - 1) / piece + 1;
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
  call.board->post(call.n, call.seq, mine, op.send, posted_bytes(op, call.rank, call.world));
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
        auto part = [&](int p) { return static_cast<const uint8_t*>(call.board->bytes_of(p, call.n)) + block; };
        std::memmove(op.recv, part(0), bytes);
        for (int p = 1; p < call.world; ++p)
          reduce(op.op, op.type, op.recv, part(p), op.count);
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

namespace mccl {

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
    board->post(n, call.seq, mine, nullptr, 0);
    auto waited = wait_all(call, mine, n, [&] {
      return "board_rs piece " + std::to_string(std::min(j + 1, pieces)) + " of " + std::to_string(pieces) + " ("
             + (j == 0 ? "staging" : j < pieces ? "staging the next, gathering the last" : "gathering") + ")";
    });
    if (waited.code != errc::none)
      return waited;
    if (j > 0) { // allgather: every rank's share of piece j - 1
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
        reduce3(op.op, op.type, dst, board->stage_of(0, n) + at, board->stage_of(1, n) + at, s.count);
        for (int p = 2; p < call.world; ++p)
          reduce(op.op, op.type, dst, board->stage_of(p, n) + at, s.count);
        if (op.op == redop::avg)
          finish_avg(op.type, dst, s.count, call.world);
      }
    }
  }
  return {};
}

} // namespace mccl
