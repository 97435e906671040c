#pragma once
/// Internal: the vectorised pass behind topk.hpp, built per instruction
/// set like the reduction kernels.

#include <cstddef>
#include <cstdint>

namespace mccl::detail {

/// Writes the indices i < n with |v[i]| >= threshold to out, ascending,
/// and returns how many. `out` must have room for n + 64 entries (a vector
/// store may run past the last index it keeps).
std::size_t select_at_least_kernel(const float* v, std::size_t n, float threshold, uint32_t* out);

} // namespace mccl::detail
