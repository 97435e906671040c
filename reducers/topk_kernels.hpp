#pragma once
/// Internal: the vectorised pass behind topk.hpp, built per instruction
/// set like the reduction kernels.

#include <cstddef>
#include <cstdint>

namespace mccl::detail {

/// With acc non-null: acc[i] += x[i] first (error feedback), and the test
/// is on the sum. For every i < n with |value| >= threshold, ascending,
/// writes base + i to out_index and the value to out_value; returns how
/// many. Both must have room for n entries.
std::size_t select_at_least_kernel(float* acc, const float* x, std::size_t n, float threshold,
                                   uint32_t base, uint32_t* out_index, float* out_value);

} // namespace mccl::detail
