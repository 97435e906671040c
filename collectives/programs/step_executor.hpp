#pragma once
/// The step executor: an algorithm that runs a step program
/// (include/mccl/program.hpp) over real buffers.
///
/// Buffers. Blocks live in a working buffer (the caller's output, or
/// scratch memory). The rank's initial data may live elsewhere (the input of
/// an out-of-place op): until a region of the working buffer has been
/// written, reads of it come from that source. This saves the copy an
/// out-of-place op would otherwise start with.
///
/// Order. Every chunk of every transfer waits only for what the program's
/// semantics require (see program.hpp): a send for earlier receives of the
/// same region, a receive for earlier receives and for sends (up to its own
/// step) of the same region. Nothing else is serialised, so independent
/// regions and pipelined chunks flow in parallel.

#include <mccl/collective.hpp>
#include <mccl/program.hpp>
#include <mccl/schedule.hpp>
#include "collectives/algorithms/scratch.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mccl {

/// Where a program's blocks live, and what happens when it ends.
struct program_buffers {
  uint8_t* work = nullptr;                 ///< the working buffer (all blocks)
  std::vector<sched::range> block_elems;   ///< element range of each block in `work`
  /// The rank's initial data for work elements [source_begin, source_begin
  /// + source_count), read from here until written in `work`. Null: the
  /// initial data is already in `work` (in place).
  const uint8_t* source = nullptr;
  std::size_t source_begin = 0;
  std::size_t source_count = 0;
  /// After the program: copy work elements [begin, begin + count) to `dst`
  /// (reduce_scatter's own block from scratch into the caller's buffer).
  struct copy_out {
    std::size_t begin = 0;
    std::size_t count = 0;
    uint8_t* dst = nullptr;
  };
  std::vector<copy_out> outputs;
  /// avg: divide these work regions by the world size at the end.
  std::vector<sched::range> average;
  /// Scratch memory the buffers point into, freed with the executor.
  scratch_buffer scratch;
};

/// Runs `prog` for the op in `args` over `buffers`; `name` is used in
/// where() ("rd", "ring allgather", ...).
std::unique_ptr<algorithm> make_step_executor(collective_io& io, const collective_args& args,
                                              sched::program prog, program_buffers buffers,
                                              std::string name);

} // namespace mccl
