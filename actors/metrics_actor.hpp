#pragma once
/// The metrics actor: one per runtime, on CAF's workers. The ops of the
/// runtime's communicators reach it as completion messages, each a batch
/// of ops (at least `metrics_feed::batch_ops`, at most one batch per
/// `batch_interval` unless `max_batch_ops` are held), and it folds them
/// into the process's metrics (collectives/observability): so an op's own
/// thread only appends its metrics to a batch, and the folding (the
/// registry's lock, its maps and latency windows) happens off the op's
/// path, one lock per batch.
///
/// Why an interval: the actor's worker often shares a CPU with the ranks'
/// threads (mcclrun gives each rank one), and each batch wakes it. With a
/// batch per 256 ops, 2 ranks doing 4 B allreduces over TCP woke it some
/// 860 times a second, preempting the op's thread each time; one batch
/// per 50 ms cut the p99 of those allreduces from 70 to 51 µs (c9061a7,
/// whose metrics were folded on the op's thread: 37), medians of eight
/// alternated launches (docs/performance.md, "Board ops on op actors").
///
/// get_metrics() and reset_metrics() count every op finished before the
/// call: the feed is a pending_ops source, whose fold_pending() folds the
/// batch being filled and any batch still on its way on the calling
/// thread (a batch is folded once, by whoever comes first), so a reader
/// never waits for the actor.

#include "actors/messages.hpp"

#include <caf/actor_system.hpp>

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>

namespace mccl::actors {

class metrics_feed : public metrics_registry::pending_ops {
public:
  /// A completion message carries at least batch_ops ops and leaves at
  /// most once per batch_interval, unless it holds max_batch_ops: the
  /// message (a push to a CAF worker's queue, at times a wake-up of a
  /// thread that shares the op's CPU) is paid once per batch, not per op.
  static constexpr std::size_t batch_ops = 256;
  static constexpr std::chrono::milliseconds batch_interval{50};
  static constexpr std::size_t max_batch_ops = 16384;

  /// Spawns the metrics actor on `sys` and registers the feed with the
  /// registry (watch_pending).
  static std::shared_ptr<metrics_feed> start(caf::actor_system& sys);

  metrics_feed(const metrics_feed&) = delete;
  metrics_feed& operator=(const metrics_feed&) = delete;
  ~metrics_feed() override;

  /// An op finished: its metrics join the batch being filled; a full batch
  /// goes to the actor. Any thread; never blocks beyond a short lock.
  void add(const op_metrics& metrics, bool failed);

  void fold_pending() override;

  /// Ops handed over and not folded yet, by anyone (tests; at most about
  /// one batch while the actor keeps up).
  std::size_t held() const;

  /// Folds what is held and stops the actor (runtime teardown).
  void stop();

private:
  explicit metrics_feed(metrics_handle actor);

  mutable std::mutex mutex_;
  finished_batch_ptr filling_;
  /// Batches sent and perhaps not folded yet, oldest first; folded ones
  /// leave from the front as new ones are sent.
  std::deque<finished_batch_ptr> sent_;
  std::chrono::steady_clock::time_point last_sent_{}; ///< when the last batch left
  metrics_handle actor_;
};

} // namespace mccl::actors
