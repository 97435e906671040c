#pragma once
/// Process-wide summary of the ops mccl ran for torch.distributed: what
/// mccl.get_metrics() returns. Every finished mccl op is recorded once
/// (from its Work's metrics), whichever process group issued it.

#include <mccl/work.hpp>

#include <cstdint>
#include <map>
#include <string>

namespace mccl::torch_backend {

struct metrics_summary {
  uint64_t total_ops = 0;
  uint64_t total_bytes = 0;
  uint64_t errors = 0;
  double p50_latency_ms = 0;
  double p99_latency_ms = 0;
  /// The highest bytes / duration of any single op, in gigabits per second.
  double peak_throughput_gbps = 0;
  /// op -> algorithm -> how many ops ran with it ("allreduce" -> "ring" -> 12).
  std::map<std::string, std::map<std::string, uint64_t>> algorithms;
};

/// Records one finished op; `failed` ops count as errors (and not in latency).
void record_op(const op_metrics& m, bool failed);

/// The summary since the start or the last reset_metrics(). Latency
/// percentiles are over the most recent ops (a bounded window).
metrics_summary current_metrics();

/// Zeroes everything.
void reset_metrics();

/// One human-readable line of the summary.
std::string describe(const metrics_summary& s);

} // namespace mccl::torch_backend
