#pragma once
/// Factories of mccl's built-in algorithms (registered in registry.cpp).

#include <mccl/collective.hpp>

#include <memory>

namespace mccl::builtin {

using factory_fn = std::unique_ptr<algorithm>(collective_io& io, const collective_args& a);

// allreduce
/// Latency path: every rank sends its whole (small) buffer to every other
/// rank and reduces all contributions locally, in rank order.
factory_fn make_allreduce_oneshot;
/// 2 ranks: both send everything at once, reduce as chunks land.
factory_fn make_allreduce_direct;
/// Chunk-pipelined ring: reduce-scatter then allgather.
factory_fn make_allreduce_ring;
/// Step programs (include/mccl/program.hpp) run by the step executor.
factory_fn make_allreduce_rd;
factory_fn make_allreduce_rabenseifner;
/// Sparsified (compression topk): the k largest-magnitude elements of each
/// rank as (index, value) pairs, allgathered and added up.
factory_fn make_allreduce_topk;
/// Half the vector round the ring each way, so both directions of every
/// link carry data (a step program).
factory_fn make_allreduce_bidir_ring;

// broadcast
/// Down a binomial tree (latency) or a pipelined chain (bandwidth).
factory_fn make_broadcast_tree;
factory_fn make_broadcast_chain;
/// Binomial scatter of world blocks, then a ring allgather.
factory_fn make_broadcast_scatter_allgather;

// reduce, allgather, reduce_scatter (step programs)
factory_fn make_reduce_tree;
factory_fn make_reduce_ring;
factory_fn make_allgather_ring;
factory_fn make_allgather_rd;
factory_fn make_allgather_bidir_ring;
factory_fn make_reduce_scatter_ring;
factory_fn make_reduce_scatter_rd;
factory_fn make_reduce_scatter_halving;

// Host-aware step programs (program.hpp): inside hosts, then across them.
factory_fn make_allreduce_hier;
factory_fn make_reduce_scatter_hier;
factory_fn make_allgather_hier;
factory_fn make_broadcast_hier;

// gather, scatter, alltoall: every block goes straight to its rank.
factory_fn make_gather_linear;
factory_fn make_scatter_linear;
factory_fn make_alltoall_pairwise;

/// Dissemination barrier: ceil(log2 n) rounds of empty messages.
factory_fn make_barrier_dissemination;

/// Point-to-point: a send's chunks, and a receive that checks the size.
factory_fn make_p2p_send;
factory_fn make_p2p_recv;

} // namespace mccl::builtin
