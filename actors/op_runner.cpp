#include "actors/op_runner.hpp"

#include "actors/work.hpp"

#include <algorithm>

namespace mccl::actors {

op_runner::op_runner(int rank, run_fn run_here, pass_fn pass_on)
  : rank_(rank), run_here_(std::move(run_here)), pass_on_(std::move(pass_on)) {
  thread_ = std::thread([this] { loop(); });
}

op_runner::~op_runner() {
  stop("the communicator was destroyed", nullptr);
}

void op_runner::push(op_ptr op) {
  std::weak_ptr<op_runner> self = weak_from_this();
  const op_request* raw = op.get();
  op->work->set_wait_helper([self, raw] {
    if (auto r = self.lock())
      r->help(raw);
  });
  bool wake = false;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    pending_.fetch_add(1, std::memory_order_acq_rel);
    queue_.push_back(std::move(op));
    pushed_.push_back(clock::now());
    last_push_ = pushed_.back();
    wake = announce_;
  }
  if (wake)
    changed_.notify_all();
}

void op_runner::help(const op_request* op) {
  std::unique_lock<std::mutex> lock{mutex_};
  auto at = std::find_if(queue_.begin(), queue_.end(), [&](const op_ptr& o) { return o.get() == op; });
  if (stopping_ || running_ || at == queue_.end())
    return; // the op thread has it (or had it): the caller just waits
  // Waited for right after it was issued: this caller issues and waits, so
  // later ops need not wake the op thread (it still looks every
  // poll_period, for an op nobody waits for).
  if (clock::now() - pushed_[static_cast<std::size_t>(at - queue_.begin())] < caller_grace)
    announce_ = false;
  running_ = true;
  for (bool last = false; !last && !queue_.empty();) {
    auto next = std::move(queue_.front());
    queue_.pop_front();
    pushed_.pop_front();
    last = next.get() == op;
    lock.unlock();
    process(next, runner::waiting_caller);
    lock.lock();
  }
  running_ = false;
  bool wake = !queue_.empty() || stopping_; // the op thread takes over what is left
  lock.unlock();
  if (wake)
    changed_.notify_all();
}

void op_runner::loop() {
  std::unique_lock<std::mutex> lock{mutex_};
  auto has_work = [this] { return stopping_ || (!running_ && !queue_.empty()); };
  for (;;) {
    if (stopping_)
      return;
    auto now = clock::now();
    if (running_ || queue_.empty()) {
      if (announce_) {
        changed_.wait(lock, has_work);
      } else if (queue_.empty() && now - last_push_ > idle_limit) {
        announce_ = true; // quiet for a while: back to waking on every op
      } else {
        changed_.wait_until(lock, now + poll_period, has_work);
      }
      continue;
    }
    // A caller that waits right after issuing takes the op itself within
    // microseconds (help()): leave it the chance, so issue-then-wait code
    // pays no wake-up when the op completes.
    auto grace_over = pushed_.front() + caller_grace;
    if (now < grace_over) {
      changed_.wait_until(lock, grace_over, [this] { return stopping_ || running_ || queue_.empty(); });
      continue;
    }
    // Nobody waited for this op at once: wake on every op again.
    announce_ = true;
    auto next = std::move(queue_.front());
    queue_.pop_front();
    pushed_.pop_front();
    running_ = true;
    lock.unlock();
    process(next, runner::op_thread);
    lock.lock();
    running_ = false;
    changed_.notify_all(); // stop() may wait for this op
  }
}

void op_runner::process(const op_ptr& op, runner who) {
  if (!run_here_(*op, who))
    pass_on_(op);
  pending_.fetch_sub(1, std::memory_order_acq_rel);
}

void op_runner::stop(const std::string& why, const std::function<void()>& end_running_op) {
  std::deque<op_ptr> left;
  bool running = false;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    stopping_ = true; // nothing starts any more
    left.swap(queue_);
    pushed_.clear();
    running = running_;
  }
  changed_.notify_all();
  if (running && end_running_op)
    end_running_op();
  {
    std::unique_lock<std::mutex> lock{mutex_};
    changed_.wait(lock, [this] { return !running_; });
  }
  if (thread_.joinable())
    thread_.join();
  for (auto& op : left) {
    auto what = describe(*op);
    op->work->complete(errc::finalized, what + " on rank " + std::to_string(rank_) + ": " + why
                                          + " before the op started");
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

} // namespace mccl::actors
