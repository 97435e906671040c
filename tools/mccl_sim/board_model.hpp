#pragma once
/// mccl-sim's model of one host's memory and of the host board.
///
/// The host board (collectives/algorithms/board_collectives.hpp) is shared
/// memory that the ranks of one host spin on; mccl-sim's ranks are engines
/// on one thread, so it does not run the board's code. It plays the
/// board's schedule instead: board op after board op, every rank copies or
/// reduces what the algorithm has it copy between two flag rounds, and the
/// ranks that copy at once share the host's memory. A board op takes the
/// slowest rank's copies plus one flag round.
///
/// What a copy costs, in bytes through the host's memory (DRAM) or from
/// its shared cache:
/// - reading a user buffer: its bytes, from memory;
/// - reading a bank another rank wrote in this board op or the one
///   before: its bytes, from the cache (the banks a board op reads are
///   at most two per rank: 128 MiB at 64 ranks with 1 MiB stage banks);
/// - writing a bank: its bytes, to memory (written back later);
/// - writing a user buffer: its bytes where the op read those bytes
///   before (in place: the lines are in the cache), twice its bytes where
///   not (the core reads each line before it writes it).
///
/// The rates are curves of how many ranks copy at once, from
/// bench/memory_bandwidth.cpp on the machine the model stands for: with
/// 64 MiB buffers for the memory, with 1 MiB buffers for the cache. The
/// same memory curve gives the links' bus in timed_network (a payload byte
/// through a shared-memory ring is copied twice, read and written each
/// time: four bytes of memory). docs/performance.md, "Ranks of one host:
/// the simulator against the 64-core machine", has the measurements.

#include <mccl/collective.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mccl::sim {

/// The aggregate rate (bytes/s, read plus written) of k ranks that copy at
/// once, interpolated between measured points; past the last point the
/// last rate, below the first the first point's per-rank rate times k.
class memory_curve {
public:
  memory_curve() = default;
  /// Points (ranks copying, aggregate bytes/s), ranks ascending and >= 1.
  explicit memory_curve(std::vector<std::pair<int, double>> points);
  /// "1:23.5,16:112,64:188" (GB/s); throws std::invalid_argument naming
  /// `setting` and the bad point.
  static memory_curve parse(const std::string& setting, const std::string& text);

  double rate(int copiers) const;
  bool empty() const noexcept { return points_.empty(); }
  /// The points, as parse() reads them.
  std::string to_string() const;

private:
  std::vector<std::pair<int, double>> points_;
};

/// bench/memory_bandwidth.cpp on the lent 64-core machine (nvidia-h200-x4,
/// 2026-11-28), the mean of a run before and after the board measurements.
memory_curve measured_host_memory(); ///< 64 MiB buffers
memory_curve measured_host_cache();  ///< 1 MiB buffers

struct board_model {
  memory_curve memory = measured_host_memory();
  memory_curve cache = measured_host_cache();
  /// A flag round: every rank sees every peer's post. The time of a 4 B
  /// board allreduce on that machine over its ranks (5.8, 9.4 and 21.3 us
  /// at 16, 32 and 64 ranks).
  double round_s_per_rank = 0.33e-6;
  std::size_t stage_bytes = 1 << 20; ///< MCCL_SHM_STAGE_BYTES (mccl-sim: the resolved setting)
  bool in_place = true;              ///< the op's output overwrites its input (mccl-bench's default)
};

struct board_estimate {
  std::string algorithm;  ///< "board", "board_rs" or "board_stage"
  double seconds = 0;
  uint64_t board_ops = 0;
  double memory_bytes = 0; ///< through the host's memory, all ranks together
  double cache_bytes = 0;  ///< from its shared cache
};

/// The time of `op` (float32, every rank's part; for allgather and
/// reduce_scatter op.count is a block) among `world` ranks of one host on
/// `algorithm`; throws std::invalid_argument for an algorithm or op the
/// board does not run.
board_estimate estimate_board(const op_request& op, int world, const std::string& algorithm, const board_model& m);

} // namespace mccl::sim
