#pragma once
/// The metrics actor: one per runtime, on CAF's workers. The ops of the
/// runtime's communicators reach it as completion messages, a batch of
/// `metrics_feed::batch_ops` at a time, and it folds them into the
/// process's metrics (collectives/observability): so an op's own thread
/// only appends its metrics to a batch, and the folding (the registry's
/// lock, its maps and latency windows) happens off the op's path, one lock
/// per batch.
///
/// get_metrics() and reset_metrics() count every op finished before the
/// call: the feed is a pending_ops source, whose fold_pending() folds the
/// batch being filled and any batch still on its way on the calling
/// thread (a batch is folded once, by whoever comes first), so a reader
/// never waits for the actor.

#include "actors/messages.hpp"

#include <caf/actor_system.hpp>

#include <deque>
#include <memory>
#include <mutex>

namespace mccl::actors {

class metrics_feed : public metrics_registry::pending_ops {
public:
  /// Ops per completion message: the message (a push to a CAF worker's
  /// queue, at times a wake-up) is paid once per batch, not per op.
  static constexpr std::size_t batch_ops = 256;

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
  metrics_handle actor_;
};

} // namespace mccl::actors
