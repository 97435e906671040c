#pragma once
/// What can be checked about an op on the calling rank alone, before any
/// byte moves: buffers present for what the op reads and writes, roots and
/// peers inside the communicator, per-rank counts of the right length,
/// reductions the dtype supports, custom collectives registered. A bad op
/// is refused with mccl::error naming the op, the rank and the problem;
/// nothing is sent.

#include "collectives/engine/op.hpp"
#include <mccl/communicator.hpp>
#include <mccl/config.hpp>

#include <optional>

namespace mccl::detail {

/// Throws mccl::error (invalid_argument, unsupported) for a bad `op`.
/// Fills in what a form implies (a broadcast root's send buffer is its
/// receive buffer when not given).
void check_op(op_request& op, int rank, int world);

/// Sets op.compression (and op.topk_ratio): the per-op option in `asked`,
/// else cfg.compression, for the ops it applies to (compression_applies);
/// none for others and for ops of at most cfg.small_msg_threshold bytes.
/// Throws mccl::error(invalid_argument) when `asked` names compression
/// for an op, dtype or reduction it cannot apply to, or a bad topk ratio.
/// The topk residual is the communicator's to attach.
void resolve_compression(op_request& op, const op_options& asked, const config& cfg, int rank,
                         int world);

/// Whether `kind` of compression can carry `op`: fp16/bf16 a float32
/// allreduce, reduce, reduce_scatter(v), allgather(v) or broadcast; topk a
/// float32 allreduce with sum or avg.
bool compression_applies(const op_request& op, compression_kind kind);

} // namespace mccl::detail
