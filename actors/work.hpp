#pragma once
/// Work: the handle every op returns. wait() blocks until the op finished
/// (or throws its error); every wait is bounded because the watchdog fails
/// any op that passes MCCL_TIMEOUT_MS.

#include "config/error.hpp"

#include <atomic>
#include <cstdint>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mccl {

/// What the runtime recorded about one op; complete once the op is done.
struct op_metrics {
  std::string op;        ///< "allreduce", "send", or a custom collective's name
  std::string algorithm; ///< the algorithm that ran it ("ring", "rd", ...)
  uint64_t seq = 0;      ///< sequence number (message number for send)
  std::size_t bytes = 0; ///< the size the algorithm was chosen by
  /// From the progress actor (or the inline path) taking the op to its
  /// completion.
  std::chrono::nanoseconds duration{0};
  /// True when the op ran inline on the thread that issued it
  /// (MCCL_INLINE_BYTES, or a caller that waited for an op queued on the op
  /// thread); false when the op thread or mccl's actors ran it.
  bool inline_run = false;
  /// True when the communicator's op thread ran it (MCCL_OP_THREAD_BYTES).
  bool op_thread = false;
};

/// Shared between the caller's handle and the progress actor that completes it.
class work_state {
public:
  explicit work_state(std::chrono::milliseconds deadline_hint);

  /// Called once by the runtime; later calls are ignored.
  void complete(errc code = errc::none, std::string message = {});

  bool done() const noexcept { return done_.load(std::memory_order_acquire); }
  /// Blocks up to `timeout`; true when done.
  bool wait_for(std::chrono::nanoseconds timeout);
  std::optional<error> failure() const;
  void add_callback(std::function<void()> cb);
  /// Run once by the first untimed wait() that finds the op not done yet,
  /// on the waiting thread (the op thread, op_runner.hpp, lets the caller
  /// run a queued op itself rather than sleep until it is done).
  void set_wait_helper(std::function<void()> helper);
  void run_wait_helper();
  /// Set by the runtime before complete().
  void set_metrics(op_metrics m);
  /// Counts the op in `in_flight` (the caller has incremented it) until it
  /// completes; decremented before any waiter is released, so a caller that
  /// issues its next op right after wait() sees the count without it.
  void track(std::shared_ptr<std::atomic<int>> in_flight) { in_flight_ = std::move(in_flight); }
  op_metrics metrics() const;

  /// How long wait() may block at most before reporting a runtime bug: the
  /// op deadline plus a grace period, since the watchdog must have fired.
  std::chrono::milliseconds wait_bound() const noexcept { return bound_; }

private:
  std::atomic<bool> done_{false};
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  errc code_ = errc::none;
  std::string message_;
  std::vector<std::function<void()>> callbacks_;
  std::function<void()> wait_helper_;
  op_metrics metrics_;
  std::chrono::milliseconds bound_;
  std::shared_ptr<std::atomic<int>> in_flight_;
};

/// The caller's handle to one op.
class work {
public:
  work() = default;
  explicit work(std::shared_ptr<work_state> s) : state_(std::move(s)) {}

  /// Blocks until the op is done; throws mccl::error when it failed.
  void wait() const;

  /// Blocks up to `timeout`. Returns false if the op is still running;
  /// throws mccl::error when it failed.
  bool wait_for(std::chrono::milliseconds timeout) const;

  /// Non-blocking: true once the op finished (successfully or not).
  bool test() const noexcept;

  /// True when the op finished without error.
  bool ok() const noexcept;

  /// The failure, if the op finished with one.
  std::optional<error> failure() const;

  /// Runs `cb` once the op finished (immediately if it already has). It runs
  /// on an mccl thread: keep it short and never wait on mccl inside it.
  void on_complete(std::function<void()> cb) const;

  bool valid() const noexcept { return static_cast<bool>(state_); }
  /// The op, algorithm, sequence, size and duration; fully filled in once
  /// the op is done (test() is true).
  op_metrics metrics() const;

private:
  std::shared_ptr<work_state> state_;
};

} // namespace mccl
