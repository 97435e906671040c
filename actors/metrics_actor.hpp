#pragma once
/// The metrics actor: one per runtime. The ops of the runtime's
/// communicators reach it as completion messages, a batch of
/// `metrics_feed::batch_ops` at a time, and it folds them into the
/// process's metrics (collectives/observability): so an op's own thread
/// only appends its metrics to a batch, and the folding (the registry's
/// lock, its maps and latency windows) happens once a batch, one lock per
/// batch. The actor runs where add() sends it from: a communicator's idle
/// unit (comm_core::idle_unit()), which its engine's leader drains when it
/// waits for its peers anyway. So a fold (a few microseconds once in 256
/// ops) runs on the thread that drives the communicator, in a wait, and no
/// thread is woken for it.
///
/// get_metrics() and reset_metrics() count every op finished before the
/// call: the feed is a pending_ops source, whose fold_pending() folds the
/// batch being filled and any batch still on its way on the calling
/// thread (a batch is folded once, by whoever comes first), so a reader
/// never waits for the actor.

#include "actors/driving_unit.hpp"
#include "actors/messages.hpp"

#include <caf/actor_system.hpp>

#include <deque>
#include <memory>
#include <mutex>

namespace mccl::actors {

class metrics_feed : public metrics_registry::pending_ops {
public:
  /// Ops per completion message: the message and the fold's lock are paid
  /// once per batch, not per op.
  static constexpr std::size_t batch_ops = 256;
  /// Full batches the actor may leave unfolded: beyond them, add() folds
  /// the oldest itself. The actor runs on one unit at a time, and a unit
  /// whose communicator does not wait (its ops all on the host board, or
  /// none at all) is drained only by its watchdog's ticks, while other
  /// communicators may finish a batch a millisecond: this bounds what is
  /// held.
  static constexpr std::size_t max_waiting_batches = 4;

  /// Spawns the metrics actor on `sys` and registers the feed with the
  /// registry (watch_pending).
  static std::shared_ptr<metrics_feed> start(caf::actor_system& sys);

  metrics_feed(const metrics_feed&) = delete;
  metrics_feed& operator=(const metrics_feed&) = delete;
  ~metrics_feed() override;

  /// An op finished: its metrics join the batch being filled; a full batch
  /// goes to the actor, from `unit`: the idle unit of the communicator
  /// whose op it was, so that the actor, when idle, runs at that unit's
  /// next drain instead of waking one of CAF's workers, which on a machine
  /// whose cores all drive ranks took a core from one of them (a wake-up
  /// and two context switches a batch: 2-rank 4 B allreduces over TCP had
  /// a p99 of 13-38 us against 9-15 without). Null: CAF's scheduler runs
  /// it. Any thread; never blocks beyond a short lock (and a fold when
  /// more than max_waiting_batches wait).
  void add(const op_metrics& metrics, bool failed, driving_unit* unit);

  void fold_pending() override;

  /// Ops handed over and not folded yet, by anyone (tests; at most about
  /// one batch while the actor keeps up).
  std::size_t held() const;
  /// True while the actor waits for mail, so that the next batch queues it
  /// on the unit it is sent from (tests).
  bool actor_idle() const;

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
