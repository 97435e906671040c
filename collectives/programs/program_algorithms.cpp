/// The built-in algorithms that are step programs: each factory picks a
/// program (include/mccl/program.hpp) and says where the op's blocks live;
/// the step executor does the rest.

#include "collectives/algorithms/builtin.hpp"
#include "collectives/programs/step_executor.hpp"

#include <algorithm>

namespace mccl::builtin {
namespace {

uint8_t* bytes_of(void* p) { return static_cast<uint8_t*>(p); }
const uint8_t* bytes_of(const void* p) { return static_cast<const uint8_t*>(p); }

/// `parts` balanced blocks of `count` elements.
std::vector<sched::range> balanced(std::size_t count, int parts) {
  std::vector<sched::range> out;
  for (int b = 0; b < parts; ++b)
    out.push_back(sched::block_range(count, parts, b));
  return out;
}

/// One block per rank, sized by the op's (per-rank) counts, in rank order.
std::vector<sched::range> per_rank(const op_request& op, int world) {
  std::vector<sched::range> out;
  for (int r = 0; r < world; ++r)
    out.push_back({op.offset_of(r), op.count_of(r)});
  return out;
}

sched::range whole(std::size_t count) { return {0, count}; }

scratch_buffer scratch_of(std::size_t bytes) {
  return scratch_buffer(bytes);
}

/// The initial data of an op whose input covers the whole working buffer:
/// read from `send` unless the op is in place.
void input_everywhere(program_buffers& b, const op_request& op, std::size_t count) {
  b.source = op.send == b.work ? nullptr : bytes_of(op.send);
  b.source_begin = 0;
  b.source_count = count;
}

std::unique_ptr<algorithm> run(collective_io& io, const collective_args& a, sched::program p,
                               program_buffers b, const char* name) {
  return make_step_executor(io, a, std::move(p), std::move(b), name);
}

/// allreduce with a program over p.blocks balanced blocks of the vector.
std::unique_ptr<algorithm> allreduce(collective_io& io, const collective_args& a,
                                     sched::program p, const char* name) {
  const auto& op = a.op;
  program_buffers b;
  b.work = bytes_of(op.recv);
  b.block_elems = balanced(op.count, p.blocks);
  input_everywhere(b, op, op.count);
  if (op.op == redop::avg)
    b.average.push_back(whole(op.count));
  return run(io, a, std::move(p), std::move(b), name);
}

/// reduce_scatter(v): blocks per rank; the whole input is reduced in
/// scratch memory and this rank's block copied out.
std::unique_ptr<algorithm> reduce_scatter(collective_io& io, const collective_args& a,
                                          sched::program p, const char* name) {
  const auto& op = a.op;
  auto total = op.total_count(a.world);
  program_buffers b;
  b.scratch = scratch_of(total * op.elem_size());
  b.work = b.scratch.data();
  b.block_elems = per_rank(op, a.world);
  b.source = bytes_of(op.send);
  b.source_count = total;
  auto mine = b.block_elems[static_cast<std::size_t>(a.rank)];
  if (op.op == redop::avg)
    b.average.push_back(mine);
  b.outputs.push_back({mine.begin, mine.count, bytes_of(op.recv)});
  return run(io, a, std::move(p), std::move(b), name);
}

/// allgather(v): blocks per rank in the output; ours comes from `send`
/// (already in place when send points at our block of recv).
std::unique_ptr<algorithm> allgather(collective_io& io, const collective_args& a,
                                     sched::program p, const char* name) {
  const auto& op = a.op;
  program_buffers b;
  b.work = bytes_of(op.recv);
  b.block_elems = per_rank(op, a.world);
  auto mine = b.block_elems[static_cast<std::size_t>(a.rank)];
  b.source = bytes_of(op.send) == b.work + mine.begin * op.elem_size() ? nullptr : bytes_of(op.send);
  b.source_begin = mine.begin;
  b.source_count = mine.count;
  return run(io, a, std::move(p), std::move(b), name);
}

/// allgather(v) over a bidirectional ring: each rank's part of the output
/// is two blocks, its first half travelling clockwise, its second half
/// counter-clockwise.
std::unique_ptr<algorithm> allgather_halves(collective_io& io, const collective_args& a,
                                            sched::program p, const char* name) {
  const auto& op = a.op;
  program_buffers b;
  b.work = bytes_of(op.recv);
  for (auto part : per_rank(op, a.world)) {
    auto first = part.count / 2;
    b.block_elems.push_back({part.begin, first});
    b.block_elems.push_back({part.begin + first, part.count - first});
  }
  auto mine = per_rank(op, a.world)[static_cast<std::size_t>(a.rank)];
  b.source = bytes_of(op.send) == b.work + mine.begin * op.elem_size() ? nullptr : bytes_of(op.send);
  b.source_begin = mine.begin;
  b.source_count = mine.count;
  return run(io, a, std::move(p), std::move(b), name);
}

/// reduce to root: the root reduces into its output, the others in scratch.
std::unique_ptr<algorithm> reduce(collective_io& io, const collective_args& a, sched::program p,
                                  const char* name) {
  const auto& op = a.op;
  program_buffers b;
  bool root = a.rank == op.root;
  if (!root) {
    b.scratch = scratch_of(op.bytes());
    b.work = b.scratch.data();
  } else {
    b.work = bytes_of(op.recv);
  }
  b.block_elems = balanced(op.count, p.blocks);
  input_everywhere(b, op, op.count);
  if (root && op.op == redop::avg)
    b.average.push_back(whole(op.count));
  return run(io, a, std::move(p), std::move(b), name);
}

/// broadcast: balanced blocks of the vector; the root's input is the data.
std::unique_ptr<algorithm> broadcast(collective_io& io, const collective_args& a, sched::program p,
                                     const char* name) {
  const auto& op = a.op;
  program_buffers b;
  b.work = bytes_of(op.recv);
  b.block_elems = balanced(op.count, p.blocks);
  if (a.rank == op.root)
    input_everywhere(b, op, op.count);
  return run(io, a, std::move(p), std::move(b), name);
}

/// The host of every rank, as the host-aware programs take it.
std::vector<int> hosts_of(const collective_args& a) {
  if (a.host_of && static_cast<int>(a.host_of->size()) == a.world)
    return *a.host_of;
  return std::vector<int>(static_cast<std::size_t>(a.world), 0);
}

/// Across hosts, recursive doubling's later rounds wait for the earlier
/// ones (program::rounds): in mccl-sim that made the doubling allgather 15 %
/// and Rabenseifner 8 % faster on 64 ranks of 64 MiB. On one host (16
/// cores, loopback and shared memory) the early sends measured faster.
bool spans_hosts(const collective_args& a) {
  auto hosts = hosts_of(a);
  return std::any_of(hosts.begin(), hosts.end(), [&](int h) { return h != hosts.front(); });
}

} // namespace

std::unique_ptr<algorithm> make_allreduce_rd(collective_io& io, const collective_args& a) {
  return allreduce(io, a, sched::rd_allreduce(a.rank, a.world), "recursive doubling");
}

std::unique_ptr<algorithm> make_allreduce_rabenseifner(collective_io& io, const collective_args& a) {
  auto p = sched::rabenseifner_allreduce(a.rank, a.world);
  p.rounds = spans_hosts(a);
  return allreduce(io, a, std::move(p), "rabenseifner");
}

std::unique_ptr<algorithm> make_allreduce_bidir_ring(collective_io& io, const collective_args& a) {
  return allreduce(io, a, sched::bidir_ring_allreduce(a.rank, a.world), "bidirectional ring");
}

std::unique_ptr<algorithm> make_reduce_scatter_ring(collective_io& io, const collective_args& a) {
  return reduce_scatter(io, a, sched::ring_reduce_scatter(a.rank, a.world), "ring reduce-scatter");
}

std::unique_ptr<algorithm> make_reduce_scatter_rd(collective_io& io, const collective_args& a) {
  return reduce_scatter(io, a, sched::rd_reduce_scatter(a.rank, a.world),
                        "recursive-doubling reduce-scatter");
}

std::unique_ptr<algorithm> make_reduce_scatter_halving(collective_io& io, const collective_args& a) {
  auto p = sched::halving_reduce_scatter(a.rank, a.world);
  p.rounds = spans_hosts(a);
  return reduce_scatter(io, a, std::move(p), "recursive-halving reduce-scatter");
}

std::unique_ptr<algorithm> make_allgather_ring(collective_io& io, const collective_args& a) {
  return allgather(io, a, sched::ring_allgather(a.rank, a.world), "ring allgather");
}

std::unique_ptr<algorithm> make_allgather_bidir_ring(collective_io& io, const collective_args& a) {
  return allgather_halves(io, a, sched::bidir_ring_allgather(a.rank, a.world),
                          "bidirectional ring allgather");
}

std::unique_ptr<algorithm> make_allgather_rd(collective_io& io, const collective_args& a) {
  auto p = sched::rd_allgather(a.rank, a.world);
  p.rounds = spans_hosts(a);
  return allgather(io, a, std::move(p), "recursive-doubling allgather");
}

std::unique_ptr<algorithm> make_reduce_tree(collective_io& io, const collective_args& a) {
  return reduce(io, a, sched::tree_reduce(a.rank, a.world, a.op.root), "tree reduce");
}

std::unique_ptr<algorithm> make_reduce_ring(collective_io& io, const collective_args& a) {
  return reduce(io, a, sched::ring_reduce(a.rank, a.world, a.op.root), "ring reduce");
}

std::unique_ptr<algorithm> make_broadcast_scatter_allgather(collective_io& io,
                                                            const collective_args& a) {
  return broadcast(io, a, sched::scatter_allgather_broadcast(a.rank, a.world, a.op.root),
                   "scatter-allgather broadcast");
}

std::unique_ptr<algorithm> make_allreduce_hier(collective_io& io, const collective_args& a) {
  return allreduce(io, a, sched::hier_allreduce(a.rank, hosts_of(a)), "host-aware allreduce");
}

std::unique_ptr<algorithm> make_reduce_scatter_hier(collective_io& io, const collective_args& a) {
  return reduce_scatter(io, a, sched::hier_reduce_scatter(a.rank, hosts_of(a)),
                        "host-aware reduce-scatter");
}

std::unique_ptr<algorithm> make_allgather_hier(collective_io& io, const collective_args& a) {
  return allgather(io, a, sched::hier_allgather(a.rank, hosts_of(a)), "host-aware allgather");
}

std::unique_ptr<algorithm> make_broadcast_hier(collective_io& io, const collective_args& a) {
  return broadcast(io, a, sched::hier_broadcast(a.rank, hosts_of(a), a.op.root),
                   "host-aware broadcast");
}

} // namespace mccl::builtin
