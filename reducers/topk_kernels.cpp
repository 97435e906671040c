// The top-k candidate filter, compiled once per x86 instruction set by
// Highway's foreach_target and chosen at run time, like reduce_kernels.cpp.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "reducers/topk_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/highway.h>

#include <cmath>
#include <cstring>

#include "reducers/topk_kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace mccl::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One compare per vector; the indices (and values) of the lanes at or
// above the threshold go to out_index (out_value), in order. With acc, the
// add of error feedback happens in the same pass (one read of x and acc,
// one write of acc, instead of two passes over memory).
std::size_t SelectAtLeast(float* acc, const float* x, std::size_t n, float threshold, uint32_t base,
                          uint32_t* out_index, float* out_value) {
  const hn::ScalableTag<float> df;
  const std::size_t lanes = hn::Lanes(df);
  static_assert(HWY_MAX_BYTES / sizeof(float) <= 64, "a vector's mask must fit 64 bits");
  const auto t = hn::Set(df, threshold);
  std::size_t m = 0, i = 0;
  for (; i + lanes <= n; i += lanes) {
    auto v = hn::LoadU(df, x + i);
    if (acc) {
      v = hn::Add(hn::LoadU(df, acc + i), v);
      hn::StoreU(v, df, acc + i);
    }
    const auto keep = hn::Ge(hn::Abs(v), t);
    // About 1.5 k of n lanes pass, so most vectors keep nothing and the
    // others one or two lanes: their bits are walked one by one. (A
    // compressing store costs far more here: on AVX2 Highway's version
    // copies a 1 KiB table for every vector that keeps anything.)
    if (hn::AllFalse(df, keep))
      continue;
    uint8_t mask_bytes[8] = {};
    hn::StoreMaskBits(df, keep, mask_bytes);
    uint64_t bits;
    std::memcpy(&bits, mask_bytes, sizeof bits);
    HWY_ALIGN float values[HWY_MAX_BYTES / sizeof(float)];
    hn::Store(v, df, values);
    for (; bits != 0; bits &= bits - 1) {
      auto lane = static_cast<std::size_t>(__builtin_ctzll(bits));
      out_index[m] = base + static_cast<uint32_t>(i + lane);
      out_value[m++] = values[lane];
    }
  }
  for (; i < n; ++i) {
    float v = acc ? (acc[i] += x[i]) : x[i];
    if (std::fabs(v) >= threshold) {
      out_index[m] = base + static_cast<uint32_t>(i);
      out_value[m++] = v;
    }
  }
  return m;
}

} // namespace HWY_NAMESPACE
} // namespace mccl::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mccl::detail {

HWY_EXPORT(SelectAtLeast);

std::size_t select_at_least_kernel(float* acc, const float* x, std::size_t n, float threshold,
                                   uint32_t base, uint32_t* out_index, float* out_value) {
  return HWY_DYNAMIC_DISPATCH(SelectAtLeast)(acc, x, n, threshold, base, out_index, out_value);
}

} // namespace mccl::detail
#endif // HWY_ONCE
