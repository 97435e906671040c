#include "actors/driving_unit.hpp"

#include <caf/intrusive_ptr.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>

namespace mccl::actors {

driving_unit::driving_unit(caf::actor_system& sys, std::function<void()> wake)
  : caf::execution_unit(&sys), wake_(std::move(wake)) {
}

driving_unit::~driving_unit() {
  detach();
}

void driving_unit::detach() {
  // A queued actor's mailbox is not blocked, so no later message would
  // queue it again: left here, it would never run. CAF's scheduler takes
  // it, with the queue's reference.
  std::deque<caf::resumable*> left;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    detached_ = true;
    left.swap(jobs_);
    foreign_waiting_.store(false, std::memory_order_seq_cst);
  }
  left.insert(left.end(), local_jobs_.begin() + static_cast<std::ptrdiff_t>(local_next_), local_jobs_.end());
  local_jobs_.clear();
  local_next_ = 0;
  for (auto* job : left)
    system().scheduler().enqueue(job);
}

void driving_unit::exec_later(caf::resumable* job) {
  if (on_driver_thread()) {
    // The driver's own queue: only this thread touches it, no lock.
    local_jobs_.push_back(job);
    bump(local_pushes_);
    return;
  }
  {
    std::unique_lock<std::mutex> guard{mutex_};
    if (detached_) {
      guard.unlock();
      system().scheduler().enqueue(job);
      return;
    }
    jobs_.push_back(job);
    // Sequentially consistent: a leader letting go reads it after its
    // fence (driving_unit.hpp, foreign_jobs_waiting()).
    foreign_waiting_.store(true, std::memory_order_seq_cst);
  }
  foreign_pushes_.fetch_add(1, std::memory_order_relaxed);
  if (wake_)
    wake_();
}

std::size_t driving_unit::run_queued(std::size_t max_jobs) {
  draining_.store(true, std::memory_order_relaxed);
  // Jobs pushed by the actors that run below are local pushes: the same
  // thread runs them in this call.
  driver_scope driving{*this};
  std::size_t ran = 0;
  while (ran < max_jobs) {
    caf::resumable* job = next_job();
    if (job == nullptr)
      break;
    ++ran;
    // The same handling of a resume's result as CAF's own workers
    // (caf/scheduler/worker.hpp): the queue's reference stays with a job
    // that wants to run again and is dropped otherwise (an idle actor is
    // queued again, with a new reference, by its next message).
    switch (job->resume(this, max_throughput)) {
      case caf::resumable::resume_later:
        local_jobs_.push_back(job); // this thread drives: its own queue
        break;
      case caf::resumable::awaiting_message:
      case caf::resumable::done:
      case caf::resumable::shutdown_execution_unit:
        intrusive_ptr_release(job);
        break;
    }
  }
  bump(resumes_, ran);
  draining_.store(false, std::memory_order_relaxed);
  return ran;
}

caf::resumable* driving_unit::next_job() {
  // The driver's own jobs first, in the order they were queued; then those
  // queued from other threads, moved over in one go.
  if (local_next_ == local_jobs_.size() && foreign_waiting_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> guard{mutex_};
    local_jobs_.insert(local_jobs_.end(), jobs_.begin(), jobs_.end());
    jobs_.clear();
    foreign_waiting_.store(false, std::memory_order_relaxed);
  }
  if (local_next_ == local_jobs_.size()) {
    local_jobs_.clear();
    local_next_ = 0;
    return nullptr;
  }
  return local_jobs_[local_next_++];
}

bool driving_unit::idle() const {
  if (local_next_ != local_jobs_.size())
    return false;
  std::lock_guard<std::mutex> guard{mutex_};
  return jobs_.empty();
}

driving_unit::counters driving_unit::stats() const {
  counters c;
  c.local_pushes = local_pushes_.load(std::memory_order_relaxed);
  c.foreign_pushes = foreign_pushes_.load(std::memory_order_relaxed);
  c.resumes = resumes_.load(std::memory_order_relaxed);
  c.dispatches = dispatches_.load(std::memory_order_relaxed);
  return c;
}

} // namespace mccl::actors
