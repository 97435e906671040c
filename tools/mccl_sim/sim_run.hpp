#pragma once
/// mccl-sim's core: N ranks of mccl's engine (collectives/engine/engine.hpp: the
/// data plane users run, with its algorithms, channels, wire format and
/// reductions) in one process and one thread, over the virtual-time
/// network of transport/sim/timed_network.hpp. An event loop takes the
/// place of the actors that drive each rank's engine in a real process:
/// it runs a pass of every rank that has something to do, then moves the
/// clock to the next arrival (or engine timer).
///
/// With every rank on one host, where a job would take the host board,
/// board_model.hpp models the board's time beside the engine's run (the
/// board is shared memory the ranks spin on, which one thread cannot run).
///
/// Scaled mode: 1024 ranks cannot each hold 64 MiB here, so every rank
/// moves a small buffer (a multiple of the world's size in elements, at
/// most max_rank_bytes) and the network counts each payload byte as
/// `scale` bytes, with the chunk size divided by the same factor: the
/// algorithm sends the same messages, in the same number of chunks, and
/// takes the virtual time of the full size. The algorithm is the one the
/// table picks for the full size (or the one asked for). Every element of
/// the small result is checked.
///
/// Elastic runs (fault mode): ranks die at given virtual times during the
/// op; every survivor's op must fail naming a dead rank, as the runtime's
/// errors do. With shrink, the survivors form a new world in their old
/// order; with grow, newcomers join after them, an old rank broadcasts the
/// state to them, and the op runs again. Each membership step makes a new
/// world of engines and connections, as shrink and grow make a new
/// communicator; what the simulator leaves out is how the members agree
/// on it (the store, the handles), which the runtime's tests cover.

#include "collectives/algorithms/cost_model.hpp"
#include "tools/mccl_sim/board_model.hpp"
#include "transport/sim/timed_network.hpp"
#include <mccl/collective.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mccl::sim {

/// A rank that dies at `at` virtual seconds: its connections fail in both
/// directions, as when its process is killed.
struct rank_death {
  int rank = 0;
  double at = 0;
};

struct run_options {
  int ranks = 2;
  int ranks_per_host = 1;
  op_kind op = op_kind::allreduce;
  std::string algorithm;      ///< empty: the table's choice for `bytes`
  std::size_t bytes = 1 << 20; ///< the op's size (cost_model.hpp says which buffer)
  transport::link_model net{10e-6, 1.25e9};  ///< 10 us, 10 Gbit/s
  transport::link_model host{1e-6, 10e9};    ///< 1 us, 10 GB/s
  /// The memory bus all transfers within a host share (timed_network.hpp);
  /// 0: not modelled; below 0: a quarter of board.memory's rate for
  /// ranks_per_host ranks copying at once (host_bus_of).
  double host_bus_bytes_per_s = -1;
  /// The host's memory and its board (board_model.hpp): where a job with
  /// the default settings takes the board, mccl-sim models it too.
  board_model board;
  /// Per-rank buffer budget (scaled mode above it); 0: 256 MiB over all
  /// ranks, at most 1 MiB each.
  std::size_t max_rank_bytes = 0;
  /// Ranks that die during the op, each at its virtual time (fault mode).
  std::vector<rank_death> kills;
  /// After the kills: the survivors form a new world (as communicator::shrink
  /// does: they keep their order, ranks 0..survivors-1) and run the op
  /// again, checked.
  bool shrink = false;
  /// After the shrink: this many newcomers join (as communicator::grow
  /// does: ranks after the survivors', whose ranks stay as they were). The
  /// grown world's rank 0, an old rank, broadcasts the state every old rank
  /// holds; every rank's copy is checked; then the grown world runs the op
  /// again, checked.
  int grow = 0;
};

/// One rank's end of the op.
struct rank_outcome {
  bool ok = false;
  bool killed = false; ///< one of run_options::kills (error says when)
  std::string error;   ///< the op's error message when it failed
  double ended_at = 0; ///< virtual seconds after the op was posted
};

struct run_result {
  std::string algorithm;   ///< what the engine ran
  /// With every rank on one host, what a job with the default settings
  /// would run this op with instead: the host board's algorithm ("board",
  /// "board_rs", "board_stage"; collectives/algorithms/board_collectives.hpp),
  /// whose code mccl-sim does not run (it has no shared memory): `board`
  /// is its model's time, beside the engine's simulated run. Empty where
  /// a job too runs `algorithm` (several hosts, an op the board does not
  /// take, or --algo naming an engine algorithm). A job runs `algorithm`
  /// with MCCL_SHM_BOARD_BYTES=0 or MCCL_TRANSPORT=tcp.
  std::string runtime_algorithm;
  /// The board model's time for runtime_algorithm (when there is one).
  std::optional<board_estimate> board;
  double seconds = 0;      ///< virtual time from the op's start until the last rank finished
  cost_estimate predicted; ///< the model's time for that algorithm
  double scale = 1;        ///< payload bytes counted per byte moved
  std::size_t count = 0;   ///< elements of the op's largest buffer moved per rank
  std::size_t mismatches = 0;          ///< wrong elements, over every rank
  std::string first_mismatch;          ///< where, when there were any
  std::vector<rank_outcome> outcomes;  ///< by rank
  double wall_seconds = 0;
  /// Where each rank of this world came from: its rank in the world
  /// before (the first world for a shrink, the shrunk one for a grow), -1
  /// for a newcomer. Empty for the first world.
  std::vector<int> origin;
  /// Fault mode with shrink: the survivors' run.
  std::shared_ptr<run_result> after_shrink;
  /// With grow: the grown world's run of the op, after its state broadcast.
  std::shared_ptr<run_result> after_grow;
  /// In a grown world: the broadcast from rank 0 that gave the newcomers
  /// the old ranks' state, before the op (its outcomes and check).
  std::shared_ptr<run_result> state_broadcast;
};

/// "allreduce", ... -> op_kind (throws std::invalid_argument listing them).
op_kind parse_op(const std::string& name);

/// Runs the op once on every rank and checks it. Throws
/// std::invalid_argument for options that make no sense; a stall (ops not
/// done, nothing in flight, no timer) is reported in the outcomes.
run_result run(const run_options& options);

/// The options of the world that shrink leaves (the survivors, no kills),
/// and of the world that grow then makes (survivors + grow ranks).
run_options shrunk_options(const run_options& options);
run_options grown_options(const run_options& options);

/// True when `message` names "rank R" (and not "rank R0..."): how a
/// survivor's error is checked to name a dead rank.
bool names_rank(const std::string& message, int rank);

/// Whether every survivor's op of a fault-mode run failed naming one of the
/// dead ranks (or finished, checked, before the deaths mattered).
bool survivors_named_a_dead_rank(const run_options& options, const run_result& result);

/// The links' bus of a host (bytes/s; 0: unlimited): host_bus_bytes_per_s,
/// or where that is below 0, a quarter of the memory's rate for the
/// ranks of a host: a payload byte through a shared-memory ring is copied
/// into it and out of it, each copy reading and writing it.
double host_bus_of(const run_options& options);

/// The cost model's parameters for these options (full-size chunks).
cost_params model_of(const run_options& options);

} // namespace mccl::sim
