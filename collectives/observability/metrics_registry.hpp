#pragma once
/// Internal side of include/mccl/metrics.hpp: where finished ops and links
/// are recorded.

#include <mccl/metrics.hpp>
#include <mccl/work.hpp>
#include "transport/link_counters.hpp"

#include <memory>

namespace mccl::metrics_registry {

/// A finished op (its Work's metrics; failed ops count as errors).
void record_op(const op_metrics& m, bool failed);

/// Counters for a new link, kept in the summary until reset_metrics()
/// after the link is gone.
std::shared_ptr<transport::link_counters> register_link(uint32_t comm_id, int rank, int peer);

/// The actors-and-threads audit (metrics_summary::actor_messages,
/// thread_wakeups): relaxed atomic adds, no lock.
void count_actor_messages(uint64_t n) noexcept;
void count_thread_wakeup() noexcept;
/// metrics_summary::duplicate_chunks_dropped.
void count_duplicate_chunk() noexcept;
/// metrics_summary::lost_links (the supervisors').
void count_lost_link() noexcept;

} // namespace mccl::metrics_registry
