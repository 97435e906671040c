#pragma once
/// Internal: the vectorised pass behind topk.hpp, built per instruction
/// set like the reduction kernels.

#include <cstddef>
#include <cstdint>

namespace mccl::detail {

/// With acc non-null: acc[i] += x[i] first (error feedback), and the test
/// is on the sum. Writes base + i for every i < n with |value| >=
/// threshold to out, ascending, and returns how many. `out` must have room
/// for n + 64 entries (a vector store may run past the last index kept).
std::size_t select_at_least_kernel(float* acc, const float* x, std::size_t n, float threshold,
                                   uint32_t base, uint32_t* out);

} // namespace mccl::detail
