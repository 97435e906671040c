#pragma once
/// Element-wise reduction kernels used by the collectives. Buffers may have
/// any byte alignment (a chunk can start anywhere in a receive buffer). The
/// loops are vectorised for every dtype, for the best instruction set the
/// running CPU has (chosen at run time; the library needs only x86-64).

#include <mccl/types.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace mccl {

/// dst[i] = dst[i] (op) src[i] for i < n. For avg this accumulates a sum
/// (see finish_avg). Integer sum/prod wrap modulo 2^bits; float min/max
/// propagate NaN. float16/bfloat16 are computed in float32 and each result is
/// rounded to nearest even (overflow to inf, NaN stays a quiet NaN; see
/// reducers/half.hpp for the same conversions in scalar form). bool:
/// sum/max/bor = or, prod/min/band = and, bxor = xor, results are 0/1
/// whatever non-zero byte an input held.
/// Preconditions: src and dst do not overlap; null pointers only with n == 0.
/// Throws mccl::error (unsupported or invalid_argument) when
/// check_reduction(op, t) is not empty.
void reduce(redop op, dtype t, void* dst, const void* src, std::size_t n);

/// dst[i] = a[i] (op) b[i]. dst may be exactly a or b (or both); partial
/// overlap is not allowed. Errors as for reduce().
void reduce3(redop op, dtype t, void* dst, const void* a, const void* b, std::size_t n);

/// dst = sources[0] (op) sources[1] (op) ... (op) sources[k - 1], folded in
/// that order: the same bits as copying sources[0] to dst and then reducing
/// each further source into it (NaN payloads aside), checking the arguments
/// and choosing the kernel once. A few elements from each of many ranks
/// cost mostly that: a reduce() of one float32 took 34 ns, reduce_many
/// folds 32 sources of one float32 in 0.31 us (the build machine).
/// dst may be exactly sources[0] or sources[1], and overlaps no other
/// source. k >= 1. Errors as for reduce().
void reduce_many(redop op, dtype t, void* dst, const void* const* sources, std::size_t k, std::size_t n);

/// Turns a sum accumulated with redop::avg into the mean over `world`
/// contributions: floats divide (float16/bfloat16 in float32, rounded to
/// nearest even), integers use truncating division.
/// Throws mccl::error(invalid_argument) for world < 1 or a dtype avg does
/// not support.
void finish_avg(dtype t, void* dst, std::size_t n, int world);

// ---- float32 payloads carried as 16-bit floats (compression on the wire) ----
// wire_type is float16 or bfloat16; anything else is invalid_argument.
// Rounding is to nearest, ties to even, as for the 16-bit reductions above.

/// wire (n 16-bit values) = values rounded to wire_type, and values =
/// that rounding read back: the sender keeps exactly what its peers get,
/// so every rank ends an op with the same bits.
void narrow_for_wire(dtype wire_type, void* wire, float* values, std::size_t n);

/// values = values rounded to wire_type and read back (narrow_for_wire
/// without keeping the 16-bit copy).
void round_for_wire(dtype wire_type, float* values, std::size_t n);

/// dst = wire widened to float32.
void widen_from_wire(dtype wire_type, float* dst, const void* wire, std::size_t n);

/// dst = a (op) widened wire; dst may be exactly a. The reduction happens
/// in float32. op is sum, prod, min, max or avg (a sum, see finish_avg).
void reduce_from_wire(redop op, dtype wire_type, float* dst, const float* a, const void* wire,
                      std::size_t n);

} // namespace mccl
