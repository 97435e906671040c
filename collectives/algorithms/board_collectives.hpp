#pragma once
/// Small collectives on the host board (transport/shm/shm_board.hpp), run
/// to their end by the calling thread when every rank of the communicator
/// is on this host: allreduce, reduce, broadcast, allgather, reduce_scatter
/// and barrier whose input fits the board's slot size per rank. No frames, no engine: each rank
/// posts its bytes once and reads the peers' straight from their slots,
/// reducing in rank order 0..n-1 so every rank computes bit-identical
/// results (as the one-shot allreduce does over links).
///
/// Ops larger than a bank run on the stage banks (shm_board::stage_of),
/// in pieces of at most a stage bank, one board op per piece
/// (board_stage.cpp):
///
/// - "board_rs", allreduce and reduce: each rank copies its piece into its
///   stage bank and posts; once every rank has, rank r reduces share r of
///   every rank's piece (rank order 0..n-1) into its result bank, which it
///   posts with the next piece; every rank (a reduce: its root) then
///   copies all shares of the reduced piece out. A reduce-scatter and an
///   allgather through shared memory, one board op per piece plus one, no
///   frames; the reduction of each share happens once, on one rank, so
///   every rank gets the same bits.
/// - "board_stage", broadcast, allgather and reduce_scatter: each rank
///   copies what it contributes to the piece into its stage bank (the
///   root alone for a broadcast; a reduce_scatter, the piece of every
///   rank's block side by side) and posts; once every rank has, each
///   copies out what it needs (a reduce_scatter: reduces its block's
///   piece from every rank's bank, in rank order).
///
/// Mismatched collectives are named as over links: a peer that posted
/// another op, or issued another collective at this seq on any path,
/// fails the op with errc::desync on the rank that sees it.

#include "transport/shm/shm_board.hpp"
#include <mccl/collective.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

