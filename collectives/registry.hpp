#pragma once
/// Registry of collective algorithms by (op kind, name), and the default
/// choice per (op, bytes, world). Built-in algorithms register here through
/// register_algorithm(), exactly like a user's own.

#include "collectives/collective.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mccl {

struct config;

using algorithm_factory =
  std::function<std::unique_ptr<algorithm>(collective_io& io, const collective_args& args)>;

/// Registers (or replaces) `name` for `kind`. Thread-safe.
void register_algorithm(op_kind kind, const std::string& name, algorithm_factory factory);

/// The factory registered under (kind, name), or an empty function.
algorithm_factory find_algorithm(op_kind kind, const std::string& name);

/// Names registered for `kind`, sorted.
std::vector<std::string> algorithm_names(op_kind kind);

/// The default algorithm for an op of `bytes` on `world` ranks.
std::string choose_algorithm(op_kind kind, std::size_t bytes, int world, const config& cfg);

/// Registers mccl's own algorithms (idempotent; the runtime calls it).
void register_builtin_algorithms();

} // namespace mccl
