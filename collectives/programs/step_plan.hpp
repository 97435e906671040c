#pragma once
/// A step program compiled for one rank, as the step executor
/// (step_executor.hpp) runs it: its transfers cut into pipelining chunks
/// ("items"), what each item waits for, and the lookup from a frame's
/// (step, peer, chunk) to its item.
///
/// Compiling costs more than a small op's whole exchange on one host (about
/// 3 us for 16-rank recursive doubling on the 16-core machine, allocations
/// mostly), and a training loop repeats the same few ops. So plans are
/// immutable and shared: compile_step_plan returns the plan of an earlier
/// op when the program, the blocks and the chunking are the same.

#include <mccl/collective.hpp>
#include <mccl/program.hpp>
#include <mccl/schedule.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

namespace mccl {

/// One chunk of one transfer.
struct step_item {
  bool is_send = false;
  sched::xfer_kind kind = sched::xfer_kind::send;
  uint32_t step = 0;
  int peer = -1;
  uint32_t wire_chunk = 0; ///< chunk index on the wire for (step, pair)
  std::size_t begin = 0;   ///< work elements
  std::size_t count = 0;
  int pending = 0;         ///< dependencies, none of them met yet
  /// The items that wait for this one: step_plan::dependents[begin, end).
  uint32_t dependents_begin = 0;
  uint32_t dependents_end = 0;
};

struct step_plan {
  using key = std::tuple<uint32_t, int, uint32_t>; ///< step, peer, wire chunk
  using index = std::vector<std::pair<key, uint32_t>>;

  std::vector<step_item> items; ///< in step order
  std::vector<uint32_t> dependents;
  index sends; ///< sorted by key
  index recvs; ///< sorted by key

  /// The item that (step, peer, chunk) names in `in`, or null.
  static const uint32_t* find(const index& in, const key& k);
};

/// The plan of `prog` for the op in `a` over blocks at `block_elems` (work
/// elements): a shared one when an earlier op compiled the same.
std::shared_ptr<const step_plan> compile_step_plan(const collective_args& a, const sched::program& prog,
                                                   const std::vector<sched::range>& block_elems);

} // namespace mccl