namespace mccl {

/// Whether `op` runs on a board of `slot_bytes` per rank among `world` ranks.
bool fits_board(const op_request& op, int world, std::size_t slot_bytes) noexcept;

/// An allreduce that fits the banks still takes board_rs once all ranks'
/// inputs together reach this: on the banks every rank reads and reduces
/// all of them, on board_rs a 1/world share, for one more flag round.
/// Measured on the 64-core machine (docs/performance.md, "Tiny ops on the
/// host board"), board_rs forced against the banks at 16 KiB in all:
/// 3.7 against 4.7 us on 4 ranks (4 KiB each), 3.9 against 4.8 on 8,
/// 4.7 against 5.6 on 16 and 5.8 against 7.9 on 32; at 8 KiB in all they
/// tied on 4 to 16 ranks (2.5-4.2 us).
constexpr std::size_t board_rs_from_total_bytes = std::size_t{16} << 10;

/// Whether a rank of `world` that reduces `source_bytes` from each rank's
/// stage bank (its share of a board_rs piece, its block of a reduce_scatter
/// piece) asks for all of them before it reads any. A short run of bytes
/// from each of many banks, each just written on another core, is what the
/// hardware's prefetchers do not see coming. Measured on the 64-core
/// machine (docs/performance.md, "Reading the stage: prefetch"), from 2 to
/// 16 KiB a bank at 16 and 32 ranks, reduce_scatter took 0.58-0.66x the
/// time and allreduce 0.70-0.90x (64 and 256 KiB ops); from 0.5 to 1 KiB a
/// bank allreduce took 1.02-1.08x, at 32-64 KiB a bank (1 MiB ops)
/// nothing changed beyond the rounds' spread, at 2 ranks (32 KiB and more
/// a bank) it took 1.01-1.08x, and 64 ranks, measured in the slow mode of
/// many ranks (0.7-3 ms an op), came out slower in every cell (1.03-1.26x).
bool prefetch_stage_reads(int world, std::size_t source_bytes) noexcept;

/// The name of `kind`'s staged algorithm: "board_rs", "board_stage", or
/// "" (none).
const char* staged_algorithm_name(op_kind kind) noexcept;

/// The staged algorithm for `op` among `world` ranks with stage banks of
/// `stage_bytes` (0: none): "board_rs", "board_stage", or "" (no stage,
/// or an op the stage does not run). The board's names are literals, so
/// they travel as views: a tiny op on the board pays no string copy.
std::string_view staged_algorithm(const op_request& op, int world, std::size_t stage_bytes);

/// Where `op` runs among `world` ranks of one host with a board of
/// `slot_bytes` banks and `stage_bytes` stage banks (0: none): "board",
/// "board_rs", "board_stage" or "" (the engine). An op that fits the banks
/// takes them, except an allreduce or reduce whose world's inputs reach
/// board_rs_from_total_bytes; a larger one takes its staged algorithm at
/// any size: on one host board_rs beat the engine's best (rd,
/// rabenseifner) from 4 to 32 ranks up to 64 MiB, reading each input once
/// where the links copy it through a ring twice (docs/performance.md has
/// the stage's figures for the other collectives). Two ranks keep the
/// engine's direct exchange above the banks: one copy each way, where
/// board_rs stages, reduces and gathers; it measured 1.4-1.9x faster from
/// 128 to 512 KiB on the 2-vCPU machine and 1.2x at 64 MiB (medians of
/// five runs), and tied or faster on the 16-core one (docs/performance.md,
/// "The op actors against the engine before them"). (Above
/// MCCL_INLINE_BYTES comm_core runs it on its board thread, so the call
/// returns at once.) `named` is what MCCL_ALGO names for the op at its
/// size ("": nothing): the op's staged algorithm puts it on the stage at
/// every size, any other name keeps it in the engine. The same on every
/// rank: it reads the op and settings every rank shares.
std::string_view board_algorithm(const op_request& op, int world, std::size_t slot_bytes, std::size_t stage_bytes,
                                 const std::string& named);

/// Board ops an allreduce of `count` elements of `elem` bytes takes on
/// board_rs with stage banks of `stage_bytes`: a piece per stage bank's
/// worth, plus one.
uint64_t board_rs_ops(std::size_t count, std::size_t elem, std::size_t stage_bytes) noexcept;

/// Elements per piece of `op` on board_stage: a stage bank's worth, or for
/// a reduce_scatter 1/world of it per block (cut at 64 bytes).
std::size_t board_stage_piece(const op_request& op, int world, std::size_t stage_bytes) noexcept;

/// Board ops `op` takes on `algorithm`: one on the banks ("board"), a
/// piece each on the stage (board_rs one more).
uint64_t board_ops(const op_request& op, int world, std::size_t stage_bytes, std::string_view algorithm) noexcept;

/// The elements [first, first + count) of a piece of `count` elements that
/// rank `r` of `world` reduces: ceil(count / world) rounded up to 64
/// bytes' worth, the last ranks' shares shorter or empty.
struct board_share {
  std::size_t first = 0;
  std::size_t count = 0;
};
board_share board_rs_share(std::size_t count, std::size_t elem, int world, int r) noexcept;

/// The board tag of a collective (its signature).
transport::board_tag board_tag_of(const op_request& op, int world) noexcept;

struct board_outcome {
  errc code = errc::none;
  std::string message;
  /// Where it failed: "board exchange, 1 of 2 ranks posted, waiting on rank 1".
  std::string where;
  /// peer_lost: the rank that finalized without this op (-1: none).
  int peer = -1;
};

struct board_call {
  transport::shm_board* board = nullptr;
  int rank = 0;
  int world = 1;
  uint64_t n = 0;        ///< board op number (board ops only)
  uint64_t seq = 0; ///< the collective's number, shared with the engine's ops
  std::chrono::microseconds spin{200};
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds timeout{0}; ///< MCCL_TIMEOUT_MS, for the message
  /// Why the communicator closed (code none while it is open): checked
  /// before and while waiting, so an abort or a lost peer ends the wait.
  std::function<board_outcome()> closed;
  /// Called while the wait sleeps: lets the links be read meanwhile (an
  /// ABORT or BYE from a peer closes the communicator or explains a
  /// departure).
  std::function<void()> asleep;
};

/// Runs `op` (fits_board) to its end; never throws.
board_outcome run_on_board(const op_request& op, const board_call& call);

/// Runs allreduce or reduce `op` as board_rs (the board has stage banks,
/// world >= 2) over board ops call.n .. call.n + board_rs_ops() - 1;
/// never throws.
board_outcome run_board_rs(const op_request& op, const board_call& call);

/// Runs broadcast, allgather or reduce_scatter `op` as board_stage over
/// board ops call.n .. call.n + board_ops() - 1; never throws.
board_outcome run_board_stage(const op_request& op, const board_call& call);

} // namespace mccl
