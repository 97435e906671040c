#pragma once
/// mccl's side of a Work (include/mccl/work.hpp): the op's outcome, its
/// metrics, the callbacks, and how a thread that waits drives the op.

#include "collectives/engine/op.hpp"

#include <mccl/error.hpp>
#include <mccl/work.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mccl {

namespace actors {
class driving_unit;
class metrics_feed;
}

/// Shared between the caller's handle and the engine that completes it.
class work_state : public op_completion {
public:
  /// `op`: what metrics name the op ("allreduce", a custom collective's
  /// name); `metrics`: where its metrics go once it is done (its runtime's
  /// metrics actor), not null; `unit`: where the communicator that
  /// completes it runs the metrics actor (metrics_feed::add,
  /// comm_core::idle_unit()), which outlives its ops' completions.
  work_state(std::chrono::milliseconds deadline_hint, std::string op,
             std::shared_ptr<actors::metrics_feed> metrics, actors::driving_unit& unit);

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
  /// Both completions: one lock for the outcome and the metrics (`r`).
  void finish(errc code, std::string message, op_report* r);

  std::atomic<bool> done_{false};
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  int sleepers_ = 0; ///< threads asleep in wait_until (under mutex_): finishing wakes them
  errc code_ = errc::none;
  std::string message_;
  std::vector<std::function<void()>> callbacks_;
  driver_fn driver_;
  op_metrics metrics_;
  std::shared_ptr<actors::metrics_feed> feed_;
  actors::driving_unit* unit_;
  std::chrono::milliseconds bound_;
};

} // namespace mccl
