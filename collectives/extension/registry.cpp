#include "collectives/extension/registry.hpp"

#include "collectives/algorithms/chunking.hpp"

#include "collectives/algorithms/board_collectives.hpp"
#include "collectives/algorithms/builtin.hpp"
#include "config/log.hpp"
#include <mccl/config.hpp>

#include <map>
#include <atomic>
#include <mutex>
#include <algorithm>
#include <cmath>
#include <sstream>

namespace mccl {

namespace {

struct entry {
  algorithm_factory factory;
  algorithm_limits limits;
};

std::mutex registry_mutex;
/// Bumped by every registration (algorithm_cache).
std::atomic<uint64_t> registry_generation{1};

std::map<std::pair<op_kind, std::string>, entry>& algorithms_by_name() {
  static std::map<std::pair<op_kind, std::string>, entry> r;
  return r;
}

/// The kinds MCCL_ALGO can name (send, recv and custom have no choice).
constexpr op_kind selectable[] = {op_kind::allreduce, op_kind::broadcast, op_kind::reduce,
                                  op_kind::allgather, op_kind::reduce_scatter, op_kind::gather,
                                  op_kind::scatter,   op_kind::alltoall,  op_kind::barrier};

/// Whether `name` can run `op` on `world` ranks: its limits, and
/// compression where the op asks for it.
bool fits(const op_request& op, const std::string& name, int world) {
  std::lock_guard<std::mutex> guard{registry_mutex};
  auto i = algorithms_by_name().find({op.kind, name});
  return i != algorithms_by_name().end() && i->second.limits.fits(world)
         && (op.compression == compression_kind::none || i->second.limits.compresses);
}

} // namespace

void register_algorithm(op_kind kind, const std::string& name, algorithm_factory factory,
                        algorithm_limits limits) {
  std::lock_guard<std::mutex> guard{registry_mutex};
  algorithms_by_name()[{kind, name}] = entry{std::move(factory), limits};
  registry_generation.fetch_add(1, std::memory_order_release);
}

algorithm_factory algorithm_cache::find(op_kind kind, const std::string& name) {
  auto generation = registry_generation.load(std::memory_order_acquire);
  if (generation != generation_) {
    entries_.clear();
    generation_ = generation;
  }
  for (const auto& e : entries_)
    if (e.kind == kind && e.name == name)
      return e.factory;
  auto factory = find_algorithm(kind, name);
  if (factory)
    entries_.push_back(entry{kind, name, factory});
  return factory;
}

algorithm_factory find_algorithm(op_kind kind, const std::string& name) {
  std::lock_guard<std::mutex> guard{registry_mutex};
  auto i = algorithms_by_name().find({kind, name});
  return i == algorithms_by_name().end() ? algorithm_factory{} : i->second.factory;
}

std::vector<std::string> algorithm_names(op_kind kind) {
  std::lock_guard<std::mutex> guard{registry_mutex};
  std::vector<std::string> out;
  for (const auto& [key, e] : algorithms_by_name())
    if (key.first == kind)
      out.push_back(key.second);
  return out;
}

void register_builtin_algorithms() {
  static std::once_flag once;
  std::call_once(once, [] {
    using namespace builtin;
    // Step programs carry compressed payloads (collectives/programs/step_executor.cpp).
    const algorithm_limits program{1, 1 << 30, true};
    register_algorithm(op_kind::allreduce, "oneshot", make_allreduce_oneshot);
    register_algorithm(op_kind::allreduce, "direct", make_allreduce_direct, {2, 2});
    register_algorithm(op_kind::allreduce, "ring", make_allreduce_ring);
    register_algorithm(op_kind::allreduce, "rd", make_allreduce_rd, program);
    register_algorithm(op_kind::allreduce, "rabenseifner", make_allreduce_rabenseifner, program);
    register_algorithm(op_kind::allreduce, "bidir_ring", make_allreduce_bidir_ring, program);
    register_algorithm(op_kind::allreduce, "topk", make_allreduce_topk);
    register_algorithm(op_kind::broadcast, "tree", make_broadcast_tree);
    register_algorithm(op_kind::broadcast, "chain", make_broadcast_chain);
    register_algorithm(op_kind::broadcast, "scatter_allgather", make_broadcast_scatter_allgather,
                       program);
    register_algorithm(op_kind::reduce, "tree", make_reduce_tree, program);
    register_algorithm(op_kind::reduce, "ring", make_reduce_ring, program);
    register_algorithm(op_kind::allgather, "ring", make_allgather_ring, program);
    register_algorithm(op_kind::allgather, "rd", make_allgather_rd, program);
    register_algorithm(op_kind::allgather, "bidir_ring", make_allgather_bidir_ring, program);
    register_algorithm(op_kind::reduce_scatter, "ring", make_reduce_scatter_ring, program);
    register_algorithm(op_kind::reduce_scatter, "rd", make_reduce_scatter_rd, program);
    register_algorithm(op_kind::reduce_scatter, "halving", make_reduce_scatter_halving, program);
    register_algorithm(op_kind::allreduce, "hier", make_allreduce_hier, program);
    register_algorithm(op_kind::broadcast, "hier", make_broadcast_hier, program);
    register_algorithm(op_kind::allgather, "hier", make_allgather_hier, program);
    register_algorithm(op_kind::reduce_scatter, "hier", make_reduce_scatter_hier, program);
    register_algorithm(op_kind::gather, "linear", make_gather_linear);
    register_algorithm(op_kind::scatter, "linear", make_scatter_linear);
    register_algorithm(op_kind::alltoall, "pairwise", make_alltoall_pairwise);
    register_algorithm(op_kind::barrier, "dissemination", make_barrier_dissemination);
    register_algorithm(op_kind::send, "p2p", make_p2p_send);
    register_algorithm(op_kind::recv, "p2p", make_p2p_recv);
  });
}

namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

bool power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

} // namespace

