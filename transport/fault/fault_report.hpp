#pragma once
/// The fault report: every fault this rank injected (fault_connection.hpp)
/// and every reaction of the runtime it saw (NACK, retransmit, recovery,
/// a peer declared dead, a link down, a peer's ABORT, each op's outcome),
/// written at finalize as text and JSON (docs/fault-injection.md).
///
/// Thread-safe: links, the inline path, the fault clock and Work callbacks
/// all record here.

#include "transport/wire/frame.hpp"

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mccl::transport {

/// Which chunk an event is about; valid is false for link- or rank-wide ones.
struct frame_key {
  uint64_t seq = 0; ///< op sequence number (message number for point-to-point)
  uint32_t step = 0;
  uint32_t chunk = 0;
  bool p2p = false;
  bool valid = false;
};

/// The chunk a frame carries.
inline frame_key key_of(const wire::frame_header& h) {
  return frame_key{h.seq, h.step, h.chunk, (h.flags & wire::flag_p2p) != 0, true};
}

class fault_recorder {
public:
  /// `prefix`: the report goes to prefix + ".txt" and prefix + ".json".
  fault_recorder(int rank, std::string scenario, uint64_t seed, std::string prefix);

  /// A fault this rank injected; `peer` is -1 for rank faults.
  void fault(const std::string& kind, int peer, const frame_key& key, const std::string& detail);

  /// A reaction of the runtime on this rank. A retransmit or NACK of a
  /// chunk this rank corrupted itself gets the detection latency.
  void reaction(const std::string& kind, int peer, const frame_key& key, const std::string& detail);

  /// One op's outcome. `crc`: every chunk it received was CRC32C-checked
  /// (MCCL_TRANSPORT_CRC), so a successful op's data is verified.
  void op(const std::string& name, const std::string& algorithm, uint64_t seq, bool ok,
          const std::string& error, bool crc, double duration_ms);

  /// Writes both files (again, if called twice); errors are logged.
  void write();

  /// For tests and the text report.
  std::string text() const;
  std::string json() const;
  const std::string& prefix() const noexcept { return prefix_; }
  std::size_t fault_count() const;
  std::size_t reaction_count(const std::string& kind) const;

private:
  using clock = std::chrono::steady_clock;
  struct event {
    std::string kind;
    int peer = -1;
    frame_key key;
    std::string detail;
    double t_ms = 0;       ///< since the recorder started
    int64_t unix_ms = 0;   ///< wall clock, to line reports of several ranks up
    std::optional<double> latency_ms; ///< reactions: since the fault they answer
    bool answered = false; ///< faults: a reaction was matched to it
  };
  struct op_outcome {
    std::string name, algorithm, error;
    uint64_t seq = 0;
    bool ok = false, crc = false;
    double duration_ms = 0;
  };
  event stamp(const std::string& kind, int peer, const frame_key& key, const std::string& detail) const;

  int rank_;
  std::string scenario_;
  uint64_t seed_;
  std::string prefix_;
  clock::time_point start_ = clock::now();
  mutable std::mutex mutex_;
  std::vector<event> faults_;
  std::vector<event> reactions_;
  std::vector<op_outcome> ops_;
};

} // namespace mccl::transport
