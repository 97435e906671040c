#include <mccl/program.hpp>

#include <algorithm>
#include <string>

#include <mccl/schedule.hpp>
#include "collectives/programs/program_merge.hpp"
#include "collectives/programs/schedule_checks.hpp"
#include <mccl/error.hpp>

namespace mccl::sched {

using namespace detail;

namespace {

// ---- argument checks ---------------------------------------------------------

void check_rank(const char* fn, int rank, int world) {
  check_world(fn, world);
  check_member(fn, "rank", rank, world);
}

void check_rooted(const char* fn, int rank, int world, int root) {
  check_rank(fn, rank, world);
  check_member(fn, "root", root, world);
}

// ---- small arithmetic ----------------------------------------------------------

// Largest power of two <= world (world >= 1), written so it cannot overflow.
int floor_pow2(int world) noexcept {
  int p = 1;
  while (p <= world / 2)
    p *= 2;
  return p;
}

// log2 of a power of two.
int log2_exact(int p) noexcept {
  int k = 0;
  while ((1 << k) < p)
    ++k;
  return k;
}

int ceil_log2(int w) noexcept {
  int k = 0;
  while (k < 31 && (1 << k) < w)
    ++k;
  return k;
}

// Index of the lowest set bit of v > 0.
int lowest_bit(int v) noexcept {
  int k = 0;
  while (((v >> k) & 1) == 0)
    ++k;
  return k;
}

// ---- building programs ---------------------------------------------------------

std::vector<xfer>& xfers_at(program& prog, int s) {
  auto need = static_cast<std::size_t>(s) + 1;
  if (prog.steps.size() < need)
    prog.steps.resize(need);
  return prog.steps[static_cast<std::size_t>(s)].xfers;
}

void add(program& prog, int s, xfer_kind kind, int peer, int first, int count) {
  xfers_at(prog, s).push_back({kind, peer, first, count});
}

void send(program& prog, int s, int peer, int first, int count) {
  add(prog, s, xfer_kind::send, peer, first, count);
}

struct span {
  int first;
  int count;
};

// The blocks as maximal contiguous ranges sorted by first block: both ends
// of a transfer derive the same block set, so they list the same ranges in
// the same order, and adjacent blocks travel as one transfer.
std::vector<span> spans_of(std::vector<int> blocks) {
  std::vector<span> out;
  for (auto [first, count] : step_merger::ranges_of(std::move(blocks)))
    out.push_back({first, count});
  return out;
}

void add_spans(program& prog, int s, xfer_kind kind, int peer, const std::vector<span>& spans) {
  for (const auto& sp : spans)
    add(prog, s, kind, peer, sp.first, sp.count);
}

// Every rank of a program reports the same, global step count, so a rank
// that finishes early still has (empty) entries up to the end.
void pad(program& prog, int total_steps) {
  if (prog.steps.size() < static_cast<std::size_t>(total_steps))
    prog.steps.resize(static_cast<std::size_t>(total_steps));
}

// ---- folding non-power-of-two worlds onto p ranks ------------------------------

// Ranks p..world-1 ("extras") hand their data to rank - p in step 0 and get
// the result back from it in the last step; ranks 0..p-1 ("core") run the
// power-of-two algorithm in between. Without extras there are no fold steps.
struct folding {
  int world;
  int p;

  explicit folding(int w) : world(w), p(floor_pow2(w)) {}

