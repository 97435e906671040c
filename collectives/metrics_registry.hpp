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

} // namespace mccl::metrics_registry
