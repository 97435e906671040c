#include "actors/op_thread.hpp"

#include "actors/helper_thread.hpp"

#include <algorithm>

namespace mccl::actors {

op_thread::op_thread(hooks h, std::vector<int> cpus) : hooks_(std::move(h)), cpus_(std::move(cpus)) {
  thread_ = std::thread([this] { loop(); });
}

op_thread::~op_thread() {
  stop();
}

bool op_thread::posted() {
  bool wake = false;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    last_post_ = clock::now();
    // While callers drive their ops, the poll (poll_period) finds ops left
    // behind: waking now would cost every op a context switch, on a core a
    // rank needs (DDP's buckets: every op that ends with more in flight).
    if (announce_) {
      signalled_ = true;
      wake = true;
    }
  }
  if (wake)
    changed_.notify_one();
  return wake;
}

bool op_thread::needed() {
  // A caller that let go usually waits for its next op within
  // microseconds: the same grace as for a fresh op.
  return posted();
}

void op_thread::stop() {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (stopping_ && !thread_.joinable())
      return;
    stopping_ = true;
  }
  changed_.notify_all();
  hooks_.wake_leader();
  if (thread_.joinable())
    thread_.join();
}

void op_thread::loop() {
  start_helper_thread("mccl-op", cpus_);
  std::unique_lock<std::mutex> lock{mutex_};
  for (;;) {
    if (stopping_)
      return;
    if (!signalled_) {
      if (announce_) {
        changed_.wait(lock, [this] { return stopping_ || signalled_; });
      } else if (clock::now() - last_post_ > idle_limit) {
        announce_ = true; // quiet for a while: back to waking on every op
      } else {
        // Callers drive their own ops; look now and then for one that
        // nobody waits for.
        changed_.wait_for(lock, poll_wait_, [this] { return stopping_ || signalled_; });
        if (!signalled_ && !stopping_) {
          lock.unlock();
          bool busy = hooks_.busy();
          bool idle = hooks_.idle();
          lock.lock();
          // An op in flight that a caller drives is not quiet: the gap
          // between two 64 MiB ops (their buffers being refilled) must not
          // make the next post wake this thread.
          if (!idle)
            last_post_ = clock::now();
          signalled_ = busy;
          poll_wait_ = busy ? poll_period : std::min(2 * poll_wait_, poll_period_max);
        }
      }
      continue;
    }
    signalled_ = false;
    // A caller that waits right after issuing takes its op within
    // microseconds: leave it the chance, so issue-then-wait code pays no
    // wake-up when the op completes.
    auto grace_over = last_post_ + caller_grace;
    if (clock::now() < grace_over)
      changed_.wait_until(lock, grace_over, [this] { return stopping_; });
    if (stopping_)
      return;
    lock.unlock();
    bool led = hooks_.busy() && hooks_.drive([this] {
      std::lock_guard<std::mutex> guard{mutex_};
      return stopping_;
    });
    lock.lock();
    // Nobody took the op: wake on every op. A caller took it: callers
    // drive their ops, so posting need not wake this thread.
    announce_ = led;
    poll_wait_ = poll_period;
  }
}

} // namespace mccl::actors
