#include "collectives/registry.hpp"

#include "collectives/builtin.hpp"
#include "config/config.hpp"

#include <map>
#include <mutex>

namespace mccl {

namespace {

std::mutex registry_mutex;

std::map<std::pair<op_kind, std::string>, algorithm_factory>& registry() {
  static std::map<std::pair<op_kind, std::string>, algorithm_factory> r;
  return r;
}

} // namespace

const char* to_string(op_kind kind) noexcept {
  switch (kind) {
    case op_kind::allreduce: return "allreduce";
    case op_kind::broadcast: return "broadcast";
    case op_kind::barrier: return "barrier";
  }
  return "?";
}

void register_algorithm(op_kind kind, const std::string& name, algorithm_factory factory) {
  std::lock_guard<std::mutex> guard{registry_mutex};
  registry()[{kind, name}] = std::move(factory);
}

algorithm_factory find_algorithm(op_kind kind, const std::string& name) {
  std::lock_guard<std::mutex> guard{registry_mutex};
  auto i = registry().find({kind, name});
  return i == registry().end() ? algorithm_factory{} : i->second;
}

std::vector<std::string> algorithm_names(op_kind kind) {
  std::lock_guard<std::mutex> guard{registry_mutex};
  std::vector<std::string> out;
  for (const auto& [key, f] : registry())
    if (key.first == kind)
      out.push_back(key.second);
  return out;
}

void register_builtin_algorithms() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_algorithm(op_kind::allreduce, "direct", builtin::make_allreduce_direct);
    register_algorithm(op_kind::allreduce, "ring", builtin::make_allreduce_ring);
    register_algorithm(op_kind::allreduce, "oneshot", builtin::make_allreduce_oneshot);
    register_algorithm(op_kind::broadcast, "tree", builtin::make_broadcast_tree);
    register_algorithm(op_kind::broadcast, "chain", builtin::make_broadcast_chain);
    register_algorithm(op_kind::barrier, "dissemination", builtin::make_barrier_dissemination);
  });
}

std::string choose_algorithm(op_kind kind, std::size_t bytes, int world, const config& cfg) {
  switch (kind) {
    case op_kind::allreduce:
      // One round beats 2(n-1) ring steps while the n-1 copies stay small.
      if (bytes <= cfg.small_msg_threshold)
        return "oneshot";
      return world == 2 ? "direct" : "ring";
    case op_kind::broadcast:
      return bytes <= cfg.small_msg_threshold ? "tree" : "chain";
    case op_kind::barrier:
      return "dissemination";
  }
  return {};
}

} // namespace mccl
