#pragma once
/// What can be checked about an op on the calling rank alone, before any
/// byte moves: buffers present for what the op reads and writes, roots and
/// peers inside the communicator, per-rank counts of the right length,
/// reductions the dtype supports, custom collectives registered. A bad op
/// is refused with mccl::error naming the op, the rank and the problem;
/// nothing is sent.

#include "collectives/op.hpp"

namespace mccl::actors {

/// Throws mccl::error (invalid_argument, unsupported) for a bad `op`.
/// Fills in what a form implies (a broadcast root's send buffer is its
/// receive buffer when not given).
void check_op(op_request& op, int rank, int world);

} // namespace mccl::actors
