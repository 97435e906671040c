#pragma once
/// MCCL_METRICS_PORT: starts the process's status server (status_server.hpp)
/// for a runtime, answering /metrics and /status from its communicators.

#include "actors/runtime_impl.hpp"

namespace mccl {

/// Serves /metrics and /status for rank `rank` on MCCL_METRICS_PORT + rank,
/// once per runtime (later calls do nothing); nothing when the port is 0.
/// Throws mccl::error(invalid_config) when the port is out of range or taken.
void serve_status(runtime::impl& rt, const config& cfg, int rank);

} // namespace mccl