  bool folds() const { return p != world; }
  int fold_steps() const { return folds() ? 1 : 0; }     // steps before the core algorithm
  bool is_extra(int rank) const { return rank >= p; }
  int extra_of(int core) const { return core + p < world ? core + p : -1; }
  int last_step(int core_steps) const { return core_steps + fold_steps(); }
  int total_steps(int core_steps) const { return core_steps + 2 * fold_steps(); }
};

// Recursive doubling of the whole vector (all blocks every exchange), with
// folding: the shared body of rd_allreduce and rd_reduce_scatter.
program whole_vector_doubling(int rank, int world, int blocks) {
  program prog;
  prog.blocks = blocks;
  prog.initial_blocks = all_blocks(blocks);
  prog.result_blocks = all_blocks(blocks);
  folding f(world);
  int rounds = log2_exact(f.p);
  if (f.is_extra(rank)) {
    send(prog, 0, rank - f.p, 0, blocks);
    add(prog, f.last_step(rounds), xfer_kind::recv_copy, rank - f.p, 0, blocks);
  } else {
    int extra = f.extra_of(rank);
    if (extra >= 0)
      add(prog, 0, xfer_kind::recv_reduce, extra, 0, blocks);
    for (int k = 0; k < rounds; ++k) {
      int s = f.fold_steps() + k;
      int partner = rank ^ (1 << k);
      send(prog, s, partner, 0, blocks);
      add(prog, s, xfer_kind::recv_reduce, partner, 0, blocks);
    }
    if (extra >= 0)
      send(prog, f.last_step(rounds), extra, 0, blocks);
  }
  pad(prog, f.total_steps(rounds));
  return prog;
}

// Ring reduce-scatter over world blocks into `prog`, steps 0..world-2. The
// ring allreduce schedule leaves block rank + 1 on each rank; every block
// index here is one lower, so rank r finishes with block r.
void ring_reduce_scatter_steps(program& prog, int rank, int world) {
  int next = mod(rank + 1LL, world);
  int prev = mod(rank - 1LL, world);
  for (int s = 0; s < world - 1; ++s) {
    send(prog, s, next, mod(static_cast<long long>(rank) - s - 1, world), 1);
    add(prog, s, xfer_kind::recv_reduce, prev, mod(static_cast<long long>(rank) - s - 2, world), 1);
  }
}

// Ring allgather steps first_step .. first_step + world - 2: step t sends
// block rank - t and stores block rank - t - 1, so a rank that holds block
// rank ends with every block.
void ring_allgather_steps(program& prog, int rank, int world, int first_step) {
  int next = mod(rank + 1LL, world);
  int prev = mod(rank - 1LL, world);
  for (int t = 0; t < world - 1; ++t) {
    send(prog, first_step + t, next, mod(static_cast<long long>(rank) - t, world), 1);
    add(prog, first_step + t, xfer_kind::recv_copy, prev,
        mod(static_cast<long long>(rank) - t - 1, world), 1);
  }
}

// Blocks of the root-relative labels [lo, hi): label l is rank (root + l)
// mod world, whose block has the same number. Wraparound splits the labels
// into at most two ranges of blocks.
std::vector<span> label_spans(int lo, int hi, int root, int world) {
  std::vector<int> blocks;
  for (int l = lo; l < hi; ++l)
    blocks.push_back(mod(static_cast<long long>(root) + l, world));
  return spans_of(std::move(blocks));
}

// Binomial subtree headed by root-relative label v: labels [v, v + lowbit(v))
// clipped to the world (the whole world for the root), matching
// binomial_tree's children.
int subtree_end(int v, int world) {
  if (v == 0)
    return world;
  long long end = static_cast<long long>(v) + (v & -v);
  return static_cast<int>(std::min<long long>(end, world));
}

// Blocks a rank holds before recursive-doubling allgather round k: those of
// the 2^k core ranks of its group and of their extras.
std::vector<span> gathered_spans(int group, int size, const folding& f) {
  std::vector<int> blocks;
  for (int r = group; r < group + size; ++r) {
    blocks.push_back(r);
    if (f.extra_of(r) >= 0)
      blocks.push_back(f.extra_of(r));
  }
  return spans_of(std::move(blocks));
}

} // namespace

std::string describe(const program& p) {
  std::size_t transfers = 0;
  for (const auto& st : p.steps)
    transfers += st.xfers.size();
  return std::to_string(p.steps.size()) + " steps, " + std::to_string(p.blocks) + " blocks, "
         + std::to_string(transfers) + " transfers";
}

void validate(const program& p, int rank, int world) {
  check_rank("validate", rank, world);
  if (p.blocks < 1)
    invalid("validate", "blocks must be >= 1, got " + std::to_string(p.blocks));
  if (p.sends_first_until < 0)
    invalid("validate", "sends_first_until must be >= 0, got " + std::to_string(p.sends_first_until));
  auto check_block = [&](const char* what, int b) {
    if (b < 0 || b >= p.blocks)
      invalid("validate", std::string(what) + " block " + std::to_string(b) + " is outside [0, "
                            + std::to_string(p.blocks) + ")");
  };
  for (int b : p.initial_blocks)
    check_block("initial", b);
  for (int b : p.result_blocks)
    check_block("result", b);
  for (std::size_t s = 0; s < p.steps.size(); ++s)
    for (const auto& x : p.steps[s].xfers) {
      std::string where = "step " + std::to_string(s) + ": ";
      if (x.peer < 0 || x.peer >= world || x.peer == rank)
        invalid("validate", where + "peer " + std::to_string(x.peer) + " is not another rank of "
                              + std::to_string(world));
      if (x.block_count < 1 || x.first_block < 0 || x.first_block > p.blocks - x.block_count)
        invalid("validate", where + "blocks [" + std::to_string(x.first_block) + ", +"
                              + std::to_string(x.block_count) + ") are outside [0, "
                              + std::to_string(p.blocks) + ")");
    }
}

program rd_allreduce(int rank, int world) {
  check_rank("rd_allreduce", rank, world);
  return whole_vector_doubling(rank, world, 1);
}

program rabenseifner_allreduce(int rank, int world) {
  check_rank("rabenseifner_allreduce", rank, world);
  folding f(world);
  const int p = f.p;
  const int rounds = log2_exact(p);
  program prog;
  prog.blocks = p;
  prog.initial_blocks = all_blocks(p);
  prog.result_blocks = all_blocks(p);
  if (f.is_extra(rank)) {
    send(prog, 0, rank - p, 0, p);
    add(prog, f.last_step(2 * rounds), xfer_kind::recv_copy, rank - p, 0, p);
    pad(prog, f.total_steps(2 * rounds));
    return prog;
  }
  int extra = f.extra_of(rank);
  if (extra >= 0)
    add(prog, 0, xfer_kind::recv_reduce, extra, 0, p);
  int s = f.fold_steps();
  // Recursive halving: the owned range [lo, lo + 2d) splits in halves of d
  // blocks; keep the half holding block `rank` (bit d of rank picks it),
  // send the other to the partner, which keeps exactly that half. Largest
  // distance first keeps every range contiguous; afterwards lo == rank.
  int lo = 0;
  for (int d = p / 2; d >= 1; d /= 2, ++s) {
    int partner = rank ^ d;
    bool upper = (rank & d) != 0;
    send(prog, s, partner, upper ? lo : lo + d, d);
    add(prog, s, xfer_kind::recv_reduce, partner, upper ? lo + d : lo, d);
    if (upper)
      lo += d;
  }
  // Recursive doubling in reverse: partners own the two aligned halves of a
  // range of 2d blocks and swap them.
  for (int d = 1; d < p; d *= 2, ++s) {
    int partner = rank ^ d;
    send(prog, s, partner, lo, d);
    add(prog, s, xfer_kind::recv_copy, partner, lo ^ d, d);
    lo = std::min(lo, lo ^ d);
  }
  if (extra >= 0)
    send(prog, s, extra, 0, p);
  pad(prog, f.total_steps(2 * rounds));
  return prog;
}

program ring_allgather(int rank, int world) {
  check_rank("ring_allgather", rank, world);
  program prog;
  prog.blocks = world;
  prog.initial_blocks = {rank};
  prog.result_blocks = all_blocks(world);
  ring_allgather_steps(prog, rank, world, 0);
  return prog;
}

namespace {

// Both rings of a bidirectional program. The counter-clockwise ring is the
// clockwise program of the mirrored rank world - 1 - rank, with its peers
// mirrored back; `even_block` / `odd_block` place each ring's blocks in the
// shared block numbering. Per step the clockwise transfers come first; where
// both rings use one pair in one direction (world 2) their blocks travel
// as maximal ranges, as every program's transfers do.
template <class Build, class EvenBlock, class OddBlock>
program bidirectional(int rank, int world, Build build, EvenBlock even_block, OddBlock odd_block) {
  auto cw = build(rank);
  auto ccw = build(world - 1 - rank);
  step_merger merged;
  merged.embed(cw, 0, [](int peer) { return peer; },
               [&](int b) { return std::vector<int>{even_block(b)}; });
  merged.embed(ccw, 0, [world](int peer) { return world - 1 - peer; },
               [&](int b) { return std::vector<int>{odd_block(b)}; });
  program prog;
  prog.blocks = 2 * cw.blocks;
  merged.write_to(prog, static_cast<int>(std::max(cw.steps.size(), ccw.steps.size())));
  for (int b : cw.initial_blocks)
    prog.initial_blocks.push_back(even_block(b));
  for (int b : ccw.initial_blocks)
    prog.initial_blocks.push_back(odd_block(b));
  std::sort(prog.initial_blocks.begin(), prog.initial_blocks.end());
  prog.result_blocks = all_blocks(prog.blocks);
  return prog;
}

} // namespace

program bidir_ring_allreduce(int rank, int world) {
  check_rank("bidir_ring_allreduce", rank, world);
  auto ring = [world](int r) {
    program p;
    p.blocks = world;
    p.initial_blocks = all_blocks(world);
    ring_reduce_scatter_steps(p, r, world);
    ring_allgather_steps(p, r, world, world - 1);
    return p;
  };
  return bidirectional(rank, world, ring, [](int b) { return 2 * b; },
                       [](int b) { return 2 * b + 1; });
}

program bidir_ring_allgather(int rank, int world) {
  check_rank("bidir_ring_allgather", rank, world);
  // The mirrored ring's block b' is mirrored rank b''s data: rank
  // world - 1 - b', whose second half is block 2 (world - 1 - b') + 1.
  return bidirectional(rank, world, [world](int r) { return ring_allgather(r, world); },
                       [](int b) { return 2 * b; },
                       [world](int b) { return 2 * (world - 1 - b) + 1; });
}

program rd_allgather(int rank, int world) {
  check_rank("rd_allgather", rank, world);
  folding f(world);
  const int rounds = log2_exact(f.p);
  program prog;
  prog.blocks = world;
  prog.initial_blocks = {rank};
  prog.result_blocks = all_blocks(world);
  if (f.is_extra(rank)) {
    send(prog, 0, rank - f.p, rank, 1);
    add(prog, f.last_step(rounds), xfer_kind::recv_copy, rank - f.p, 0, world);
    pad(prog, f.total_steps(rounds));
    return prog;
  }
  int extra = f.extra_of(rank);
  if (extra >= 0)
    add(prog, 0, xfer_kind::recv_copy, extra, extra, 1);
  // Round k: groups of 2^k core ranks (aligned) swap everything they hold.
  for (int k = 0; k < rounds; ++k) {
    int s = f.fold_steps() + k;
    int size = 1 << k;
    int partner = rank ^ size;
    int mine = rank & ~(size - 1);
    add_spans(prog, s, xfer_kind::send, partner, gathered_spans(mine, size, f));
    add_spans(prog, s, xfer_kind::recv_copy, partner, gathered_spans(mine ^ size, size, f));
  }
  if (extra >= 0)
    send(prog, f.last_step(rounds), extra, 0, world);
  pad(prog, f.total_steps(rounds));
  return prog;
}

program ring_reduce_scatter(int rank, int world) {
  check_rank("ring_reduce_scatter", rank, world);
  program prog;
  prog.blocks = world;
  prog.initial_blocks = all_blocks(world);
  prog.result_blocks = {rank};
  ring_reduce_scatter_steps(prog, rank, world);
  return prog;
}

program rd_reduce_scatter(int rank, int world) {
  check_rank("rd_reduce_scatter", rank, world);
  program prog = whole_vector_doubling(rank, world, world);
  prog.result_blocks = {rank};
  return prog;
}

program halving_reduce_scatter(int rank, int world) {
  check_rank("halving_reduce_scatter", rank, world);
  folding f(world);
  const int p = f.p;
  const int rounds = log2_exact(p);
  program prog;
  prog.blocks = world;
  prog.initial_blocks = all_blocks(world);
  prog.result_blocks = {rank};
  if (f.is_extra(rank)) {
    send(prog, 0, rank - p, 0, world);
    add(prog, f.last_step(rounds), xfer_kind::recv_copy, rank - p, rank, 1);
    pad(prog, f.total_steps(rounds));
    return prog;
  }
  int extra = f.extra_of(rank);
  if (extra >= 0)
    add(prog, 0, xfer_kind::recv_reduce, extra, 0, world);
  // As in rabenseifner_allreduce, over the core ranks: the range of core
  // ranks [lo, lo + 2d) whose blocks (and their extras' blocks) this rank
  // holds splits in halves of d; it keeps the half with its own block.
  int s = f.fold_steps();
  int lo = 0;
  for (int d = p / 2; d >= 1; d /= 2, ++s) {
    int partner = rank ^ d;
    bool upper = (rank & d) != 0;
    add_spans(prog, s, xfer_kind::send, partner, gathered_spans(upper ? lo : lo + d, d, f));
    add_spans(prog, s, xfer_kind::recv_reduce, partner, gathered_spans(upper ? lo + d : lo, d, f));
    if (upper)
      lo += d;
  }
  if (extra >= 0)
    send(prog, s, extra, extra, 1);
  pad(prog, f.total_steps(rounds));
  return prog;
}

program scatter_allgather_broadcast(int rank, int world, int root) {
  check_rooted("scatter_allgather_broadcast", rank, world, root);
  const int depth = ceil_log2(world);
  const int v = mod(static_cast<long long>(rank) - root, world);
  program prog;
  prog.blocks = world;
  if (v == 0)
    prog.initial_blocks = all_blocks(world);
  prog.result_blocks = all_blocks(world);
  // Scatter: the subtree headed by label c is filled at step
  // depth - 1 - lowest_bit(c), after its parent (lower bit) was filled.
  tree_node node = binomial_tree(rank, world, root);
  if (v != 0)
    add_spans(prog, depth - 1 - lowest_bit(v), xfer_kind::recv_copy, node.parent,
              label_spans(v, subtree_end(v, world), root, world));
  for (int child : node.children) {
    int c = mod(static_cast<long long>(child) - root, world);
    add_spans(prog, depth - 1 - lowest_bit(c), xfer_kind::send, child,
              label_spans(c, subtree_end(c, world), root, world));
  }
  // Every rank now holds its own block; the ring completes the rest, once
  // this rank's scatter forwards have left.
  ring_allgather_steps(prog, rank, world, depth);
  pad(prog, depth + world - 1);
  prog.sends_first_until = depth;
  return prog;
}

program tree_reduce(int rank, int world, int root) {
  check_rooted("tree_reduce", rank, world, root);
  const int v = mod(static_cast<long long>(rank) - root, world);
  program prog;
  prog.blocks = 1;
  prog.initial_blocks = {0};
  if (v == 0)
    prog.result_blocks = {0};
  // Label c sends to its parent at step lowest_bit(c). A parent's children
  // have lower lowest bits, so all of them arrived before the parent sends,
  // and each child has a step of its own.
  tree_node node = binomial_tree(rank, world, root);
  for (int child : node.children) {
    int c = mod(static_cast<long long>(child) - root, world);
    add(prog, lowest_bit(c), xfer_kind::recv_reduce, child, 0, 1);
  }
  if (v != 0)
    send(prog, lowest_bit(v), node.parent, 0, 1);
  pad(prog, ceil_log2(world));
  return prog;
}

program ring_reduce(int rank, int world, int root) {
  check_rooted("ring_reduce", rank, world, root);
  program prog;
  prog.blocks = world;
  prog.initial_blocks = all_blocks(world);
  if (rank == root)
    prog.result_blocks = all_blocks(world);
  if (world == 1)
    return prog;
  ring_reduce_scatter_steps(prog, rank, world);
  // Rank r now owns the reduced block r; gather them at the root.
  const int gather = world - 1;
  if (rank != root) {
    send(prog, gather, root, rank, 1);
  } else {
    for (int r = 0; r < world; ++r)
      if (r != root)
        add(prog, gather, xfer_kind::recv_copy, r, r, 1);
  }
  pad(prog, world);
  return prog;
}

} // namespace mccl::sched
