#pragma once
/// Small collectives on the host board (transport/shm/shm_board.hpp), run
/// to their end by the calling thread when every rank of the communicator
/// is on this host: allreduce, reduce, broadcast, allgather, reduce_scatter
/// and barrier whose input fits the board's slot size per rank. No frames, no engine: each rank
/// posts its bytes once and reads the peers' straight from their slots,
/// reducing in rank order 0..n-1 so every rank computes bit-identical
/// results (as the one-shot allreduce does over links).
///
/// Mismatched collectives are named as over links: a peer that posted
/// another op, or issued another collective at this seq on any path,
/// fails the op with errc::desync on the rank that sees it.

#include "transport/shm/shm_board.hpp"
#include <mccl/collective.hpp>

#include <chrono>
#include <functional>
#include <string>

namespace mccl {

/// Whether `op` runs on a board of `slot_bytes` per rank among `world` ranks.
bool fits_board(const op_request& op, int world, std::size_t slot_bytes) noexcept;

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

} // namespace mccl
