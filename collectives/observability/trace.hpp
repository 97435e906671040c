#pragma once
/// MCCL_TRACE=DIR: a timeline of one communicator on one rank, in Chrome's
/// trace event format (JSON; Perfetto and chrome://tracing open it):
///   - every op as an async slice (name, seq, algorithm, bytes, bytes sent,
///     outcome), on the communicator's "ops" track;
///   - every data chunk sent and received as an instant (peer, step, chunk,
///     bytes) on the "chunks" track;
///   - the engine's waits (its thread asleep while ops were in flight, no
///     byte to move) as slices on the "waits" track.
/// Written when the communicator is finalized, to
/// DIR/mccl-trace.rank<R>.comm<C>.json; tools/mccl-trace merges the ranks'
/// files into one. Timestamps are wall-clock microseconds, so ranks of one
/// host line up (across hosts, as well as their clocks agree).
///
/// Thread-safe; recording costs one short lock per event. At most
/// max_events are kept per communicator; later ones are counted as dropped.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace mccl {

class trace_recorder {
public:
  using clock = std::chrono::steady_clock;
  static constexpr std::size_t max_events = 1000000;

  trace_recorder(std::string dir, int rank, uint32_t comm_id);

  void op(const std::string& name, bool collective, uint64_t seq, const std::string& algorithm,
          std::size_t bytes, std::size_t wire_bytes, clock::time_point start, clock::time_point end,
          bool ok);
  void chunk(bool sent, int peer, uint64_t seq, uint32_t step, uint32_t chunk, std::size_t bytes,
             clock::time_point at);
  void wait(clock::time_point start, clock::time_point end);

  /// Writes the file (replacing an earlier one). Returns its path; throws
  /// mccl::error(invalid_config) naming MCCL_TRACE when it cannot.
  std::string write() const;

private:
  struct event {
    char kind; ///< 'o' op, 's'/'r' chunk sent/received, 'w' wait
    bool ok = true;
    bool collective = true;
    int peer = -1;
    uint32_t step = 0;
    uint32_t chunk = 0;
    uint64_t seq = 0;
    std::size_t bytes = 0;
    std::size_t wire_bytes = 0;
    clock::time_point start;
    clock::time_point end;
    std::string name;
    std::string algorithm;
  };
  void add(event e);
  double wall_us(clock::time_point t) const;

  std::string dir_;
  int rank_;
  uint32_t comm_id_;
  /// system_clock - steady_clock when the recorder was made, in us.
  double wall_offset_us_;
  mutable std::mutex mutex_;
  std::vector<event> events_;
  std::size_t dropped_ = 0;
};

} // namespace mccl
