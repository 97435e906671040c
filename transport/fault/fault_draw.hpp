#pragma once
/// What link faults (fault_connection.cpp) and chunk faults
/// (collectives/engine/chunk_faults.cpp) share to decide whether a fault fires:
/// a seeded stream per fault, link and chunk, and the rank filter.

#include <mccl/faults.hpp>

#include <cstdint>

namespace mccl::transport {

/// One splitmix64 step: different faults, links and chunks get unrelated
/// streams from one scenario seed.
inline uint64_t mix(uint64_t a, uint64_t b) noexcept {
  uint64_t z = a + 0x9E3779B97F4A7C15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A scenario's rank filter: `want` is a rank or any_rank.
inline bool matches_rank(int want, int rank) noexcept {
  return want == any_rank || want == rank;
}

} // namespace mccl::transport
