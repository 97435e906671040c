#pragma once
/// The metrics actor: one per runtime, on CAF's workers. The ops of the
/// runtime's communicators reach it as completion messages, in batches of
/// `metrics_feed::batch_ops`, and it folds them into the process's metrics
/// (collectives/observability): so an op's own thread only appends its
/// metrics to a batch, and the folding (the registry's lock, its maps and
/// latency windows) happens off the op's path, one lock per batch.
///
/// A message wakes a CAF worker, which then takes a CPU from whoever runs
/// there: with a rank on every core, an op of that rank. So a full batch
/// goes at once only when the last message left at least `send_interval`
/// ago; otherwise it waits and goes with the next one. One message, and at
/// most one wake-up, per interval, whatever the rate of ops: at one
/// message per 256 ops, 2 ranks on 2 vCPUs exchanging 4 B took 29-49 us at
/// p99 against 12-15 us this way (docs/ARCHITECTURE.md, "Metrics actor").
///
/// get_metrics() and reset_metrics() count every op finished before the
/// call: the feed is a pending_ops source, whose fold_pending() folds the
/// batch being filled and any batch still on its way on the calling
/// thread (a batch is folded once, by whoever comes first), so a reader
/// never waits for the actor.

#include "actors/messages.hpp"

#include <caf/actor_system.hpp>

#include <chrono>
#include <cstdint>

#include <deque>
#include <memory>
#include <mutex>

namespace mccl::actors {

class metrics_feed : public metrics_registry::pending_ops {
public:
  /// Ops per completion message: the message (a push to a CAF worker's
  /// queue, at times a wake-up) is paid once per batch, not per op.
  static constexpr std::size_t batch_ops = 256;
  /// The least time between two messages to the actor.
  static constexpr std::chrono::milliseconds send_interval{50};

  /// Spawns the metrics actor on `sys` and registers the feed with the
  /// registry (watch_pending). `interval`: tests choose their own.
  static std::shared_ptr<metrics_feed> start(caf::actor_system& sys,
                                             std::chrono::milliseconds interval = send_interval);

  metrics_feed(const metrics_feed&) = delete;
  metrics_feed& operator=(const metrics_feed&) = delete;
  ~metrics_feed() override;

  /// An op finished: its metrics join the batch being filled; a full batch
  /// goes to the actor. Any thread; never blocks beyond a short lock.
  void add(const op_metrics& metrics, bool failed);

  void fold_pending() override;

  /// Ops handed over and not folded yet, by anyone (tests; at most the
  /// batches of one interval and the one being filled while the actor
  /// keeps up).
  std::size_t held() const;

  /// Messages sent to the actor so far (tests).
  uint64_t messages() const;

  /// Folds what is held and stops the actor (runtime teardown).
  void stop();

private:
  metrics_feed(metrics_handle actor, std::chrono::milliseconds interval);

  mutable std::mutex mutex_;
  finished_batch_ptr filling_;
  /// Full batches, sent or waiting, perhaps not folded yet, oldest first;
  /// folded ones leave from the front as new ones fill.
  std::deque<finished_batch_ptr> full_;
  /// Full batches not sent yet (also in full_): the next message's.
  finished_batches waiting_;
  std::chrono::steady_clock::time_point last_send_{};
  const std::chrono::milliseconds interval_;
  uint64_t messages_ = 0;
  metrics_handle actor_;
};

} // namespace mccl::actors
