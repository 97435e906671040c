#pragma once
/// The op thread: runs a communicator's larger collectives the way the
/// inline path runs small ones (one thread borrows every connection, writes
/// the op's frames, reads the peers' frames straight to where they go and
/// runs the algorithm on them), but without holding up the caller: the call
/// returns a Work at once, as on the actor path.
///
/// Why not the actors: there every chunk crosses threads (a link reads it,
/// the collective actor reduces it, a link sends the next one), and each
/// wake-up costs 20-55 us on small VMs; one thread that does it all moved a
/// 2-rank 1 MiB allreduce in about half the time (README, "The op thread").
/// The actors still run what this cannot: point-to-point ops, links with
/// CRC, ops issued while others run on the actor path.
///
/// Order: ops reach the op thread in issue order and leave it in that
/// order, run here or passed on to the progress actor, so sequence numbers
/// follow issue order as everywhere else.
///
/// A caller that waits (untimed) for an op still queued here runs it, and
/// the ones queued before it, itself: issue-then-wait code pays no thread
/// hand-off. A timed wait never does, so it returns on time.

#include "collectives/op.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace mccl::actors {

class op_runner : public std::enable_shared_from_this<op_runner> {
public:
  /// Who ran an op: reported in its metrics.
  enum class runner { op_thread, waiting_caller };
  /// Runs the op on the calling thread if it can (its Work is then
  /// completed) and returns true; false leaves it untouched.
  using run_fn = std::function<bool(op_request&, runner)>;
  /// Hands the op to the progress actor.
  using pass_fn = std::function<void(op_ptr)>;
  /// How long a queued op is left to a caller that may wait for it right
  /// away before the op thread starts it: well under the time of any op
  /// that comes here (above MCCL_INLINE_BYTES, 64K by default).
  static constexpr std::chrono::microseconds caller_grace{20};
  /// Waking a thread costs 20-55 us here, more than a 1 MiB op's margin,
  /// so while callers wait for their ops at once (they run them
  /// themselves), issuing an op does not wake the op thread: it looks for
  /// ops nobody waits for every poll_period instead, and after idle_limit
  /// without ops it sleeps until woken again.
  static constexpr std::chrono::microseconds poll_period{1000};
  static constexpr std::chrono::milliseconds idle_limit{50};

  op_runner(int rank, run_fn run_here, pass_fn pass_on);
  ~op_runner();
  op_runner(const op_runner&) = delete;
  op_runner& operator=(const op_runner&) = delete;

  /// Queues an op; the caller holds the communicator's submit mutex, so
  /// pushes are in issue order.
  void push(op_ptr op);
  /// Ops pushed and not yet run or passed on. While true the caller must
  /// push every op here, to keep the order.
  bool busy() const noexcept { return pending_.load(std::memory_order_acquire) > 0; }
  /// Ends the thread. Ops still queued fail with errc::finalized naming
  /// `why`; if one is running, `end_running_op` is called (it closes the
  /// communicator, which ends the op within 100 ms) and stop() waits for
  /// it. Idempotent.
  void stop(const std::string& why, const std::function<void()>& end_running_op);

private:
  /// From work::wait() on a caller's thread: runs the queue up to and
  /// including `op` here, unless something runs already.
  void help(const op_request* op);
  void loop();
  /// Runs or passes on one op, then counts it out of `pending_`.
  void process(const op_ptr& op, runner who);

  int rank_;
  run_fn run_here_;
  pass_fn pass_on_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<op_ptr> queue_;
  using clock = std::chrono::steady_clock;
  std::deque<clock::time_point> pushed_; ///< when each queued op came
  clock::time_point last_push_;
  /// push() wakes the op thread; false while callers run their ops
  /// themselves (see poll_period).
  bool announce_ = true;
  bool running_ = false; ///< an op popped from the queue is being processed
  bool stopping_ = false;
  std::atomic<int> pending_{0};
  std::thread thread_;
};

} // namespace mccl::actors
