#pragma once
// Shared by the schedule and step-program simulations: which ranks' data a
// block holds, as a bit set (worlds up to 64).

#include <cstdint>

namespace sim {

constexpr int max_world = 64;

/// Bit r set: rank r's contribution (reductions) or rank r's original data
/// (data movement) is in the block.
using contributions = uint64_t;

inline contributions everyone(int world) {
  return world == 64 ? ~contributions{0} : ((contributions{1} << world) - 1);
}

inline contributions only(int rank) { return contributions{1} << rank; }

inline int ceil_log2(int w) {
  int k = 0;
  while ((1 << k) < w)
    ++k;
  return k;
}

} // namespace sim
