#pragma once
/// Step programs: most collective algorithms written as data.
///
/// A program says, for one rank, which blocks of a working buffer it sends
/// to and receives from which peers in which step. The step executor
/// (collectives/programs/step_executor.hpp) runs a program over real buffers and
/// links; tests run the same programs symbolically for every rank of worlds
/// 1..64. Both follow the same rule, so a program that passes the
/// simulation is correct on the wire:
///
///   Step-synchronous semantics, per block region. The sends of step s read
///   the region as it is after every receive of steps < s was applied; the
///   receives of step s are applied after every send of steps <= s that
///   reads the same region has left the buffer.
///
/// The executor enforces this with dependencies (not with global barriers),
/// so independent regions progress in parallel and a send whose block
/// range equals the range a receive of an earlier step wrote is pipelined
/// chunk by chunk behind that receive.
///
/// Steps are numbered globally: when rank a sends blocks X to rank b at step
/// s, rank b receives exactly blocks X from rank a at step s. Several
/// transfers between the same pair in one step are matched in the order
/// they are listed.
///
/// Properties of every program the builders below return (the simulation
/// tests check them):
///   - all ranks of one collective have the same steps.size(), the global
///     step count (ranks idle at the end keep empty entries);
///   - no transfer names the rank itself; no two receives of one step on one
///     rank write the same block;
///   - a block set that is not contiguous travels as its maximal contiguous
///     ranges, sorted by first block, one transfer each.

#include <cstddef>
#include <string>
#include <vector>

