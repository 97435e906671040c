#pragma once
/// mccl-sim's core: N ranks of mccl's engine (collectives/engine/engine.hpp: the
/// data plane users run, with its algorithms, channels, wire format and
/// reductions) in one process and one thread, over the virtual-time
/// network of transport/sim/timed_network.hpp. An event loop takes the
/// place of the actors that drive each rank's engine in a real process:
/// it runs a pass of every rank that has something to do, then moves the
/// clock to the next arrival (or engine timer).
///
/// Scaled mode: 1024 ranks cannot each hold 64 MiB here, so every rank
/// moves a small buffer (a multiple of the world's size in elements, at
/// most max_rank_bytes) and the network counts each payload byte as
/// `scale` bytes, with the chunk size divided by the same factor: the
/// algorithm sends the same messages, in the same number of chunks, and
/// takes the virtual time of the full size. The algorithm is the one the
/// table picks for the full size (or the one asked for). Every element of
/// the small result is checked.

#include "collectives/algorithms/cost_model.hpp"
#include "transport/sim/timed_network.hpp"
#include <mccl/collective.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace mccl::sim {

struct run_options {
  int ranks = 2;
  int ranks_per_host = 1;
  op_kind op = op_kind::allreduce;
  std::string algorithm;      ///< empty: the table's choice for `bytes`
  std::size_t bytes = 1 << 20; ///< the op's size (cost_model.hpp says which buffer)
  transport::link_model net{10e-6, 1.25e9};  ///< 10 us, 10 Gbit/s
  transport::link_model host{1e-6, 10e9};    ///< 1 us, 10 GB/s
  /// Per-rank buffer budget (scaled mode above it); 0: 256 MiB over all
  /// ranks, at most 1 MiB each.
  std::size_t max_rank_bytes = 0;
  /// Kill this rank at `kill_at` virtual seconds (fault mode).
  std::optional<int> kill_rank;
  double kill_at = 0;
  /// After a kill: the survivors form a new world (as communicator::shrink
  /// does) and run the op again, checked.
  bool shrink = false;
};

/// One rank's end of the op.
struct rank_outcome {
  bool ok = false;
  std::string error;   ///< the op's error message when it failed
  double ended_at = 0; ///< virtual seconds
};

struct run_result {
  std::string algorithm;   ///< what the engine ran
  double seconds = 0;      ///< virtual time until the last rank finished
  cost_estimate predicted; ///< the model's time for that algorithm
  double scale = 1;        ///< payload bytes counted per byte moved
  std::size_t count = 0;   ///< elements of the op's largest buffer moved per rank
  std::size_t mismatches = 0;          ///< wrong elements, over every rank
  std::string first_mismatch;          ///< where, when there were any
  std::vector<rank_outcome> outcomes;  ///< by rank
  double wall_seconds = 0;
  /// Fault mode with shrink: the survivors' run.
  std::shared_ptr<run_result> after_shrink;
};

/// "allreduce", ... -> op_kind (throws std::invalid_argument listing them).
op_kind parse_op(const std::string& name);

/// Runs the op once on every rank and checks it. Throws
/// std::invalid_argument for options that make no sense; a stall (ops not
/// done, nothing in flight, no timer) is reported in the outcomes.
run_result run(const run_options& options);

/// The cost model's parameters for these options (full-size chunks).
cost_params model_of(const run_options& options);

} // namespace mccl::sim