// The crossovers below come from bench/sweep_algorithms.sh, three runs of
// every algorithm at 2, 3, 4, 8 and 16 ranks (medians in
// bench/sweeps/medians.txt; one rank per core over loopback). Where two
// algorithms were within noise of each other, the simpler one is kept.
std::string default_algorithm(op_kind kind, std::size_t bytes, int world, const config& cfg) {
  bool small = bytes <= cfg.small_msg_threshold;
  // Several hosts, several ranks on some: the links between hosts are the
  // limit, and the host-aware programs send across hosts only what the op
  // needs (a flat algorithm crosses a host boundary on every step that
  // leaves a host, oneshot sends the whole vector to every remote rank)
  // and share it among each host's ranks. On 2 emulated hosts x 2 ranks at
  // 1 Gbit/s they beat the flat table and the ring at every size from 4K
  // (broadcast ties with the chain; bench/RESULTS.md, "Host-aware
  // collectives"). Those links have no latency; with a real network's
  // round trips (tens of us) their one extra round across hosts costs
  // more than the bytes they save up to about 16K on 1-10 Gbit/s.
  if (cfg.hosts > 1 && world > cfg.hosts && bytes > 16 * KiB
      && (kind == op_kind::allreduce || kind == op_kind::allgather
          || kind == op_kind::reduce_scatter || kind == op_kind::broadcast))
    return "hier";
  switch (kind) {
    case op_kind::allreduce:
      if (world == 2) // one round either way; direct pipelines large ones
        return small ? "oneshot" : "direct";
      if (world <= 4) {
        // n-1 copies are cheap while n is small; log2(n) rounds win up to
        // about 1 MiB; then bandwidth: halving-doubling on powers of two,
        // the ring otherwise (it won at 3 ranks). At 4 ranks from 16 KiB the
        // three copies cost more than a second round, over TCP and shared
        // memory alike (64 KiB: 62.6 vs 81.0 us and 56.8 vs 75.0 us;
        // bench/RESULTS.md, "Small allreduces on 16 cores").
        if (small && (world < 4 || bytes < 16 * KiB))
          return "oneshot";
        if (bytes <= MiB)
          return "rd";
        return power_of_two(world) ? "rabenseifner" : "ring";
      }
      // 8 and 16 ranks: recursive doubling beat the one-shot exchange at
      // every size up to 256 KiB, Rabenseifner beyond.
      if (bytes <= 256 * KiB)
        return "rd";
      return power_of_two(world) ? "rabenseifner" : "ring";
    case op_kind::broadcast:
      // On one host the binomial tree won at every size from 3 ranks up (the
      // pipelined chain only ties on 2 ranks, where both are the same single
      // hop). Across hosts a link's rate is the limit: the tree's root sends
      // the whole buffer once per child over its one link, the chain sends
      // every byte over each link once (3 emulated hosts at 1 Gbit/s, 16 and
      // 64 MiB: chain 96-100 % of the rate, tree 48-50 %; bench/RESULTS.md).
      // Many hosts: the chain's last chunk waits p-2 hops behind the first,
      // so past k+2 ranks for k chunks the scatter-allgather (every byte
      // twice over each link, about 2n/rate) beats it; in mccl-sim at 64
      // MiB the chain takes 106 ms on 64 ranks but 269 on 256 and 921 on
      // 1024, the scatter-allgather 122-126 ms (bench/RESULTS.md,
      // "Simulated worlds"; the α–β model agrees).
      if (cfg.hosts > 1 && world > 2 && bytes >= MiB) {
        auto chunk = pipelined_chunk_bytes(static_cast<double>(cfg.chunk_bytes), static_cast<double>(bytes));
        auto chunks = std::ceil(static_cast<double>(bytes) / chunk);
        return world - 2 < chunks ? "chain" : "scatter_allgather";
      }
      return "tree";
    case op_kind::reduce:
      // On 2 ranks the tree's leaf receives nothing and waits for the
      // root's confirmation; the ring version has both ranks receive.
      if (world == 2 && small)
        return "ring";
      return "tree";
    case op_kind::allgather:
      // Recursive doubling won at every size on 4, 8 and 16 ranks; with
      // folded extra ranks (3) only for small sizes.
      if (power_of_two(world) || bytes <= 16 * KiB)
        return "rd";
      return "ring";
    case op_kind::reduce_scatter:
      // Recursive halving: the ring's bytes in log2(p) rounds. On one host
      // of 64 cores, 4 to 64 ranks (powers of two), 4 KiB to 64 MiB, it took
      // 0.04-0.96x the ring's time (the ring's p-1 steps each wait on a
      // neighbour) and beat recursive doubling everywhere but 64 KiB on 4
      // and 8 ranks (within 30 %; docs/performance.md, "Reduce-scatter by
      // recursive halving"). Without a power of two its folding sends the
      // whole vector twice more: the old rule there.
      if (world > 2 && power_of_two(world))
        return "halving";
      // Recursive doubling moves the whole vector every round: it only pays
      // off at small sizes, and more so at larger worlds.
      if (world > 2 && bytes <= (world >= 8 ? 256 * KiB : 16 * KiB))
        return "rd";
      return "ring";
    case op_kind::gather:
    case op_kind::scatter:
      return "linear";
    case op_kind::alltoall:
      return "pairwise";
    case op_kind::barrier:
      return "dissemination";
    case op_kind::send:
    case op_kind::recv:
      return "p2p";
    case op_kind::custom:
      break;
  }
  return {};
}

