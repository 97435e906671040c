#pragma once
/// The flight recorder: the last N ops of one communicator (op, sequence
/// number, size, algorithm, state, timings), kept so that when the
/// communicator aborts or an op times out the log shows what led up to it,
/// not only the op that failed. N is MCCL_FLIGHT_RECORDER; 0 turns it off.
///
/// Thread-safe: the engine's leader records ops as they start and end,
/// dumps come from the control plane; one mutex, a few hundred nanoseconds
/// per op.

#include "collectives/engine/op.hpp"

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mccl {

class flight_recorder {
public:
  enum class state : uint8_t { running, done, failed, aborted };

  /// What is known of an op when it starts.
  /// Kept as fields, put into words only by dump(): an op's start costs
  /// no formatting.
  struct op_info {
    op_kind kind = op_kind::allreduce;
    std::string custom_name; ///< custom ops: the registered name
    int peer = -1;           ///< send and recv: the other rank
    uint32_t tag = 0;        ///< send and recv
    bool collective = true;  ///< numbered by the communicator's sequence
    uint64_t seq = 0;        ///< that sequence number (send: its message number)
    std::size_t bytes = 0;
    std::string algorithm;
    driver_kind driver = driver_kind::op_thread; ///< who drove the engine when it started
  };

  explicit flight_recorder(std::size_t capacity) : capacity_(capacity) {}

  std::size_t capacity() const noexcept { return capacity_; }

  using clock = std::chrono::steady_clock;

  /// Records an op started `at`; the ticket names it in later calls. With
  /// capacity 0 nothing is kept (tickets are still handed out).
  uint64_t started(op_info info, clock::time_point at = clock::now());
  /// The op ended (done or failed) `at`; later calls for it are ignored,
  /// so the first cause sticks. An op that fell out of the window is
  /// ignored.
  void ended(uint64_t ticket, state how, clock::time_point at = clock::now());
  /// Every op still running becomes `aborted` (the communicator aborted).
  void abort_running();

  /// Highest sequence number of a collective that was started / that
  /// completed successfully, among those recorded.
  std::optional<uint64_t> last_enqueued_seq() const;
  std::optional<uint64_t> last_completed_seq() const;
  /// "last enqueued seq 7, last completed seq 5" (or "none").
  std::string progress_note() const;

  /// One line per op, oldest first, for the ERROR log; `why` heads it.
  std::string dump(int rank, uint32_t comm_id, const std::string& why) const;

private:
  struct entry {
    uint64_t ticket;
    op_info info;
    state how;
    clock::time_point start;
    clock::duration took{};
  };
  entry* find(uint64_t ticket);
  /// Calls f(entry) for every entry kept, oldest first.
  template <class F>
  void each(F f) const {
    for (auto t = next_ticket_ - ring_.size(); t < next_ticket_; ++t)
      f(ring_[t % capacity_]);
  }

  std::size_t capacity_;
  mutable std::mutex mutex_;
  /// The last ops, at most capacity_: ticket t in slot t % capacity_. A
  /// ring, not a queue: once full, an op's start overwrites the oldest in
  /// place, allocating nothing.
  std::vector<entry> ring_;
  uint64_t next_ticket_ = 0;
  // Kept outside the window, so they stay right when entries fall out.
  std::optional<uint64_t> last_enqueued_;
  std::optional<uint64_t> last_completed_;
};

/// What the recorder keeps of `op` (numbered already) on a world of `world`.
flight_recorder::op_info recorded_op(const issued_op& op, int world, std::string_view algorithm,
                                     driver_kind driver);

/// "allreduce", "send to rank 2 message 3 tag 7", "recv from rank 1 tag 7",
/// a custom op's name.
std::string what(const flight_recorder::op_info& info);

/// "running", "done", "failed", "aborted".
const char* to_string(flight_recorder::state s) noexcept;

} // namespace mccl
