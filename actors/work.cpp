#include "actors/work_state.hpp"
#include "actors/metrics_actor.hpp"
#include "collectives/observability/metrics_registry.hpp"

#include <thread>

namespace mccl {

work_state::work_state(std::chrono::milliseconds deadline_hint, std::string op,
                       std::shared_ptr<actors::metrics_feed> metrics, actors::driving_unit& unit)
  : feed_(std::move(metrics)), unit_(&unit), bound_(deadline_hint + std::chrono::seconds(10)) {
  metrics_.op = std::move(op);
}

void work_state::complete(op_report r) {
  finish(r.code, std::move(r.message), &r);
}

void work_state::complete(errc code, std::string message) {
  finish(code, std::move(message), nullptr);
}

void work_state::finish(errc code, std::string message, op_report* r) {
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (done_.load(std::memory_order_relaxed))
      return;
    if (r) {
      metrics_.algorithm = std::move(r->algorithm);
      metrics_.seq = r->seq;
      metrics_.bytes = r->bytes;
      metrics_.wire_bytes = r->wire_bytes;
      metrics_.duration = r->duration;
      metrics_.driver = r->driver;
      metrics_.inline_run = r->driver == driver_kind::caller;
      metrics_.op_thread = r->driver == driver_kind::op_thread;
    }
    code_ = code;
    message_ = std::move(message);
    driver_ = nullptr; // it holds the engine; nothing drives a finished op
    done_.store(true, std::memory_order_release);
    callbacks.swap(callbacks_);
    if (sleepers_ > 0)
      metrics_registry::count_thread_wakeup();
  }
  cv_.notify_all();
  feed_->add(metrics_, code != errc::none, unit_);
  for (auto& cb : callbacks)
    cb();
}

bool work_state::wait_until(std::chrono::steady_clock::time_point deadline) {
  using clock = std::chrono::steady_clock;
  while (!done()) {
    auto now = clock::now();
    if (now >= deadline)
      return false;
    driver_fn drive;
    {
      std::lock_guard<std::mutex> guard{mutex_};
      drive = driver_;
    }
    if (drive && drive(*this, deadline))
      continue; // drove until done, the deadline, or another thread took over
    // Another thread drives: it completes the op. A small op often does so
    // within microseconds, and sleeping costs a cross-core wake-up (20-55 us
    // on small VMs): spin briefly, then sleep, looking again now and then in
    // case that thread lets go first.
    auto spin_until = std::min(deadline, now + std::chrono::microseconds(30));
    while (!done() && clock::now() < spin_until)
      std::this_thread::yield();
    std::unique_lock<std::mutex> lock{mutex_};
    ++sleepers_;
    cv_.wait_for(lock, std::min<clock::duration>(deadline - now, std::chrono::milliseconds(1)),
                 [this] { return done(); });
    --sleepers_;
  }
  return true;
}

void work_state::set_driver(driver_fn drive) {
  std::lock_guard<std::mutex> guard{mutex_};
  if (!done_.load(std::memory_order_relaxed))
    driver_ = std::move(drive);
}

std::optional<error> work_state::failure() const {
  std::lock_guard<std::mutex> guard{mutex_};
  if (!done() || code_ == errc::none)
    return std::nullopt;
  return error(code_, message_);
}

void work_state::add_callback(std::function<void()> cb) {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (!done_.load(std::memory_order_relaxed)) {
      callbacks_.push_back(std::move(cb));
      return;
    }
  }
  cb();
}

op_metrics work_state::metrics() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return metrics_;
}

op_metrics work::metrics() const { return state_ ? state_->metrics() : op_metrics{}; }

void work::wait() const {
  if (!state_)
    throw error(errc::invalid_argument, "wait() on an empty work handle");
  // An op done in its call (every small one) needs no deadline: no clock
  // read (some 25 ns on the VMs measured, of a 1-10 us op).
  if (!state_->done() && !state_->wait_until(std::chrono::steady_clock::now() + state_->wait_bound()))
    throw error(errc::internal, "op did not finish within its deadline plus 10 s although the "
                                "watchdog should have failed it; please report this");
  if (auto f = state_->failure())
    throw *f;
}

bool work::wait_for(std::chrono::milliseconds timeout) const {
  if (!state_)
    throw error(errc::invalid_argument, "wait_for() on an empty work handle");
  if (!state_->wait_until(std::chrono::steady_clock::now() + timeout))
    return false;
  if (auto f = state_->failure())
    throw *f;
  return true;
}

bool work::test() const noexcept { return state_ && state_->done(); }

bool work::ok() const noexcept { return test() && !state_->failure(); }

std::optional<error> work::failure() const {
  return state_ ? state_->failure() : std::nullopt;
}

void work::on_complete(std::function<void()> cb) const {
  if (state_)
    state_->add_callback(std::move(cb));
}

} // namespace mccl
