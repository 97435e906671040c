#include "actors/driving_unit.hpp"

#include <caf/intrusive_ptr.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>

namespace mccl::actors {

driving_unit::driving_unit(caf::actor_system& sys, std::function<void()> wake)
  : caf::execution_unit(&sys), wake_(std::move(wake)) {
}

driving_unit::~driving_unit() {
  // A queued actor's mailbox is not blocked, so no later message would
  // queue it again: left here, it would never run. CAF's scheduler takes
  // it, with the queue's reference.
  std::deque<caf::resumable*> left;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    left.swap(jobs_);
  }
  for (auto* job : left)
    system().scheduler().enqueue(job);
}

void driving_unit::exec_later(caf::resumable* job) {
  bool local = on_driver_thread();
  {
    std::lock_guard<std::mutex> guard{mutex_};
    jobs_.push_back(job);
  }
  if (local) {
    local_pushes_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  foreign_pushes_.fetch_add(1, std::memory_order_relaxed);
  if (wake_)
    wake_();
}

std::size_t driving_unit::drain(std::size_t max_jobs) {
  // Called from inside a handler that this thread's drain runs: that drain
  // runs what was queued, once the handler returns.
  if (draining_.load(std::memory_order_relaxed))
    return 0;
  draining_.store(true, std::memory_order_relaxed);
  // Jobs pushed by the actors that run below are local pushes: the same
  // thread runs them in this call.
  driver_scope driving{*this};
  std::size_t ran = 0;
  while (ran < max_jobs) {
    caf::resumable* job = nullptr;
    {
      std::lock_guard<std::mutex> guard{mutex_};
      if (jobs_.empty())
        break;
      job = jobs_.front();
      jobs_.pop_front();
    }
    ++ran;
    // The same handling of a resume's result as CAF's own workers
    // (caf/scheduler/worker.hpp): the queue's reference stays with a job
    // that wants to run again and is dropped otherwise (an idle actor is
    // queued again, with a new reference, by its next message).
    switch (job->resume(this, max_throughput)) {
      case caf::resumable::resume_later: {
        std::lock_guard<std::mutex> guard{mutex_};
        jobs_.push_back(job);
        break;
      }
      case caf::resumable::awaiting_message:
      case caf::resumable::done:
      case caf::resumable::shutdown_execution_unit:
        intrusive_ptr_release(job);
        break;
    }
  }
  resumes_.fetch_add(ran, std::memory_order_relaxed);
  draining_.store(false, std::memory_order_relaxed);
  return ran;
}

bool driving_unit::idle() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return jobs_.empty();
}

driving_unit::counters driving_unit::stats() const {
  counters c;
  c.local_pushes = local_pushes_.load(std::memory_order_relaxed);
  c.foreign_pushes = foreign_pushes_.load(std::memory_order_relaxed);
  c.resumes = resumes_.load(std::memory_order_relaxed);
  return c;
}

} // namespace mccl::actors
