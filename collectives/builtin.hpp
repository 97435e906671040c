#pragma once
/// Factories of mccl's built-in algorithms (registered in registry.cpp).

#include "collectives/collective.hpp"

#include <memory>

namespace mccl::builtin {

/// Allreduce on 2 ranks: both send everything at once, reduce as chunks land.
std::unique_ptr<algorithm> make_allreduce_direct(collective_io& io, const collective_args& a);
/// Allreduce, chunk-pipelined ring: reduce-scatter then allgather.
std::unique_ptr<algorithm> make_allreduce_ring(collective_io& io, const collective_args& a);
/// Allreduce latency path: every rank sends its whole (small) buffer to every
/// other rank and reduces all contributions locally, in rank order.
std::unique_ptr<algorithm> make_allreduce_oneshot(collective_io& io, const collective_args& a);
/// Broadcast down a binomial tree (latency) or a pipelined chain (bandwidth).
std::unique_ptr<algorithm> make_broadcast_tree(collective_io& io, const collective_args& a);
std::unique_ptr<algorithm> make_broadcast_chain(collective_io& io, const collective_args& a);
/// Dissemination barrier: ceil(log2 n) rounds of empty messages.
std::unique_ptr<algorithm> make_barrier_dissemination(collective_io& io, const collective_args& a);

} // namespace mccl::builtin
