#pragma once
/// What this process's mccl did: ops, bytes, latencies and per-link
/// counters over every communicator, since the start or the last
/// reset_metrics(). Recorded as ops finish and as links move bytes, at the
/// cost of a few relaxed atomic adds per frame and one short lock per op.
///
///   auto m = mccl::get_metrics();
///   std::cout << m.total_ops << " ops, p99 " << m.p99_latency_ms << " ms\n";
///   mccl::log_metrics();   // the same as one line on stderr

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mccl {

/// One kind of op ("allreduce", "send", a custom collective's name).
struct op_kind_metrics {
  uint64_t ops = 0;        ///< finished, successful or not
  uint64_t errors = 0;     ///< of those, failed
  uint64_t bytes = 0;      ///< the ops' sizes (what the caller asked to move)
  uint64_t wire_bytes = 0; ///< payload bytes this rank sent for them (after compression)
  double p50_latency_ms = 0;
  double p99_latency_ms = 0;
  /// algorithm -> ops it ran ("ring" -> 12)
  std::map<std::string, uint64_t> algorithms;
};

/// One link: this rank's connection to `peer` in communicator `comm_id`.
struct link_metrics {
  uint32_t comm_id = 0;
  int rank = 0; ///< this rank, in that communicator
  int peer = 0;
  uint64_t bytes_sent = 0;     ///< headers and payloads written
  uint64_t bytes_received = 0; ///< headers and payloads read
  uint64_t retransmits = 0;    ///< frames sent again after a CRC32C NACK
  uint64_t reconnects = 0;     ///< lost connections resumed (MCCL_RECONNECT_MS)
};

struct metrics_summary {
  uint64_t total_ops = 0;
  uint64_t errors = 0;
  uint64_t total_bytes = 0; ///< before compression
  uint64_t wire_bytes = 0;  ///< payload bytes sent, after compression
  /// Over the most recent 100000 successful ops (op_kind_metrics: of that
  /// kind). The windows cost 16 B per op until full: at most 800 KB per
  /// op kind plus 800 KB (docs/troubleshooting.md).
  double p50_latency_ms = 0;
  double p99_latency_ms = 0;
  /// The highest bytes / duration of any single op, in gigabits per second.
  double peak_throughput_gbps = 0;
  std::map<std::string, op_kind_metrics> ops; ///< by op name
  std::vector<link_metrics> links;            ///< by communicator, then peer
  /// How ops moved between actors and threads (docs/ARCHITECTURE.md, "no
  /// thread hop on an op's path"): messages handled by op actors (start,
  /// chunk, sent, fail), and wake-ups of one thread by another for an op
  /// (a leader blocked in the engine's wait knocked, a background driver
  /// called in, work queued for a communicator's actors from a thread not
  /// driving them, a caller asleep in wait() woken).
  uint64_t actor_messages = 0;
  uint64_t thread_wakeups = 0;
  /// Turns the engine's passes gave link actors (a link_turn message each:
  /// the link's channel read and written in its actor's handler), one per
  /// link a pass visits: a thread that spins on an op counts one per try.
  uint64_t link_turns = 0;
  /// Chunk messages op actors sent link actors: a frame each, handed to
  /// the link to queue on its channel.
  uint64_t link_chunks = 0;
  /// Copies of chunks an op already had, dropped before its algorithm saw
  /// them (a fault scenario's duplicated chunk messages; docs/fault-injection.md).
  uint64_t duplicate_chunks_dropped = 0;
  /// Link actors that exited with an error (a lost peer), each making its
  /// communicator's supervisor revoke the communicator.
  uint64_t lost_links = 0;
};

/// The summary now.
metrics_summary get_metrics();

/// metrics_summary's actor_messages, thread_wakeups, link_turns and
/// link_chunks alone: four relaxed loads, cheap enough to read around a
/// single op.
struct actor_traffic {
  uint64_t actor_messages = 0;
  uint64_t thread_wakeups = 0;
  uint64_t link_turns = 0;
  uint64_t link_chunks = 0;
};
actor_traffic get_actor_traffic();

/// Zeroes every counter (links that still exist keep counting from 0).
void reset_metrics();

/// One line: "12 ops (0 errors), 48.0 MiB (24.0 MiB on the wire), p50 1.2
/// ms, p99 3.4 ms, peak 9.1 Gbit/s; allreduce 10 [rd 8, ring 2], ...;
/// links: comm 0 rank 0<->1 24.0 MiB out, 24.0 MiB in, 0 retransmits, 0
/// reconnects".
std::string describe(const metrics_summary& m);

/// `m` in Prometheus' text exposition format (version 0.0.4), every
/// sample labelled with `rank` (the process's rank in its world
/// communicator): what MCCL_METRICS_PORT serves at /metrics. Counters:
/// mccl_ops_total, mccl_op_errors_total, mccl_op_bytes_total,
/// mccl_op_wire_bytes_total (by op), mccl_link_bytes_sent_total,
/// mccl_link_bytes_received_total, mccl_link_retransmits_total,
/// mccl_link_reconnects_total (by comm and peer); gauges
/// mccl_op_latency_p50_ms, mccl_op_latency_p99_ms (by op),
/// mccl_peak_throughput_gbps; counters mccl_actor_messages_total,
/// mccl_thread_wakeups_total, mccl_link_turns_total, mccl_link_chunks_total,
/// mccl_duplicate_chunks_dropped_total, mccl_lost_links_total.
std::string to_prometheus(const metrics_summary& m, int rank);

/// Writes describe(get_metrics()) to stderr through mccl's logger,
/// whatever MCCL_LOG_LEVEL says (it was asked for).
void log_metrics();

} // namespace mccl
