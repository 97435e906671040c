#pragma once
/// The op thread: one per communicator, the background driver of ops up to
/// MCCL_OP_THREAD_BYTES that no caller drives (comm_core.hpp). It leads
/// the engine until no op is left, then sleeps until an op is posted that
/// nobody leads.
///
/// Waking a thread costs 20-55 us on small VMs, more than a 1 MiB op's
/// margin, and code that issues an op and waits for it at once drives the
/// op itself (work::wait). So:
/// - the thread leaves a fresh op to its caller for `caller_grace` before
///   it takes it;
/// - while callers keep taking their ops themselves, posting an op does
///   not wake the thread: it looks for ops nobody leads, first after
///   `poll_period`, then, while it finds none, twice as long each time up
///   to `poll_period_max` (every look is a wake-up on a core a rank may
///   need: at 1 ms, one per 4 MiB op), and after `idle_limit` without ops
///   posted or in flight it sleeps until woken again (an op that a caller
///   drives for longer than that, 64 MiB, keeps it polling: the next
///   op's post then wakes nobody). An op left behind thus waits at most
///   poll_period_max once; the thread then drives it and wakes on every
///   post until callers take their ops again.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mccl::actors {

class op_thread {
public:
  static constexpr std::chrono::microseconds caller_grace{20};
  static constexpr std::chrono::microseconds poll_period{1000};
  static constexpr std::chrono::microseconds poll_period_max{8000};
  static constexpr std::chrono::milliseconds idle_limit{50};

  /// What the thread does when it has work: `busy()` says whether ops are
  /// posted or running; `drive(stop)` leads the engine until it is idle or
  /// `stop()` holds, returning false when another thread leads;
  /// `wake_leader()` wakes a leader blocked in the engine's wait; `idle()`
  /// says whether no op is posted or in flight.
  struct hooks {
    std::function<bool()> busy;
    std::function<bool()> idle;
    std::function<bool(const std::function<bool()>& stop)> drive;
    std::function<void()> wake_leader;
  };

  /// `cpus`: where the thread runs (MCCL_HELPER_CPUS; helper_thread.hpp);
  /// empty: the creator's CPUs.
  op_thread(hooks h, std::vector<int> cpus);
  /// Stops and joins the thread (stop()).
  ~op_thread();
  op_thread(const op_thread&) = delete;
  op_thread& operator=(const op_thread&) = delete;

  /// An op was posted that no caller drives now. True when the thread was
  /// woken for it (false while callers drive their ops: its poll finds
  /// the op if nobody takes it).
  bool posted();
  /// The engine has ops and nobody leads (a leader let go). The thread
  /// takes over after caller_grace unless a caller does first. True when
  /// the thread was woken for it, as posted().
  bool needed();
  /// Ends the thread: an engine it leads is let go at its next pass.
  void stop();

private:
  void loop();

  hooks hooks_;
  const std::vector<int> cpus_;
  std::mutex mutex_;
  std::condition_variable changed_;
  using clock = std::chrono::steady_clock;
  clock::time_point last_post_{};
  bool signalled_ = false;
  /// posted() wakes the thread; false while callers drive their ops.
  bool announce_ = true;
  /// The next look for ops nobody leads (while announce_ is false).
  std::chrono::microseconds poll_wait_ = poll_period;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace mccl::actors
