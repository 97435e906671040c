#pragma once
/// Internal side of include/mccl/metrics.hpp: where finished ops and links
/// are recorded.

#include <mccl/metrics.hpp>
#include <mccl/work.hpp>
#include "transport/link_counters.hpp"

#include <atomic>
#include <memory>
#include <vector>

namespace mccl::metrics_registry {

/// A finished op: its Work's metrics; a failed op counts as an error.
struct finished_op {
  op_metrics metrics;
  bool failed = false;
};

/// Finished ops handed over together: a runtime's metrics actor folds them
/// (actors/metrics_actor.hpp), off the ops' own threads.
struct finished_batch {
  std::vector<finished_op> ops;
  std::atomic<bool> folded{false}; ///< set under the registry's lock, once
};

/// Folds `batch` into the process's metrics unless that was done already:
/// the metrics actor's job, and get_metrics()'s for a batch still on its
/// way to it. One lock for the whole batch.
void fold(finished_batch& batch);

/// Holds finished ops that are not folded yet (a runtime's metrics feed).
/// get_metrics() and reset_metrics() have every live one fold what it
/// holds first, so that they count every op finished before the call.
class pending_ops {
public:
  virtual ~pending_ops() = default;
  /// Folds what is held now; any thread; never waits for an actor.
  virtual void fold_pending() = 0;
};

/// Registers `source` until it expires.
void watch_pending(std::weak_ptr<pending_ops> source);

/// Counters for a new link, kept in the summary until reset_metrics()
/// after the link is gone.
std::shared_ptr<transport::link_counters> register_link(uint32_t comm_id, int rank, int peer);

/// The actors-and-threads audit (metrics_summary::actor_messages,
/// thread_wakeups): relaxed atomic adds, no lock.
void count_actor_messages(uint64_t n) noexcept;
void count_thread_wakeup() noexcept;
/// metrics_summary::link_turns.
void count_link_turn() noexcept;
/// metrics_summary::link_chunks.
void count_link_chunk() noexcept;
/// metrics_summary::duplicate_chunks_dropped.
void count_duplicate_chunk() noexcept;
/// metrics_summary::lost_links (the supervisors').
void count_lost_link() noexcept;

} // namespace mccl::metrics_registry
