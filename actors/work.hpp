#pragma once
/// Work: the handle every op returns. wait() blocks until the op finished
/// (or throws its error), moving the op's bytes itself while no other
/// thread does; every wait is bounded because the watchdog fails any op
/// that passes MCCL_TIMEOUT_MS.

#include "collectives/op.hpp"
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
  /// From the engine starting the op to its end.
  std::chrono::nanoseconds duration{0};
  /// Which thread moved its bytes when it completed: the one that issued
  /// or waited for it, the communicator's op thread, or the progress actor.
  driver_kind driver = driver_kind::caller;
  /// driver == caller: the op ran on the thread that issued it
  /// (MCCL_INLINE_BYTES) or waited for it.
  bool inline_run = false;
  /// driver == op_thread (MCCL_OP_THREAD_BYTES).
  bool op_thread = false;
};

/// Shared between the caller's handle and the engine that completes it.
class work_state : public op_completion {
public:
  /// `op`: what metrics name the op ("allreduce", a custom collective's name).
  work_state(std::chrono::milliseconds deadline_hint, std::string op);

  /// From the engine, once; later calls are ignored.
  void complete(op_report report) override;
  /// The same without metrics (an op refused before the engine saw it).
  void complete(errc code, std::string message);

  bool done() const noexcept { return done_.load(std::memory_order_acquire); }
  /// Blocks until done or `deadline`; true when done. Meanwhile the
  /// waiting thread drives the op's engine whenever no other thread does
  /// (set_driver), so a caller that waits pays no thread hand-off.
  bool wait_until(std::chrono::steady_clock::time_point deadline);
  std::optional<error> failure() const;
  void add_callback(std::function<void()> cb);
  /// How a waiting thread moves the op: drives its engine until `state`
  /// (this op) is done or `deadline`, and returns false at once when
  /// another thread drives it (then the waiter sleeps until the op
  /// completes).
  using driver_fn =
    std::function<bool(const work_state& state, std::chrono::steady_clock::time_point deadline)>;
  void set_driver(driver_fn drive);
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
  driver_fn driver_;
  op_metrics metrics_;
  std::chrono::milliseconds bound_;
};

/// The caller's handle to one op.
class work {
public:
  work() = default;
  explicit work(std::shared_ptr<work_state> s) : state_(std::move(s)) {}

  /// Blocks until the op is done; throws mccl::error when it failed.
  void wait() const;

  /// Blocks up to `timeout` (driving the op meanwhile, as wait() does).
  /// Returns false if the op is still running; throws mccl::error when it
  /// failed.
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
