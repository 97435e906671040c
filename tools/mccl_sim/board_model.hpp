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
/// What a copy costs, in bytes of a rank's own traffic (through the host's
/// memory, or its core's caches when it fits them) and bytes it copies
/// from banks other cores wrote:
/// - reading a user buffer: its bytes, own traffic;
/// - reading a bank another rank wrote in this board op or the one
///   before: its bytes, copied between cores;
/// - writing a bank: its bytes, own traffic;
/// - writing a user buffer: its bytes where the op read those bytes
///   before (in place: the lines are in the cache), twice its bytes where
///   not (the core reads each line before it writes it).
/// A rank's own traffic goes through the memory unless what it touches
/// (its buffers and the two banks it writes) fits the caches its core
/// has (`cache_bytes_per_rank`); then it runs at the cache's rate. The
/// copies between cores overlap the own traffic: a stretch lasts the
/// longer of the two (summed, they put the board's 64 MiB cells at
/// 1.6-2.4x the measurement).
///
/// The rates are curves of how many ranks copy at once, measured on the
/// machine the model stands for: bench/memory_bandwidth.cpp with 64 MiB
/// buffers for the memory and with 1 MiB buffers for a core's caches,
/// bench/peer_bandwidth.cpp for the copies between cores. The same memory
/// curve gives the links' bus in timed_network (a payload byte through a
/// shared-memory ring is copied twice, read and written each time: four
/// bytes of memory). docs/performance.md, "Ranks of one host: the
/// simulator against the 64-core machine", has the measurements.

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
memory_curve measured_host_cache();  ///< 1 MiB buffers: each core's own caches
/// bench/peer_bandwidth.cpp on the same machine (the rate of reading the
/// peers' banks, 1 MiB, the median of four runs at 8 to 32 processes).
/// It stops at 32: from 40 processes that machine's hypervisor took CPU
/// time away, and the runs measured that (docs/performance.md, "The slow
/// mode at 64 ranks"); past its last point a curve keeps that rate.
memory_curve measured_host_peer();

struct board_model {
  memory_curve memory = measured_host_memory();
  memory_curve cache = measured_host_cache();
  memory_curve peer = measured_host_peer();
  /// The caches a rank's core has: its L2 (2 MiB) and its share of the L3
  /// (300 MiB for 64 cores) on the lent 64-core machine.
  std::size_t cache_bytes_per_rank = 6u << 20;
  /// A flag round: every rank sees every peer's post. The time of a 4 B
  /// board allreduce on that machine over its ranks (2.7 and 4.9 us at 16
  /// and 32 ranks, since a wait reads all peers at once; 5.8 and 9.4 us,
  /// 0.33 us a rank, before).
  double round_s_per_rank = 0.16e-6;
  std::size_t stage_bytes = 1 << 20; ///< MCCL_SHM_STAGE_BYTES (mccl-sim: the resolved setting)
  bool in_place = true;              ///< the op's output overwrites its input (mccl-bench's default)
};

struct board_estimate {
  std::string algorithm;  ///< "board", "board_rs" or "board_stage"
  double seconds = 0;
  uint64_t board_ops = 0;
  double memory_bytes = 0; ///< ranks' own traffic through the host's memory, all ranks together
  double cache_bytes = 0;  ///< ranks' own traffic in their cores' caches (an op that fits them)
  double peer_bytes = 0;   ///< copied from banks other cores wrote
};

/// The time of `op` (float32, every rank's part; for allgather and
/// reduce_scatter op.count is a block) among `world` ranks of one host on
/// `algorithm`; throws std::invalid_argument for an algorithm or op the
/// board does not run.
board_estimate estimate_board(const op_request& op, int world, const std::string& algorithm, const board_model& m);

} // namespace mccl::sim
