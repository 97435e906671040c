#include <mccl/schedule.hpp>

#include <algorithm>
#include <string>

#include "collectives/programs/schedule_checks.hpp"
#include <mccl/error.hpp>

namespace mccl::sched {

using namespace detail;

range block_range(std::size_t count, int parts, int index) {
  if (parts < 1)
    invalid("block_range", "parts must be >= 1, got " + std::to_string(parts));
  check_member("block_range", "index", index, parts);
  auto p = static_cast<std::size_t>(parts);
  auto i = static_cast<std::size_t>(index);
  std::size_t base = count / p;
  std::size_t extra = count % p;
  return {i * base + (i < extra ? i : extra), base + (i < extra ? 1 : 0)};
}

std::size_t chunk_count(std::size_t elems, std::size_t chunk_elems) {
  if (chunk_elems == 0)
    invalid("chunk_count", "chunk_elems must be > 0");
  // Written without elems + chunk_elems - 1, which could overflow.
  return elems / chunk_elems + (elems % chunk_elems != 0 ? 1 : 0);
}

range chunk_range(range block, std::size_t chunk_elems, std::size_t index) {
  if (chunk_elems == 0)
    invalid("chunk_range", "chunk_elems must be > 0");
  std::size_t n = chunk_count(block.count, chunk_elems);
  if (index >= n)
    invalid("chunk_range", "index " + std::to_string(index) + " is outside [0, "
                             + std::to_string(n) + ")");
  std::size_t offset = index * chunk_elems;
  std::size_t left = block.count - offset;
  return {block.begin + offset, left < chunk_elems ? left : chunk_elems};
}

std::vector<ring_step> ring_allreduce_schedule(int rank, int world) {
  check_world("ring_allreduce_schedule", world);
  check_member("ring_allreduce_schedule", "rank", rank, world);
  std::vector<ring_step> steps;
  if (world == 1)
    return steps;
  int next = mod(rank + 1, world);
  int prev = mod(rank - 1, world);
  steps.reserve(2 * static_cast<std::size_t>(world - 1));
  for (int s = 0; s < world - 1; ++s)
    steps.push_back({s, true, next, prev, mod(rank - s, world), mod(rank - s - 1, world)});
  for (int s = 0; s < world - 1; ++s)
    steps.push_back(
      {world - 1 + s, false, next, prev, mod(rank + 1 - s, world), mod(rank - s, world)});
  return steps;
}

tree_node binomial_tree(int rank, int world, int root) {
  check_world("binomial_tree", world);
  check_member("binomial_tree", "rank", rank, world);
  check_member("binomial_tree", "root", root, world);
  int v = mod(rank - root, world);
  tree_node node;
  // A non-root's parent clears its lowest set bit; its children add the
  // powers of two below that bit (any power for the root). The child at
  // v + 2^k heads min(2^k, world - v - 2^k) ranks, so when world is not a
  // power of two a larger k can head a smaller subtree: order by size, ties
  // to the larger k.
  long long limit = world;
  if (v != 0) {
    node.parent = mod(static_cast<long long>(v & (v - 1)) + root, world);
    limit = v & -v;
  }
  struct child {
    long long label;
    long long size;
  };
  std::vector<child> kids;
  for (long long d = 1; d < limit && v + d < world; d <<= 1)
    kids.push_back({v + d, std::min(d, world - v - d)});
  std::sort(kids.begin(), kids.end(), [](const child& a, const child& b) {
    return a.size != b.size ? a.size > b.size : a.label > b.label;
  });
  node.children.reserve(kids.size());
  for (auto& k : kids)
    node.children.push_back(mod(k.label + root, world));
  return node;
}

chain_node broadcast_chain(int rank, int world, int root) {
  check_world("broadcast_chain", world);
  check_member("broadcast_chain", "rank", rank, world);
  check_member("broadcast_chain", "root", root, world);
  int v = mod(rank - root, world);
  chain_node node;
  if (v != 0)
    node.prev = mod(rank - 1, world);
  if (v != world - 1)
    node.next = mod(rank + 1, world);
  return node;
}

std::vector<barrier_round> dissemination_barrier(int rank, int world) {
  check_world("dissemination_barrier", world);
  check_member("dissemination_barrier", "rank", rank, world);
  std::vector<barrier_round> rounds;
  for (long long d = 1; d < world; d <<= 1)
    rounds.push_back({mod(rank + d, world), mod(rank - d, world)});
  return rounds;
}

} // namespace mccl::sched
