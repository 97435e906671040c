#pragma once
/// The choice of algorithm per op, from the registry of algorithms by (op
/// kind, name) (register_algorithm, include/mccl/collective.hpp). Built-in
/// algorithms register there exactly like a user's own; a user's
/// collective is an algorithm registered under op_kind::custom
/// (register_collective).

#include "collectives/engine/op.hpp"

#include <mccl/collective.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mccl {

struct config;

/// The algorithm an op runs with on `world` ranks: what MCCL_ALGO names for
/// its kind and size when that fits the world, else the built-in table
/// (default_algorithm). A custom op's algorithm is its name.
std::string choose_algorithm(const op_request& op, int world, const config& cfg);

/// The algorithm that runs `op`: its name and factory (choose_algorithm,
/// except that an op with nothing to move on any rank runs as an "empty"
/// barrier carrying its signature). Empty name and factory, and *why, when
/// none is registered under the chosen name; *code (if given) says whether
/// that is the settings' fault (errc::invalid_config: MCCL_ALGO names an
/// algorithm of the host board, and there is none) or errc::internal.
/// `cache`, when given, answers the registry look-up for names it saw
/// before (algorithm_cache).
class algorithm_cache;
std::pair<std::string, algorithm_factory> select_algorithm(const op_request& op, int world,
                                                           const config& cfg, std::string* why,
                                                           errc* code = nullptr, algorithm_cache* cache = nullptr);

/// find_algorithm's answers, kept by one user (an engine, on its leader's
/// thread; not thread-safe): the registry look-up takes its mutex and
/// compares names in a map, some 300 instructions an op. Registering an
/// algorithm empties every cache at its next look-up.
class algorithm_cache {
public:
  algorithm_factory find(op_kind kind, const std::string& name);

private:
  struct entry {
    op_kind kind;
    std::string name;
    algorithm_factory factory;
  };
  std::vector<entry> entries_;
  uint64_t generation_ = 0; ///< the registry's, when entries_ were looked up
};

/// mccl's own choice for (kind, bytes, world), from measurements
/// (bench/RESULTS.md has the runs behind the thresholds).
std::string default_algorithm(op_kind kind, std::size_t bytes, int world, const config& cfg);

/// The algorithm for an op with compression when the table's choice
/// cannot compress (oneshot, the pipelined ring, the broadcast tree): the
/// step program closest to it.
std::string compressing_algorithm(op_kind kind, std::size_t bytes, int world);

/// Throws mccl::error(invalid_config) when MCCL_ALGO names an algorithm
/// that is not registered for its operation, listing the ones that are.
void validate_algo_spec(const config& cfg);

/// "allreduce: oneshot <= 64 KiB < ring; ..." for the INFO log.
std::string describe_selection(int world, const config& cfg);

/// Registers mccl's own algorithms (idempotent; the runtime calls it).
void register_builtin_algorithms();

} // namespace mccl
