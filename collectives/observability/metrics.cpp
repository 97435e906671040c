#include "collectives/observability/metrics_registry.hpp"

#include "config/log.hpp"
#include <mccl/config.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <mutex>
#include <sstream>

namespace mccl {

namespace {

/// Latencies kept for the percentiles: enough for a stable p99, bounded so
/// a long training run does not grow without limit. Each op's latency (a
/// double) goes into its kind's window and the all-ops window: 16 B per op
/// until they are full, at most 800 KB per kind plus 800 KB
/// (docs/troubleshooting.md says so; keep the two in step).
constexpr std::size_t latency_window = 100000;

struct kind_state {
  op_kind_metrics totals;
  std::deque<double> latencies_ms;
};

struct link_entry {
  uint32_t comm_id;
  int rank;
  int peer;
  std::shared_ptr<transport::link_counters> counters;
};

struct registry {
  std::mutex mutex;
  /// Runtimes' feeds of finished ops not folded yet (watch_pending), under
  /// a lock of their own: folding them takes `mutex`.
  std::mutex sources_mutex;
  std::vector<std::weak_ptr<metrics_registry::pending_ops>> sources;
  metrics_summary totals; ///< without percentiles, per-kind data or links
  std::deque<double> latencies_ms;
  std::map<std::string, kind_state> kinds;
  std::vector<link_entry> links;
};

registry& global() {
  static registry r;
  return r;
}

std::atomic<uint64_t> actor_messages{0};
std::atomic<uint64_t> thread_wakeups{0};
std::atomic<uint64_t> link_turns{0};
std::atomic<uint64_t> link_chunks{0};
std::atomic<uint64_t> duplicate_chunks{0};
std::atomic<uint64_t> lost_links{0};

void remember(std::deque<double>& window, double ms) {
  window.push_back(ms);
  if (window.size() > latency_window)
    window.pop_front();
}

double percentile(std::vector<double> v, double q) {
  if (v.empty())
    return 0;
  auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

void fill_percentiles(const std::deque<double>& window, double& p50, double& p99) {
  std::vector<double> v(window.begin(), window.end());
  p50 = percentile(v, 0.50);
  p99 = percentile(std::move(v), 0.99);
}

/// Drops the feeds that are gone (their runtimes ended); `r.sources_mutex` held.
void drop_expired_sources(registry& r) {
  auto& all = r.sources;
  all.erase(std::remove_if(all.begin(), all.end(), [](const auto& w) { return w.expired(); }), all.end());
}

/// Has every live feed fold the ops it holds; drops the expired ones.
void fold_every_pending() {
  auto& r = global();
  std::vector<std::shared_ptr<metrics_registry::pending_ops>> live;
  {
    std::lock_guard<std::mutex> guard{r.sources_mutex};
    drop_expired_sources(r);
    for (const auto& w : r.sources)
      if (auto s = w.lock())
        live.push_back(std::move(s));
  }
  for (const auto& s : live)
    s->fold_pending();
}

/// The names an op is counted under: its kind, and its algorithm's.
const std::string& kind_name(const op_metrics& m) {
  static const std::string unknown = "unknown";
  return m.op.empty() ? unknown : m.op;
}
const std::string& algorithm_name(const op_metrics& m) {
  static const std::string none = "none";
  return m.algorithm.empty() ? none : m.algorithm;
}

/// The kinds and algorithm counters of the ops folded last: a batch holds
/// ops of a few kinds (a sendrecv's alternate: a send, a receive), and
/// comparing two names costs less than finding them in the maps.
class recent_kinds {
public:
  struct found {
    kind_state* kind;
    uint64_t* algorithm_count;
  };
  /// `m`'s kind and its algorithm's counter, made where new; `r.mutex` held.
  found find(registry& r, const op_metrics& m) {
    const auto& op = kind_name(m);
    const auto& algorithm = algorithm_name(m);
    for (const auto& e : entries_)
      if (e.kind != nullptr && *e.op == op && *e.algorithm == algorithm)
        return {e.kind, e.count};
    auto k = r.kinds.try_emplace(op).first;
    auto a = k->second.totals.algorithms.try_emplace(algorithm).first;
    // The map's own keys: they live as long as the registry's entries.
    entries_[next_] = {&k->first, &a->first, &k->second, &a->second};
    next_ = (next_ + 1) % entries_.size();
    return {&k->second, &a->second};
  }

private:
  struct entry {
    const std::string* op = nullptr;
    const std::string* algorithm = nullptr;
    kind_state* kind = nullptr;
    uint64_t* count = nullptr;
  };
  std::array<entry, 4> entries_{};
  std::size_t next_ = 0;
};

/// One finished op into the totals; `r.mutex` held.
void record(registry& r, const op_metrics& m, bool failed, recent_kinds& recent) {
  ++r.totals.total_ops;
  if (failed) { // counted by kind, under no algorithm
    auto& kind = r.kinds[kind_name(m)];
    ++kind.totals.ops;
    ++r.totals.errors;
    ++kind.totals.errors;
    return;
  }
  auto [kind_of, algorithm_count] = recent.find(r, m);
  auto& kind = *kind_of;
  ++kind.totals.ops;
  r.totals.total_bytes += m.bytes;
  r.totals.wire_bytes += m.wire_bytes;
  kind.totals.bytes += m.bytes;
  kind.totals.wire_bytes += m.wire_bytes;
  ++*algorithm_count;
  double ms = std::chrono::duration<double, std::milli>(m.duration).count();
  remember(r.latencies_ms, ms);
  remember(kind.latencies_ms, ms);
  if (m.duration.count() > 0 && m.bytes > 0) {
    double gbps = static_cast<double>(m.bytes) * 8.0 / static_cast<double>(m.duration.count());
    r.totals.peak_throughput_gbps = std::max(r.totals.peak_throughput_gbps, gbps);
  }
}

} // namespace

namespace metrics_registry {

void fold(finished_batch& batch) {
  auto& r = global();
  std::lock_guard<std::mutex> guard{r.mutex};
  if (batch.folded.load(std::memory_order_relaxed))
    return;
  batch.folded.store(true, std::memory_order_release);
  recent_kinds recent;
  for (const auto& op : batch.ops)
    record(r, op.metrics, op.failed, recent);
}

void watch_pending(std::weak_ptr<pending_ops> source) {
  auto& r = global();
  std::lock_guard<std::mutex> guard{r.sources_mutex};
  drop_expired_sources(r); // a program that makes runtime after runtime keeps only the live ones
  r.sources.push_back(std::move(source));
}

std::shared_ptr<transport::link_counters> register_link(uint32_t comm_id, int rank, int peer) {
  auto counters = std::make_shared<transport::link_counters>();
  auto& r = global();
  std::lock_guard<std::mutex> guard{r.mutex};
  r.links.push_back({comm_id, rank, peer, counters});
  return counters;
}

void count_actor_messages(uint64_t n) noexcept {
  actor_messages.fetch_add(n, std::memory_order_relaxed);
}

void count_link_turn() noexcept {
  link_turns.fetch_add(1, std::memory_order_relaxed);
}

void count_link_chunk() noexcept {
  link_chunks.fetch_add(1, std::memory_order_relaxed);
}

void count_duplicate_chunk() noexcept {
  duplicate_chunks.fetch_add(1, std::memory_order_relaxed);
}

void count_lost_link() noexcept {
  lost_links.fetch_add(1, std::memory_order_relaxed);
}

void count_thread_wakeup() noexcept {
  thread_wakeups.fetch_add(1, std::memory_order_relaxed);
}

} // namespace metrics_registry

metrics_summary get_metrics() {
  fold_every_pending();
  auto& r = global();
  metrics_summary s;
  std::deque<double> all;
  std::map<std::string, std::deque<double>> per_kind;
  {
    std::lock_guard<std::mutex> guard{r.mutex};
    s = r.totals;
    all = r.latencies_ms;
    for (const auto& [name, k] : r.kinds) {
      s.ops[name] = k.totals;
      per_kind[name] = k.latencies_ms;
    }
    for (const auto& l : r.links) {
      const auto& c = *l.counters;
      s.links.push_back({l.comm_id, l.rank, l.peer, c.bytes_sent.load(std::memory_order_relaxed),
                         c.bytes_received.load(std::memory_order_relaxed),
                         c.retransmits.load(std::memory_order_relaxed),
                         c.reconnects.load(std::memory_order_relaxed)});
    }
  }
  s.actor_messages = actor_messages.load(std::memory_order_relaxed);
  s.thread_wakeups = thread_wakeups.load(std::memory_order_relaxed);
  s.link_turns = link_turns.load(std::memory_order_relaxed);
  s.link_chunks = link_chunks.load(std::memory_order_relaxed);
  s.duplicate_chunks_dropped = duplicate_chunks.load(std::memory_order_relaxed);
  s.lost_links = lost_links.load(std::memory_order_relaxed);
  fill_percentiles(all, s.p50_latency_ms, s.p99_latency_ms);
  for (auto& [name, k] : s.ops)
    fill_percentiles(per_kind[name], k.p50_latency_ms, k.p99_latency_ms);
  std::sort(s.links.begin(), s.links.end(), [](const link_metrics& a, const link_metrics& b) {
    return std::tie(a.comm_id, a.rank, a.peer) < std::tie(b.comm_id, b.rank, b.peer);
  });
  return s;
}

actor_traffic get_actor_traffic() {
  return {actor_messages.load(std::memory_order_relaxed), thread_wakeups.load(std::memory_order_relaxed),
          link_turns.load(std::memory_order_relaxed), link_chunks.load(std::memory_order_relaxed)};
}

void reset_metrics() {
  fold_every_pending(); // ops finished before the reset are not counted after it
  auto& r = global();
  std::lock_guard<std::mutex> guard{r.mutex};
  r.totals = metrics_summary{};
  actor_messages.store(0, std::memory_order_relaxed);
  thread_wakeups.store(0, std::memory_order_relaxed);
  link_turns.store(0, std::memory_order_relaxed);
  link_chunks.store(0, std::memory_order_relaxed);
  duplicate_chunks.store(0, std::memory_order_relaxed);
  lost_links.store(0, std::memory_order_relaxed);
  r.latencies_ms.clear();
  r.kinds.clear();
  // Links whose channel is gone (only the registry holds their counters)
  // leave the summary; the others count from zero.
  r.links.erase(std::remove_if(r.links.begin(), r.links.end(),
                               [](const link_entry& l) { return l.counters.use_count() == 1; }),
                r.links.end());
  for (auto& l : r.links)
    l.counters->reset();
}

std::string describe(const metrics_summary& m) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(3);
  out << m.total_ops << " ops (" << m.errors << " errors), " << format_byte_size(m.total_bytes)
      << " (" << format_byte_size(m.wire_bytes) << " sent on the wire), p50 " << m.p50_latency_ms
      << " ms, p99 " << m.p99_latency_ms << " ms, peak " << m.peak_throughput_gbps << " Gbit/s";
  for (const auto& [name, k] : m.ops) {
    out << "; " << name << " " << k.ops;
    std::string algos;
    for (const auto& [algo, n] : k.algorithms)
      algos += (algos.empty() ? "" : ", ") + algo + " " + std::to_string(n);
    if (!algos.empty())
      out << " [" << algos << "]";
  }
  for (const auto& l : m.links)
    out << "; link comm " << l.comm_id << " rank " << l.rank << "->" << l.peer << ": "
        << format_byte_size(l.bytes_sent) << " out, " << format_byte_size(l.bytes_received)
        << " in, " << l.retransmits << " retransmits, " << l.reconnects << " reconnects";
  out << "; actors: " << m.actor_messages << " op-actor messages, " << m.link_turns << " link turns, "
      << m.link_chunks << " chunk messages to links, "
      << m.thread_wakeups << " thread wake-ups";
  if (m.duplicate_chunks_dropped > 0) // only under a fault scenario
    out << "; " << m.duplicate_chunks_dropped << " duplicate chunks dropped";
  return out.str();
}

std::string to_prometheus(const metrics_summary& m, int rank) {
  std::ostringstream out;
  const std::string r = "rank=\"" + std::to_string(rank) + "\"";
  auto family = [&](const char* name, const char* type, const char* help) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  };
  auto per_op = [&](const char* name, const char* type, const char* help, auto value) {
    family(name, type, help);
    for (const auto& [op, k] : m.ops)
      out << name << '{' << r << ",op=\"" << op << "\"} " << value(k) << '\n';
  };
  per_op("mccl_ops_total", "counter", "Ops finished (successful or not).",
         [](const op_kind_metrics& k) { return k.ops; });
  per_op("mccl_op_errors_total", "counter", "Ops that failed.",
         [](const op_kind_metrics& k) { return k.errors; });
  per_op("mccl_op_bytes_total", "counter", "Bytes the ops moved, before compression.",
         [](const op_kind_metrics& k) { return k.bytes; });
  per_op("mccl_op_wire_bytes_total", "counter",
         "Payload bytes this rank sent for the ops, after compression.",
         [](const op_kind_metrics& k) { return k.wire_bytes; });
  per_op("mccl_op_latency_p50_ms", "gauge", "Median op latency over the latest ops.",
         [](const op_kind_metrics& k) { return k.p50_latency_ms; });
  per_op("mccl_op_latency_p99_ms", "gauge", "99th percentile op latency over the latest ops.",
         [](const op_kind_metrics& k) { return k.p99_latency_ms; });
  family("mccl_peak_throughput_gbps", "gauge", "Highest bytes per second of a single op, in Gbit/s.");
  out << "mccl_peak_throughput_gbps{" << r << "} " << m.peak_throughput_gbps << '\n';
  family("mccl_actor_messages_total", "counter", "Messages handled by op actors.");
  out << "mccl_actor_messages_total{" << r << "} " << m.actor_messages << '\n';
  family("mccl_thread_wakeups_total", "counter", "Wake-ups of one thread by another for an op.");
  out << "mccl_thread_wakeups_total{" << r << "} " << m.thread_wakeups << '\n';
  family("mccl_link_turns_total", "counter", "Turns the engine's passes gave link actors.");
  out << "mccl_link_turns_total{" << r << "} " << m.link_turns << '\n';
  family("mccl_link_chunks_total", "counter", "Chunk messages op actors sent link actors (a frame each).");
  out << "mccl_link_chunks_total{" << r << "} " << m.link_chunks << '\n';
  family("mccl_duplicate_chunks_dropped_total", "counter",
         "Copies of chunks an op already had, dropped (fault scenarios).");
  out << "mccl_duplicate_chunks_dropped_total{" << r << "} " << m.duplicate_chunks_dropped << '\n';
  family("mccl_lost_links_total", "counter", "Links that exited with an error; each revoked its communicator.");
  out << "mccl_lost_links_total{" << r << "} " << m.lost_links << '\n';
  auto per_link = [&](const char* name, const char* help, auto value) {
    family(name, "counter", help);
    for (const auto& l : m.links)
      out << name << '{' << r << ",comm=\"" << l.comm_id << "\",peer=\"" << l.peer << "\"} "
          << value(l) << '\n';
  };
  per_link("mccl_link_bytes_sent_total", "Bytes written to the link to a peer.",
           [](const link_metrics& l) { return l.bytes_sent; });
  per_link("mccl_link_bytes_received_total", "Bytes read from the link to a peer.",
           [](const link_metrics& l) { return l.bytes_received; });
  per_link("mccl_link_retransmits_total", "Frames sent again after a CRC32C NACK.",
           [](const link_metrics& l) { return l.retransmits; });
  per_link("mccl_link_reconnects_total", "Lost connections resumed.",
           [](const link_metrics& l) { return l.reconnects; });
  return out.str();
}

void log_metrics() {
  // Asked for explicitly: written whatever the level (write() does not filter).
  log::write(log_level::info, "metrics: " + describe(get_metrics()));
}

} // namespace mccl
