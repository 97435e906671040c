#pragma once
/// What mccl-bench, gloo-bench and mpi-bench share, so the three measure and
/// report the same way: op names, nccl-tests' size and busbw conventions,
/// byte-size parsing, iteration counts, the deterministic input values and
/// percentiles. Header-only and free of mccl, Gloo and MPI, because
/// gloo-bench and mpi-bench do not link mccl.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace bench {

enum class bench_op { allreduce, broadcast, reduce, allgather, reduce_scatter, alltoall, gather,
                      scatter, barrier, sendrecv };

struct op_name {
  bench_op op;
  const char* name;
};

inline constexpr op_name op_names[] = {
  {bench_op::allreduce, "allreduce"},           {bench_op::broadcast, "broadcast"},
  {bench_op::reduce, "reduce"},                 {bench_op::allgather, "allgather"},
  {bench_op::reduce_scatter, "reduce_scatter"}, {bench_op::alltoall, "alltoall"},
  {bench_op::gather, "gather"},                 {bench_op::scatter, "scatter"},
  {bench_op::barrier, "barrier"},               {bench_op::sendrecv, "sendrecv"},
};

inline const char* to_string(bench_op op) {
  for (const auto& n : op_names)
    if (n.op == op)
      return n.name;
  return "unknown";
}

/// "allreduce, broadcast, ..." for a usage message.
inline std::string op_list(const std::vector<bench_op>& supported) {
  std::string out;
  for (auto op : supported)
    out += (out.empty() ? "" : ", ") + std::string(to_string(op));
  return out;
}

/// The op named `text` if the calling benchmark supports it.
inline std::optional<bench_op> parse_op(const std::string& text, const std::vector<bench_op>& supported) {
  for (auto op : supported)
    if (text == to_string(op))
      return op;
  return std::nullopt;
}

inline bool reduces(bench_op op) {
  return op == bench_op::allreduce || op == bench_op::reduce || op == bench_op::reduce_scatter;
}

inline bool rooted(bench_op op) {
  return op == bench_op::broadcast || op == bench_op::reduce || op == bench_op::gather
         || op == bench_op::scatter;
}

/// True for ops whose size is the gathered / full buffer of count * world.
inline bool blocked(bench_op op) {
  return op == bench_op::allgather || op == bench_op::reduce_scatter || op == bench_op::alltoall
         || op == bench_op::gather || op == bench_op::scatter;
}

/// busbw / algbw, as in nccl-tests.
inline double bus_factor(bench_op op, int world) {
  double n = world;
  switch (op) {
    case bench_op::allreduce: return world > 1 ? 2.0 * (n - 1) / n : 0.0;
    case bench_op::broadcast:
    case bench_op::reduce:
    case bench_op::sendrecv: return 1.0;
    case bench_op::allgather:
    case bench_op::reduce_scatter:
    case bench_op::alltoall:
    case bench_op::gather:
    case bench_op::scatter: return (n - 1) / n;
    case bench_op::barrier: return 0.0;
  }
  return 0.0;
}

/// "4", "64K", "1M", "2G" (binary multiples, case-insensitive, optional
/// trailing B or iB), as mccl::parse_byte_size reads them; nullopt on junk
/// or overflow.
inline std::optional<std::size_t> parse_byte_size(const std::string& text) {
  constexpr auto max = static_cast<std::size_t>(-1);
  std::size_t i = 0, value = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    auto digit = static_cast<std::size_t>(text[i] - '0');
    if (value > (max - digit) / 10)
      return std::nullopt;
    value = value * 10 + digit;
  }
  if (i == 0)
    return std::nullopt;
  std::size_t multiplier = 1;
  if (i < text.size()) {
    switch (text[i]) {
      case 'k': case 'K': multiplier = std::size_t{1} << 10; break;
      case 'm': case 'M': multiplier = std::size_t{1} << 20; break;
      case 'g': case 'G': multiplier = std::size_t{1} << 30; break;
      default: break;
    }
    if (multiplier != 1)
      ++i;
  }
  std::string rest = text.substr(i);
  for (auto& c : rest)
    c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  if (!(rest.empty() || rest == "B" || (multiplier != 1 && rest == "IB")))
    return std::nullopt;
  if (value > max / multiplier)
    return std::nullopt;
  return value * multiplier;
}

/// A count for -n / -w: 0..1000000, nullopt otherwise.
inline std::optional<int> parse_count(const char* text) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 0 || v > 1000000)
    return std::nullopt;
  return static_cast<int>(v);
}

/// Iterations for a size when -n is not given: enough for a stable median,
/// few enough that a 4-rank demo on 2 cores finishes in seconds.
inline int default_iters(std::size_t bytes) {
  if (bytes <= (64u << 10)) return 200;
  if (bytes <= (1u << 20)) return 50;
  if (bytes <= (16u << 20)) return 10;
  return 5;
}

// ---- deterministic data -------------------------------------------------------
//
// Element j of rank r's input holds value(r, j) = (r + 1) * (j % 7 + 1): small
// positive integers (never 0, the fill of receive buffers), so sums are exact
// in every type and the reference is known without communication.

inline int64_t value(int rank, std::size_t j) {
  return static_cast<int64_t>(rank + 1) * static_cast<int64_t>(j % 7 + 1);
}

/// The sum of value(r, j) over ranks 0..world-1.
inline int64_t ranks_sum(int world, std::size_t j) {
  return static_cast<int64_t>(world) * (world + 1) / 2 * static_cast<int64_t>(j % 7 + 1);
}

// What each rank holds after the data-moving ops, for per-rank blocks of c
// elements (j indexes the whole gathered buffer, k one block):

/// allgather, and gather at the root: block b is rank b's input.
inline int64_t gathered_value(std::size_t c, std::size_t j) {
  return value(static_cast<int>(j / c), j % c);
}

/// alltoall on `rank`: block b is block `rank` of rank b's input.
inline int64_t alltoall_value(int rank, std::size_t c, std::size_t j) {
  return value(static_cast<int>(j / c), static_cast<std::size_t>(rank) * c + j % c);
}

/// scatter on `rank`: block `rank` of the root's input.
inline int64_t scatter_value(int root, int rank, std::size_t c, std::size_t k) {
  return value(root, static_cast<std::size_t>(rank) * c + k);
}

/// IEEE binary16 bits of v mod 2048 (exact: integers below 2048 need 11 bits).
inline uint16_t half_bits(int64_t v) {
  auto x = static_cast<uint32_t>(v % 2048);
  if (x == 0)
    return 0;
  int e = 31 - __builtin_clz(x);
  uint32_t mantissa = (x << (10 - e)) & 0x3ffu;
  return static_cast<uint16_t>(((e + 15) << 10) | mantissa);
}

/// The p-th percentile (nearest rank) of v; 0 for an empty v.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  auto idx = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  auto nth = v.begin() + static_cast<std::ptrdiff_t>(std::min(v.size() - 1, idx == 0 ? 0 : idx - 1));
  std::nth_element(v.begin(), nth, v.end());
  return *nth;
}

/// s as a JSON string literal.
inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

} // namespace bench
