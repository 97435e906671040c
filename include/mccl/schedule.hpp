#pragma once
/// Pure schedule functions: who sends which block to whom, in which step.
/// No I/O here, so every algorithm can be checked exhaustively by simulation.
/// All functions throw mccl::error(invalid_argument) naming the argument for
/// world < 1, rank or root outside [0, world), parts < 1 or chunk_elems 0.

#include <cstddef>
#include <vector>

namespace mccl::sched {

/// Half-open element range [begin, begin + count).
struct range {
  std::size_t begin = 0;
  std::size_t count = 0;
};

/// Block `index` of a balanced split of `count` elements into `parts`
/// blocks: the first count % parts blocks get one extra element.
range block_range(std::size_t count, int parts, int index);

/// Pipelining chunks in a block of `elems`: ceil(elems / chunk_elems), 0 for
/// an empty block.
std::size_t chunk_count(std::size_t elems, std::size_t chunk_elems);

/// Chunk `index` (< chunk_count(block.count, chunk_elems)) of block; every
/// chunk is chunk_elems long except a shorter last one.
range chunk_range(range block, std::size_t chunk_elems, std::size_t index);

/// One step of ring allreduce on the ring r -> r + 1.
struct ring_step {
  int step;       ///< 0 .. 2 * (world - 1) - 1
  bool reduce;    ///< reduce-scatter step (reduce into local) vs allgather (copy)
  int send_to;    ///< always (rank + 1) mod world
  int recv_from;  ///< always (rank - 1) mod world
  int send_block;
  int recv_block;
};

/// Reduce-scatter (world - 1 steps) then allgather (world - 1 steps); empty
/// for world 1. Reduce-scatter step s sends block (rank - s) mod w and
/// reduces the received block (rank - s - 1) mod w into the local copy, so
/// afterwards rank r owns the fully reduced block (r + 1) mod w. Allgather
/// step s sends block (rank + 1 - s) mod w and stores block (rank - s) mod w.
std::vector<ring_step> ring_allreduce_schedule(int rank, int world);

/// A rank's place in a binomial tree.
struct tree_node {
  int parent = -1;            ///< -1 for the root
  std::vector<int> children;  ///< in send order: largest subtree first
};

/// Binomial tree rooted at root (ranks relabelled relative to root); depth
/// is ceil(log2 world).
tree_node binomial_tree(int rank, int world, int root);

/// A rank's neighbours in the pipelined broadcast chain.
struct chain_node {
  int prev = -1;  ///< -1 for the root
  int next = -1;  ///< -1 for the last rank
};

/// Chain root, root + 1, ..., wrapping around, for large broadcasts.
chain_node broadcast_chain(int rank, int world, int root);

/// One round of the dissemination barrier.
struct barrier_round {
  int send_to;
  int recv_from;
};

/// ceil(log2 world) rounds; round k sends to (rank + 2^k) mod world and
/// receives from (rank - 2^k) mod world. Empty for world 1.
std::vector<barrier_round> dissemination_barrier(int rank, int world);

} // namespace mccl::sched