namespace {

/// Algorithms that run on the host board only (collectives/algorithms/
/// board_collectives.hpp): MCCL_ALGO may name them, the engine never runs
/// them.
bool board_only(op_kind kind, const std::string& name) {
  return !name.empty() && name == staged_algorithm_name(kind);
}

} // namespace

std::string choose_algorithm(const op_request& op, int world, const config& cfg) {
  if (op.kind == op_kind::custom)
    return op.name;
  if (op.compression == compression_kind::topk)
    return "topk"; // the one algorithm that sparsifies
  auto bytes = op.selection_bytes(world);
  if (!cfg.algo.empty()) {
    auto named = algo_for(cfg.algo, to_string(op.kind), bytes);
    // Asked for by name but not on the board: refused by select_algorithm,
    // never replaced silently. The stage runs no v variant: a
    // reduce_scatterv or allgatherv takes the table, and the log says so
    // once.
    if (board_only(op.kind, named) && op.compression == compression_kind::none) {
      if (!op.is_v())
        return named;
      static std::atomic<bool> said{false};
      if (!said.exchange(true))
        MCCL_LOG(info, "MCCL_ALGO names " << named << " for " << to_string(op.kind) << ", which runs no "
                                           << to_string(op.kind) << "v: those take the built-in table's choice");
    }
    // An algorithm the spec names that cannot run on this many ranks (direct
    // on 3), or cannot compress a compressed op, falls back to the table
    // rather than failing the op.
    if (!named.empty() && fits(op, named, world))
      return named;
  }
  auto name = default_algorithm(op.kind, bytes, world, cfg);
  if (op.compression != compression_kind::none && !fits(op, name, world))
    name = compressing_algorithm(op.kind, bytes, world);
  return name;
}

