#include "collectives/registry.hpp"

#include "collectives/builtin.hpp"
#include "config/config.hpp"

#include <map>
#include <mutex>
#include <sstream>

namespace mccl {

namespace {

struct entry {
  algorithm_factory factory;
  algorithm_limits limits;
};

std::mutex registry_mutex;

std::map<std::pair<op_kind, std::string>, entry>& registry() {
  static std::map<std::pair<op_kind, std::string>, entry> r;
  return r;
}

/// The kinds MCCL_ALGO can name (send, recv and custom have no choice).
constexpr op_kind selectable[] = {op_kind::allreduce, op_kind::broadcast, op_kind::reduce,
                                  op_kind::allgather, op_kind::reduce_scatter, op_kind::gather,
                                  op_kind::scatter,   op_kind::alltoall,  op_kind::barrier};

bool fits(op_kind kind, const std::string& name, int world) {
  std::lock_guard<std::mutex> guard{registry_mutex};
  auto i = registry().find({kind, name});
  return i != registry().end() && i->second.limits.fits(world);
}

} // namespace

void register_algorithm(op_kind kind, const std::string& name, algorithm_factory factory,
                        algorithm_limits limits) {
  std::lock_guard<std::mutex> guard{registry_mutex};
  registry()[{kind, name}] = entry{std::move(factory), limits};
}

algorithm_factory find_algorithm(op_kind kind, const std::string& name) {
  std::lock_guard<std::mutex> guard{registry_mutex};
  auto i = registry().find({kind, name});
  return i == registry().end() ? algorithm_factory{} : i->second.factory;
}

std::vector<std::string> algorithm_names(op_kind kind) {
  std::lock_guard<std::mutex> guard{registry_mutex};
  std::vector<std::string> out;
  for (const auto& [key, e] : registry())
    if (key.first == kind)
      out.push_back(key.second);
  return out;
}

void register_builtin_algorithms() {
  static std::once_flag once;
  std::call_once(once, [] {
    using namespace builtin;
    register_algorithm(op_kind::allreduce, "oneshot", make_allreduce_oneshot);
    register_algorithm(op_kind::allreduce, "direct", make_allreduce_direct, {2, 2});
    register_algorithm(op_kind::allreduce, "ring", make_allreduce_ring);
    register_algorithm(op_kind::allreduce, "rd", make_allreduce_rd);
    register_algorithm(op_kind::allreduce, "rabenseifner", make_allreduce_rabenseifner);
    register_algorithm(op_kind::broadcast, "tree", make_broadcast_tree);
    register_algorithm(op_kind::broadcast, "chain", make_broadcast_chain);
    register_algorithm(op_kind::broadcast, "scatter_allgather", make_broadcast_scatter_allgather);
    register_algorithm(op_kind::reduce, "tree", make_reduce_tree);
    register_algorithm(op_kind::reduce, "ring", make_reduce_ring);
    register_algorithm(op_kind::allgather, "ring", make_allgather_ring);
    register_algorithm(op_kind::allgather, "rd", make_allgather_rd);
    register_algorithm(op_kind::reduce_scatter, "ring", make_reduce_scatter_ring);
    register_algorithm(op_kind::reduce_scatter, "rd", make_reduce_scatter_rd);
    register_algorithm(op_kind::gather, "linear", make_gather_linear);
    register_algorithm(op_kind::scatter, "linear", make_scatter_linear);
    register_algorithm(op_kind::alltoall, "pairwise", make_alltoall_pairwise);
    register_algorithm(op_kind::barrier, "dissemination", make_barrier_dissemination);
    register_algorithm(op_kind::send, "p2p", make_p2p_send);
    register_algorithm(op_kind::recv, "p2p", make_p2p_recv);
  });
}

std::string default_algorithm(op_kind kind, std::size_t bytes, int world, const config& cfg) {
  bool small = bytes <= cfg.small_msg_threshold;
  switch (kind) {
    case op_kind::allreduce:
      // Small: one round of n-1 copies beats log2(n) rounds while n is
      // small; recursive doubling takes over at larger worlds. Large: the
      // 2-rank direct exchange, else the pipelined ring.
      if (small)
        return world <= 4 ? "oneshot" : "rd";
      return world == 2 ? "direct" : "ring";
    case op_kind::broadcast:
      return small ? "tree" : "chain";
    case op_kind::reduce:
      return small || world == 2 ? "tree" : "ring";
    case op_kind::allgather:
      return small ? "rd" : "ring";
    case op_kind::reduce_scatter:
      return small ? "rd" : "ring";
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

std::string choose_algorithm(const op_request& op, int world, const config& cfg) {
  if (op.kind == op_kind::custom)
    return op.name;
  auto bytes = op.selection_bytes(world);
  if (!cfg.algo.empty()) {
    auto named = algo_for(cfg.algo, to_string(op.kind), bytes);
    // An algorithm the spec names that cannot run on this many ranks (direct
    // on 3) falls back to the table rather than failing the op.
    if (!named.empty() && fits(op.kind, named, world))
      return named;
  }
  return default_algorithm(op.kind, bytes, world, cfg);
}

void validate_algo_spec(const config& cfg) {
  for (const auto& [op_name, rules] : cfg.algo.rules) {
    op_kind kind;
    if (!op_kind_from_string(op_name, kind))
      continue; // the parser already rejects unknown operations
    auto names = algorithm_names(kind);
    for (const auto& rule : rules) {
      if (find_algorithm(kind, rule.algorithm))
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
  out << "algorithm selection for " << world << " ranks (" << (cfg.algo.empty() ? "built-in table" : "MCCL_ALGO, then built-in table")
      << "), small messages <= " << format_byte_size(cfg.small_msg_threshold) << ":";
  for (auto kind : selectable) {
    auto small = default_algorithm(kind, 1, world, cfg);
    auto large = default_algorithm(kind, cfg.small_msg_threshold + 1, world, cfg);
    out << "\n  " << to_string(kind) << ": " << small;
    if (large != small)
      out << " (small), " << large << " (large)";
  }
  if (!cfg.algo.empty())
    out << "\n  MCCL_ALGO overrides: " << describe(cfg.algo);
  return out.str();
}

} // namespace mccl