namespace mccl::sched {

enum class xfer_kind : unsigned char {
  send,        ///< send blocks to peer
  recv_copy,   ///< receive blocks from peer; they replace the local blocks
  recv_reduce, ///< receive blocks from peer; reduce them into the local blocks
};

/// One transfer of the contiguous blocks [first_block, first_block + block_count).
struct xfer {
  xfer_kind kind = xfer_kind::send;
  int peer = -1;
  int first_block = 0;
  int block_count = 1;
};

struct step {
  std::vector<xfer> xfers; ///< in matching order (see above)
};

/// What a rank does in one collective, over a working buffer split into
/// `blocks` blocks. How blocks map to elements is up to the caller (a
/// balanced split of the count, or per-rank counts for the v-variants).
struct program {
  int blocks = 1;
  /// Indexed by global step number; a rank with nothing to do in a step
  /// has an empty entry (trailing empty steps may be omitted).
  std::vector<step> steps;
  /// Blocks that hold this rank's own data when the program starts (for a
  /// reduction: its contribution; for a broadcast root: the data).
  std::vector<int> initial_blocks;
  /// Blocks that hold the final result on this rank when the program ends.
  std::vector<int> result_blocks;
  /// Runs in rounds: a send whose data this rank already held before its
  /// previous step with receives waits for those receives, instead of
  /// leaving the moment the op starts. Recursive doubling sends a rank's
  /// own block again in every round; sent early, it competes at the
  /// receiver with the current round's bytes where links between hosts
  /// are the limit. Off: every send leaves once its data is ready, which
  /// is how rings pipeline chunks across steps, and what measured faster on
  /// one host (bench/RESULTS.md, "Simulated worlds").
  bool rounds = false;
  /// Sends of this step and later wait until every send of an earlier step
  /// has left (0: none wait). Scatter-allgather broadcast: a rank's scatter
  /// forwards are on the critical path of its whole subtree; its ring sends
  /// started beside them take half of its port, slowing every rank below
  /// (bench/RESULTS.md, "Simulated worlds").
  int sends_first_until = 0;
};

/// How many transfer steps a program has (size of steps), for logs:
/// "<steps> steps, <blocks> blocks, <transfers> transfers".
std::string describe(const program& p);

/// Checks what one rank's program can check alone: blocks >= 1, every peer
/// in [0, world) and not `rank`, every transfer a non-empty range inside
/// [0, blocks), initial and result blocks inside [0, blocks). Throws
/// mccl::error(invalid_argument) naming the step and the bad value; for
/// world < 1 or rank outside [0, world) too. Matching between ranks needs
/// every rank's program and is checked by the simulation tests.
void validate(const program& p, int rank, int world);

// ---- allreduce --------------------------------------------------------------
// Every rank starts with all blocks (its contribution) and ends with all
// blocks fully reduced. All builders are correct for every world >= 1,
// power of two or not; they throw mccl::error(invalid_argument) for
// world < 1 or rank outside [0, world).

/// Recursive doubling over one block: log2(p) exchanges of the whole
/// vector (exchange k with rank XOR 2^k), plus the two fold steps when world
/// is not a power of two. Non-power-of-two worlds fold: with p = largest power of two
/// <= world, ranks p..world-1 first send their vector to rank - p (which
/// reduces it), sit out the doubling among ranks 0..p-1, then receive the
/// result from rank - p. Latency-optimal for small messages.
program rd_allreduce(int rank, int world);

/// Rabenseifner: reduce-scatter by recursive halving, then allgather by
/// recursive doubling, over p blocks (p as above); non-power-of-two worlds
/// fold exactly as in rd_allreduce (all p blocks each way). Halving starts
/// at distance p/2, so every transfer is one contiguous range and core rank
/// i owns block i after the halving. 2 * log2(p) steps, + 2 when folding.
program rabenseifner_allreduce(int rank, int world);

/// Bidirectional ring: half the vector runs the ring allreduce clockwise
/// (to rank + 1), the other half counter-clockwise (to rank - 1), in the
/// same steps, so both directions of every link carry data. 2 * world
/// blocks: the even ones go clockwise, the odd ones the other way.
/// 2 * (world - 1) steps of four transfers.
program bidir_ring_allreduce(int rank, int world);

// ---- allgather --------------------------------------------------------------
// Block b is rank b's data (world blocks). Rank r starts with block r and
// ends with all blocks.

/// Ring: world - 1 steps; step s sends block (rank - s) mod w to rank + 1
/// and receives block (rank - s - 1) mod w from rank - 1.
program ring_allgather(int rank, int world);

/// Bidirectional ring: each rank's data is two blocks, 2 * rank (sent
/// clockwise) and 2 * rank + 1 (counter-clockwise); 2 * world blocks in
/// all, world - 1 steps of four transfers. Rank r starts with blocks 2r and
/// 2r + 1 and ends with all of them.
program bidir_ring_allgather(int rank, int world);

/// Recursive doubling (any world, folding as in rd_allreduce: ranks >= p
/// first send their block to rank - p and receive every block at the end).
/// In round k a core rank swaps everything it holds (its group's blocks and
/// their extras' blocks) with rank XOR 2^k, as at most two ranges.
/// log2(p) steps, + 2 when folding; for small messages.
program rd_allgather(int rank, int world);

// ---- reduce-scatter -----------------------------------------------------------
// Every rank starts with all world blocks (its contribution) and ends with
// block `rank` fully reduced.

/// Ring: world - 1 steps, the reduce-scatter half of the ring allreduce,
/// arranged so that rank r finishes with block r.
program ring_reduce_scatter(int rank, int world);

/// For small messages: recursive doubling of the whole vector, split into
/// world blocks (result: block rank; the other blocks are reduced too but
/// not part of the result). Steps as rd_allreduce; the fold steps carry
/// all world blocks too.
program rd_reduce_scatter(int rank, int world);

/// Recursive halving, the reduce-scatter half of rabenseifner_allreduce:
/// log2(p) steps of n/2, n/4, ... bytes (p the largest power of two up to
/// world), each rank keeping the half that holds its block. Ranks beyond p
/// fold into a partner first (their whole vector) and get their block back
/// last. The bytes of the ring in log2(p) steps instead of world - 1: on
/// many ranks of one host, where every step waits on a partner's wake-up.
program halving_reduce_scatter(int rank, int world);

// ---- broadcast / reduce -----------------------------------------------------

/// Large broadcast: the root scatters the world blocks along a binomial
/// tree (rank r receives the blocks of its subtree), then a ring allgather
/// completes every rank. Block b is destined for rank b: a subtree is a
/// contiguous range of root-relative ranks, so at most two block ranges
/// (wraparound). Root starts with all blocks (initial_blocks of the other
/// ranks is empty); all ranks end with all blocks. Steps: ceil(log2 world)
/// scatter steps, then world - 1 ring steps.
program scatter_allgather_broadcast(int rank, int world, int root);

/// Small reduce to root along a binomial tree over one block: every rank
/// starts with block 0, the root ends with it fully reduced (result_blocks
/// is {0} at the root, empty elsewhere). Root-relative rank v sends to its
/// binomial_tree parent at step lowest set bit of v, after all its
/// children; ceil(log2 world) steps.
program tree_reduce(int rank, int world, int root);

/// Large reduce to root: ring reduce-scatter over world blocks, then every
/// rank sends its reduced block to the root. Result: all blocks at root
/// (empty elsewhere). world steps (none for world 1); the root lists its
/// receives of the last step in rank order.
program ring_reduce(int rank, int world, int root);

// ---- host-aware (hierarchical) ----------------------------------------------
// For ranks spread over several hosts: host_of[r] names rank r's host (ranks
// with equal values share one; any values, hosts are ordered by their
// lowest rank). Traffic between hosts, the slow links, is kept to what the
// op needs, and shared among the ranks of a host ("stripes"): with S the
// fewest ranks any host has, a host's first S ranks (its core) each carry
// 1/S of the inter-host traffic, with the rank of the same place on every
// other host; the rest of a host's ranks (its extras) hand their data to
// core rank (place mod S) first and get the result from it at the end, one
// extra per core rank and step. Every builder throws
// mccl::error(invalid_argument) for an empty host_of, rank outside it or a
// root outside it. The inner phases are rings; on one host the inter-host
// phase is empty, with one rank per host the intra-host phases are.

/// Hosts numbered 0.. in the order of their lowest rank: keys[r] names rank
/// r's host (an identity, an address); equal keys, equal numbers.
std::vector<int> number_hosts(const std::vector<std::string>& keys);

/// How many distinct hosts host_of names (0 for an empty one).
int host_count(const std::vector<int>& host_of);

/// allreduce over S * H blocks (H hosts): ring reduce-scatter of S stripes
/// inside each host's core, ring allreduce of each stripe across hosts
/// (among the core ranks of that stripe), ring allgather inside each core.
/// Starts and ends with all blocks.
program hier_allreduce(int rank, const std::vector<int>& host_of);

/// reduce_scatter over world blocks (block b is rank b's result): ring
/// reduce-scatter inside each host's core (stripe k: the blocks of every
/// host's ranks of place k mod S), then ring reduce-scatter of each stripe
/// across hosts. Starts with all blocks, ends with block `rank`.
program hier_reduce_scatter(int rank, const std::vector<int>& host_of);

/// allgather over world blocks (block b is rank b's data): ring allgather
/// of each stripe across hosts, then ring allgather of the stripes inside
/// each host's core. Starts with block `rank`, ends with all.
program hier_allgather(int rank, const std::vector<int>& host_of);

/// broadcast over S blocks: the root (first of its host's core) hands block
/// k to its host's core rank k, each stripe travels a chain across the
/// hosts (pipelined chunk by chunk), a ring allgather inside each core
/// completes every core rank. The root starts with all blocks, every rank
/// ends with all.
program hier_broadcast(int rank, const std::vector<int>& host_of, int root);

} // namespace mccl::sched
