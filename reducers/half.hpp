#pragma once
/// Scalar conversions between float32 and the two 16-bit float formats mccl
/// moves: IEEE binary16 ("float16", 1-5-10) and bfloat16 (1-8-7, the top half
/// of a float32). Values are passed as their raw uint16_t bit patterns so the
/// header needs no compiler support for a 16-bit float type.
///
/// Narrowing rounds to nearest, ties to even, independent of the FP rounding
/// mode; it overflows to infinity, produces float16 subnormals, and keeps NaN
/// a NaN (sign and top payload bits kept, quiet bit set). These are the
/// semantics of x86 F16C (vcvtps2ph with round-to-nearest), so the vectorised
/// reducers and these helpers agree bit for bit.

#include <cstdint>
#include <cstring>

namespace mccl {

namespace half_detail {

inline uint32_t bits_of(float f) noexcept {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float float_of(uint32_t u) noexcept {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

} // namespace half_detail

/// bfloat16 bits -> float32. Exact: bfloat16 is the top half of a float32.
inline float bf16_to_float(uint16_t h) noexcept {
  return half_detail::float_of(static_cast<uint32_t>(h) << 16);
}

/// float32 -> bfloat16 bits, rounded to nearest even. A plain `>> 16` would
/// truncate (round toward zero), which biases sums of many small gradients.
inline uint16_t float_to_bf16(float f) noexcept {
  uint32_t x = half_detail::bits_of(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u)  // NaN: the rounding add could carry it into inf
    return static_cast<uint16_t>((x >> 16) | 0x0040u);
  // Adding 0x7FFF rounds the dropped 16 bits half-down; adding the kept lsb
  // as well turns exact ties into ties-to-even. A carry out of the mantissa
  // bumps the exponent, which is exactly right (up to inf on overflow).
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

/// float16 bits -> float32. Exact for every finite value and infinity; a NaN
/// keeps sign and payload and comes back quiet (as vcvtph2ps does).
inline float f16_to_float(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  if (exp == 0x1F)
    return half_detail::float_of(sign | 0x7F800000u | (man << 13) | (man ? 0x00400000u : 0u));
  if (exp == 0) {
    // Zero or subnormal: man * 2^-24, exact in float32.
    float v = static_cast<float>(man) * 0x1p-24f;
    return sign ? -v : v;
  }
  // Rebias the exponent from 15 to 127.
  return half_detail::float_of(sign | ((exp + 112u) << 23) | (man << 13));
}

/// float32 -> float16 bits, rounded to nearest even, with float16
/// subnormals, overflow to infinity (from 65520 up) and quiet NaNs.
inline uint16_t float_to_f16(float f) noexcept {
  uint32_t x = half_detail::bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x > 0x7F800000u)  // NaN: top 10 payload bits, quiet bit set
    return static_cast<uint16_t>(sign | 0x7E00u | ((x >> 13) & 0x3FFu));
  if (x >= 0x477FF000u)  // >= 65520, halfway from 65504 (odd mantissa) to 2^16: inf
    return static_cast<uint16_t>(sign | 0x7C00u);
  if (x >= 0x38800000u) {  // >= 2^-14: a normal float16
    // Round the 13 dropped mantissa bits to nearest even (as for bfloat16),
    // then rebias the exponent from 127 to 15 (subtract 112 << 23).
    x += 0xFFFu + ((x >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((x - 0x38000000u) >> 13));
  }
  if (x <= 0x33000000u)  // <= 2^-25: half the smallest subnormal or less, ties to 0
    return sign;
  // Subnormal result m * 2^-24 with m = round(f * 2^24). The 24-bit
  // significand `sig` has value sig * 2^(e - 150), so m = sig >> (126 - e);
  // here e is in [102, 112], so the shift is in [14, 24].
  const uint32_t e = x >> 23;
  const uint32_t sig = (x & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;
  uint32_t m = sig >> shift;
  const uint32_t rem = sig & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (m & 1u)))
    ++m;  // may carry into 0x400, the encoding of the smallest normal: still right
  return static_cast<uint16_t>(sign | m);
}

} // namespace mccl
