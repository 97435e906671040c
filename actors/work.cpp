#include "actors/work.hpp"

#include <thread>

namespace mccl {

work_state::work_state(std::chrono::milliseconds deadline_hint)
  : bound_(deadline_hint + std::chrono::seconds(10)) {
}

void work_state::complete(errc code, std::string message) {
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (done_.load(std::memory_order_relaxed))
      return;
    code_ = code;
    message_ = std::move(message);
    if (in_flight_)
      in_flight_->fetch_sub(1);
    done_.store(true, std::memory_order_release);
    callbacks.swap(callbacks_);
  }
  cv_.notify_all();
  for (auto& cb : callbacks)
    cb();
}

bool work_state::wait_for(std::chrono::nanoseconds timeout) {
  // Spin briefly first: a small op often completes within microseconds, and
  // a sleeping waiter costs a cross-core wake-up (20-55 us on small VMs).
  auto spin_until = std::chrono::steady_clock::now()
                    + std::min<std::chrono::nanoseconds>(timeout, std::chrono::microseconds(30));
  while (!done()) {
    if (std::chrono::steady_clock::now() >= spin_until)
      break;
    std::this_thread::yield();
  }
  if (done())
    return true;
  std::unique_lock<std::mutex> lock{mutex_};
  return cv_.wait_for(lock, timeout, [this] { return done(); });
}

void work_state::set_wait_helper(std::function<void()> helper) {
  std::lock_guard<std::mutex> guard{mutex_};
  wait_helper_ = std::move(helper);
}

void work_state::run_wait_helper() {
  std::function<void()> helper;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (done_.load(std::memory_order_relaxed))
      return;
    helper.swap(wait_helper_);
  }
  if (helper)
    helper();
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

void work_state::set_metrics(op_metrics m) {
  std::lock_guard<std::mutex> guard{mutex_};
  metrics_ = std::move(m);
}

op_metrics work_state::metrics() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return metrics_;
}

op_metrics work::metrics() const { return state_ ? state_->metrics() : op_metrics{}; }

void work::wait() const {
  if (!state_)
    throw error(errc::invalid_argument, "wait() on an empty work handle");
  state_->run_wait_helper();
  if (!state_->wait_for(state_->wait_bound()))
    throw error(errc::internal, "op did not finish within its deadline plus 10 s although the "
                                "watchdog should have failed it; please report this");
  if (auto f = state_->failure())
    throw *f;
}

bool work::wait_for(std::chrono::milliseconds timeout) const {
  if (!state_)
    throw error(errc::invalid_argument, "wait_for() on an empty work handle");
  if (!state_->wait_for(timeout))
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
