#pragma once
/// Internal: the vectorised element loops behind reduce.hpp. They are built
/// for several x86 instruction sets (Google Highway, reduce_kernels.cpp) and
/// the best one the running CPU supports is picked on first use, so the
/// library itself needs only baseline x86-64. Callers validate (op, dtype)
/// and pointers first; see reduce.hpp for the semantics.

#include <cstddef>
#include <cstdint>
#include <vector>

#include <mccl/types.hpp>
#include "reducers/reduce.hpp"

namespace mccl::detail {

/// dst = a op b over n elements. Any byte alignment; dst may be exactly a
/// and/or b. Returns false when there is no kernel for (op, t).
bool reduce_kernel(redop op, dtype t, void* dst, const void* a, const void* b, std::size_t n);

/// dst = sources[0] op sources[1] op ... op sources[k - 1] (k >= 2), folded
/// in that order. dst may be exactly sources[0] or sources[1]. False when
/// there is no kernel for (op, t).
bool reduce_many_kernel(redop op, dtype t, void* dst, const void* const* sources, std::size_t k, std::size_t n);

/// dst[i] /= world for the floating dtypes (float16/bfloat16 divide in
/// float32 and round to nearest even). Returns false for other dtypes.
bool divide_float_kernel(dtype t, void* dst, std::size_t n, int world);

/// wire = values narrowed to wire_type (float16 or bfloat16, nearest even),
/// and values = wire widened back. False for other wire types.
bool narrow_kernel(dtype wire_type, void* wire, float* values, std::size_t n);

/// dst = widen(wire), or dst = a op widen(wire) when a is not null (dst may
/// be exactly a). False for other wire types or a non-arithmetic op.
bool widen_kernel(redop op, dtype wire_type, float* dst, const float* a, const void* wire,
                  std::size_t n);

/// The instruction sets the kernels were built for that this CPU has
/// (Highway target bits, best first); tests force each in turn.
std::vector<int64_t> reduce_kernel_targets();

/// Name of the instruction set the kernels run with, e.g. "AVX3" or "AVX2".
const char* reduce_kernel_target();

} // namespace mccl::detail
