#pragma once
/// Top-k selection for sparsified allreduce (MCCL_COMPRESSION=topk): the k
/// elements of largest magnitude, found in linear time. A sample of the
/// magnitudes gives a threshold; one vectorised pass (topk_kernels.cpp)
/// collects the indices at or above it, block by block into a buffer the
/// size of the expected candidates; only those few are then ordered.

#include <cstddef>
#include <cstdint>

namespace mccl {

/// The k elements of v with the largest |v[i]|: their indices, ascending,
/// to index[0..k) and their values to value[0..k). Ties at the threshold go
/// to the lower index, so every run on the same data picks the same set.
/// NaNs come last (picked only when fewer than k elements are numbers).
/// k is capped at n; returns it.
std::size_t topk_select(const float* v, std::size_t n, std::size_t k, uint32_t* index, float* value);

/// Error feedback: the same for v = residual + x, with residual += x done in
/// the same pass; then the picked entries of residual are zeroed (what is
/// sent is no longer owed), so afterwards residual holds what was not sent.
std::size_t topk_select_after_adding(float* residual, const float* x, std::size_t n, std::size_t k,
                                     uint32_t* index, float* value);

/// k for `ratio` of n elements: ceil(ratio * n), at least 1 (for n >= 1).
std::size_t topk_count(std::size_t n, double ratio);

} // namespace mccl
