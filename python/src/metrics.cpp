#include "metrics.hpp"

#include <algorithm>
#include <deque>
#include <mutex>
#include <sstream>
#include <vector>

namespace mccl::torch_backend {

namespace {

/// Latencies kept for the percentiles: enough for a stable p99, bounded so a
/// long training run does not grow without limit.
constexpr std::size_t latency_window = 100000;

struct accumulator {
  std::mutex mutex;
  metrics_summary totals;
  std::deque<double> latencies_ms;
};

accumulator& global() {
  static accumulator a;
  return a;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty())
    return 0;
  auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

} // namespace

void record_op(const op_metrics& m, bool failed) {
  auto& a = global();
  std::lock_guard<std::mutex> guard{a.mutex};
  auto& t = a.totals;
  ++t.total_ops;
  if (failed) {
    ++t.errors;
    return;
  }
  t.total_bytes += m.bytes;
  ++t.algorithms[m.op][m.algorithm.empty() ? "none" : m.algorithm];
  double ms = std::chrono::duration<double, std::milli>(m.duration).count();
  a.latencies_ms.push_back(ms);
  if (a.latencies_ms.size() > latency_window)
    a.latencies_ms.pop_front();
  if (m.duration.count() > 0 && m.bytes > 0) {
    double gbps = static_cast<double>(m.bytes) * 8.0 / static_cast<double>(m.duration.count());
    t.peak_throughput_gbps = std::max(t.peak_throughput_gbps, gbps);
  }
}

metrics_summary current_metrics() {
  auto& a = global();
  std::vector<double> lat;
  metrics_summary s;
  {
    std::lock_guard<std::mutex> guard{a.mutex};
    s = a.totals;
    lat.assign(a.latencies_ms.begin(), a.latencies_ms.end());
  }
  s.p50_latency_ms = percentile(lat, 0.50);
  s.p99_latency_ms = percentile(std::move(lat), 0.99);
  return s;
}

void reset_metrics() {
  auto& a = global();
  std::lock_guard<std::mutex> guard{a.mutex};
  a.totals = metrics_summary{};
  a.latencies_ms.clear();
}

std::string describe(const metrics_summary& s) {
  std::ostringstream out;
  out << "mccl metrics: " << s.total_ops << " ops, " << s.total_bytes << " bytes, " << s.errors
      << " errors, latency p50 " << s.p50_latency_ms << " ms p99 " << s.p99_latency_ms
      << " ms, peak " << s.peak_throughput_gbps << " Gbps";
  for (const auto& [op, algos] : s.algorithms) {
    out << "; " << op << ":";
    for (const auto& [algo, n] : algos)
      out << " " << algo << "=" << n;
  }
  return out.str();
}

} // namespace mccl::torch_backend
