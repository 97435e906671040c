#include "work_mccl.hpp"

#include "torch_visible_error.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace mccl::torch_backend {

namespace {

/// Completing a torch future runs its callbacks (DDP hooks, Python code) on
/// the completing thread. mccl's completion callbacks run on mccl threads
/// that must never block, so completions are handed to this one thread.
class completion_thread {
public:
  static completion_thread& instance() {
    // Never destroyed: it must outlive any Work completing at exit.
    static auto* t = new completion_thread();
    return *t;
  }

  void post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> guard{mutex_};
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

private:
  completion_thread() {
    std::thread([this] { run(); }).detach();
  }

  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock{mutex_};
        cv_.wait(lock, [this] { return !tasks_.empty(); });
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
};

/// torch's classification of an op's failure (Backend::getError).
::c10d::ErrorType error_type_of(const std::exception_ptr& failure) {
  auto code = mccl_code_of(failure);
  if (!code)
    return ::c10d::ErrorType::COMM_ERROR;
  switch (*code) {
    case errc::timeout:
      return ::c10d::ErrorType::TIMEOUT;
    case errc::peer_lost:
    case errc::aborted:
    case errc::desync:
    case errc::revoked:
      return ::c10d::ErrorType::REMOTE_ERROR;
    default:
      return ::c10d::ErrorType::COMM_ERROR;
  }
}

std::string what_of(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return {};
  }
}

c10::TypePtr tensor_list_type() {
  return c10::ListType::create(c10::TensorType::get());
}

} // namespace

work_mccl::work_mccl(int rank, ::c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
                     std::chrono::milliseconds op_timeout)
  : ::c10d::Work(rank, type),
    what_(std::move(what)),
    outputs_(std::move(outputs)),
    // The watchdog fails an op at its deadline; the grace covers the
    // failure's way back and the copy-outs.
    wait_bound_(op_timeout + std::chrono::seconds(30)),
    future_(c10::make_intrusive<c10::ivalue::Future>(tensor_list_type())) {
}

void work_mccl::track(std::vector<work> parts, std::function<void()> after, int source) {
  parts_ = std::move(parts);
  after_ = std::move(after);
  source_ = source;
  bool all_done = true;
  for (const auto& p : parts_)
    all_done = all_done && p.test();
  if (all_done) {
    // Ops that ran inline on this thread are already done: finish here and
    // spare a thread hand-off.
    complete(nullptr);
    return;
  }
  remaining_ = parts_.size();
  // One reference for the whole watch, handed to the completion thread by
  // the last part. The callbacks hold a plain pointer: had they held a
  // reference, the last one could drop on an mccl thread, and freeing the
  // outputs of a Work that Python no longer holds takes the GIL there,
  // while a Python thread holding the GIL may be waiting for that mccl
  // thread (destroy_process_group joins it).
  c10::raw::intrusive_ptr::incref(this);
  for (const auto& p : parts_)
    p.on_complete([this] { on_part_done(); });
}

void work_mccl::track_children(const std::vector<c10::intrusive_ptr<work_mccl>>& children) {
  for (const auto& child : children)
    outputs_.insert(outputs_.end(), child->outputs_.begin(), child->outputs_.end());
  if (children.empty()) {
    complete(nullptr);
    return;
  }
  remaining_ = children.size();
  // A child's future runs this on the completion thread (or here, when the
  // child is done already), after the child's copy-outs: so the aggregate
  // completes after every child's results are in place.
  auto self = c10::intrusive_ptr<work_mccl>::reclaim_copy(this);
  for (const auto& child : children)
    child->future_->addCallback([self](c10::ivalue::Future& done) {
      if (done.hasError()) {
        std::lock_guard<std::mutex> guard{self->child_failure_mutex_};
        if (!self->child_failure_)
          self->child_failure_ = done.exception_ptr();
      }
      if (self->remaining_.fetch_sub(1) == 1)
        self->complete(self->child_failure_);
    });
}

void work_mccl::on_part_done() {
  if (remaining_.fetch_sub(1) != 1)
    return;
  auto self = c10::intrusive_ptr<work_mccl>::reclaim(this); // track()'s reference
  completion_thread::instance().post([self = std::move(self)] { self->complete(nullptr); });
}

void work_mccl::complete(std::exception_ptr failure) {
  if (!failure)
    for (const auto& p : parts_)
      if (auto e = p.failure()) {
        failure = std::make_exception_ptr(*e);
        break;
      }
  if (!failure && after_) {
    try {
      after_();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  after_ = nullptr;
  if (auto visible = visible_to_python(failure); visible != failure) {
    // An mccl::error: what Python sees, through DDP's reducer and autograd
    // too, is the mccl.errors class of its code (torch_visible_error.hpp).
    failure = std::move(visible);
    remember_failure(*mccl_code_of(failure), what_of(failure));
  }
  if (failure && error_slot_) {
    int none = static_cast<int>(::c10d::ErrorType::SUCCESS);
    error_slot_->compare_exchange_strong(none, static_cast<int>(error_type_of(failure)));
  }
  finish(failure);
  if (failure)
    future_->setError(failure);
  else
    future_->markCompleted(c10::IValue(outputs_));
}

void work_mccl::fail_now(std::exception_ptr e) {
  complete(std::move(e));
}

bool work_mccl::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto bound = timeout == kNoTimeout ? wait_bound_ : timeout;
  if (!cv_.wait_for(lock, bound, [this] { return completed_; })) {
    if (timeout == kNoTimeout)
      throw error(errc::internal, what_ + " did not complete within its deadline plus "
                                    "30 s; this is a bug in mccl, please report it");
    throw error(errc::timeout, what_ + " did not complete within the " + std::to_string(timeout.count())
                                 + " ms given to wait()");
  }
  if (exception_)
    std::rethrow_exception(exception_);
  return true;
}

int work_mccl::sourceRank() const {
  int s = source_.load();
  if (s < 0)
    TORCH_CHECK(false, "mccl: sourceRank() is only available for a receive from any source");
  return s;
}

} // namespace mccl::torch_backend
