#pragma once
/// MCCL_ALGO: a per-op choice of algorithm by message size, e.g.
///   allreduce=rd:0-64K,ring:64K-; broadcast=tree
///
/// Grammar (whitespace around tokens is ignored; a trailing ';' is allowed;
/// the empty string means no rules, i.e. the built-in selection table):
///   spec      := op_rule ( ';' op_rule )*
///   op_rule   := op_name '=' alt ( ',' alt )*
///   alt       := algo_name [ ':' range ]          (no range: every size)
///   range     := [size] '-' [size]                 ([lower, upper); missing lower = 0,
///                                                   missing upper = unbounded)
///   size      := as parse_byte_size() reads it: 4096, 64K, 1M, 2GiB, ...
///   op_name   := one of algo_op_names()
///   algo_name := [a-z0-9_]+
///
/// Only the syntax, the op names and the ranges are checked here. Algorithms
/// are registered at run time (collectives/extension/registry), so whether a named
/// algorithm exists is for the caller to check. This header does not depend
/// on collectives/: ops are named by their strings.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mccl {

/// One alternative of an op rule: use `algorithm` for sizes in [min_bytes, max_bytes).
/// max_bytes == SIZE_MAX means unbounded (SIZE_MAX itself included).
struct algo_rule {
  std::string algorithm;
  std::size_t min_bytes = 0;
  std::size_t max_bytes = SIZE_MAX;
};

/// A parsed MCCL_ALGO value.
struct algo_spec {
  /// By op name; each op's rules do not overlap and are sorted by min_bytes.
  std::map<std::string, std::vector<algo_rule>> rules;
  /// The value as given.
  std::string text;

  /// True when there are no rules (the built-in table decides everything).
  bool empty() const { return rules.empty(); }
};

/// The op names MCCL_ALGO accepts, in a stable order: allreduce, broadcast,
/// reduce, allgather, reduce_scatter, gather, scatter, alltoall, barrier.
const std::vector<std::string>& algo_op_names();

/// Parses an MCCL_ALGO value. Throws mccl::error(errc::invalid_config) with a
/// message that quotes the whole value and names the offending token and its
/// byte offset, e.g.
///   MCCL_ALGO="allreduce=rd:0-64Q": bad size "64Q" at offset 15 (expected ...)
algo_spec parse_algo_spec(const std::string& text);

/// The algorithm the spec names for (op, bytes), or "" if the spec says
/// nothing about it (first matching rule wins).
std::string algo_for(const algo_spec& spec, const std::string& op, std::size_t bytes);

/// Canonical form, which parse_algo_spec() reads back to the same rules:
/// ops in algo_op_names() order separated by "; ", alternatives by ',', a
/// range only where it is not all sizes, e.g.
///   "allreduce=rd:0-64K,ring:64K-; broadcast=tree"
/// "" for an empty spec.
std::string describe(const algo_spec& spec);

} // namespace mccl