std::string compressing_algorithm(op_kind kind, std::size_t bytes, int world) {
  switch (kind) {
    case op_kind::allreduce:
      // The table's own choice for these sizes, among the step programs.
      if (bytes <= MiB)
        return "rd";
      return power_of_two(world) ? "rabenseifner" : "bidir_ring";
    case op_kind::broadcast:
      return "scatter_allgather";
    default:
      return "ring"; // reduce_scatter, allgather (the table picks programs already)
  }
}

std::pair<std::string, algorithm_factory> select_algorithm(const op_request& op, int world,
                                                           const config& cfg, std::string* why, errc* code,
                                                           algorithm_cache* cache) {
  if (code)
    *code = errc::internal;
  std::string name;
  op_kind registry_kind = op.kind;
  bool empty = op.selection_bytes(world) == 0
               && !(op.kind == op_kind::alltoall && op.is_v()) // others may still send to us
               && op.kind != op_kind::custom && op.kind != op_kind::send && op.kind != op_kind::recv;
  if (empty && op.kind != op_kind::barrier) {
    // Nothing to move, but every rank must still agree that this op happened
    // (a rank that issued something else is caught): an empty barrier,
    // carrying this op's signature.
    registry_kind = op_kind::barrier;
    name = "dissemination";
  } else {
    name = choose_algorithm(op, world, cfg);
  }
  if (board_only(registry_kind, name)) {
    if (why)
      *why = "MCCL_ALGO names " + name + " for this " + to_string(op.kind)
             + ", which runs only on the host board: every rank on one host over shared memory, "
               "MCCL_SHM_BOARD_BYTES and MCCL_SHM_STAGE_BYTES above 0 and no fault injection "
               "(this communicator has no board, or no stage on it; its log says why at INFO)";
    if (code)
      *code = errc::invalid_config;
    return {};
  }
  auto factory = cache ? cache->find(registry_kind, name) : find_algorithm(registry_kind, name);
  if (!factory && why) {
    *why = op.kind == op_kind::custom
             ? "no collective named \"" + op.name + "\" is registered"
             : std::string("no algorithm \"") + name + "\" registered for " + to_string(op.kind);
    return {};
  }
  return {empty && op.kind != op_kind::barrier ? "empty" : name, std::move(factory)};
}

void validate_algo_spec(const config& cfg) {
  for (const auto& [op_name, rules] : cfg.algo.rules) {
    op_kind kind;
    if (!op_kind_from_string(op_name, kind))
      continue; // the parser already rejects unknown operations
    auto names = algorithm_names(kind);
    if (auto staged = std::string(staged_algorithm_name(kind)); !staged.empty())
      names.push_back(staged);
    for (const auto& rule : rules) {
      if (find_algorithm(kind, rule.algorithm) || board_only(kind, rule.algorithm))
        continue;
      std::string known;
      for (const auto& n : names)
        known += (known.empty() ? "" : ", ") + n;
      throw error(errc::invalid_config, "MCCL_ALGO=\"" + cfg.algo.text + "\": " + op_name
                                          + " has no algorithm \"" + rule.algorithm
                                          + "\" (registered: " + known + ")");
    }
  }
}

std::string describe_selection(int world, const config& cfg) {
  std::ostringstream out;
  out << "algorithm selection for " << world << " ranks ("
      << (cfg.algo.empty() ? "built-in table" : "MCCL_ALGO, then the built-in table") << "):";
  for (auto kind : selectable) {
    // The table only changes just above powers of two (and the small
    // threshold), so probing those finds every boundary.
    std::vector<std::size_t> edges{cfg.small_msg_threshold};
    for (std::size_t b = 1; b <= std::size_t{1} << 34; b *= 2)
      edges.push_back(b);
    std::sort(edges.begin(), edges.end());
    out << "\n  " << to_string(kind) << ": " << default_algorithm(kind, 0, world, cfg);
    std::string last = default_algorithm(kind, 0, world, cfg);
    for (auto b : edges) {
      auto name = default_algorithm(kind, b + 1, world, cfg);
      if (name != last)
        out << ", " << name << " above " << format_byte_size(b);
      last = name;
    }
  }
  if (!cfg.algo.empty())
    out << "\n  MCCL_ALGO overrides: " << describe(cfg.algo);
  return out.str();
}

} // namespace mccl
