// The top-k candidate filter, compiled once per x86 instruction set by
// Highway's foreach_target and chosen at run time, like reduce_kernels.cpp.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "reducers/topk_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/highway.h>

#include <cmath>

#include "reducers/topk_kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace mccl::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One compare and one compressing store per vector: the indices of the
// lanes at or above the threshold go to out, in order. With acc, the add
// of error feedback happens in the same pass (one read of x and acc, one
// write of acc, instead of two passes over memory).
std::size_t SelectAtLeast(float* acc, const float* x, std::size_t n, float threshold, uint32_t base,
                          uint32_t* out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const std::size_t lanes = hn::Lanes(df);
  const auto t = hn::Set(df, threshold);
  const auto step = hn::Set(du, static_cast<uint32_t>(lanes));
  auto index = hn::Add(hn::Iota(du, 0), hn::Set(du, base));
  std::size_t m = 0, i = 0;
  for (; i + lanes <= n; i += lanes) {
    auto v = hn::LoadU(df, x + i);
    if (acc) {
      v = hn::Add(hn::LoadU(df, acc + i), v);
      hn::StoreU(v, df, acc + i);
    }
    const auto keep = hn::RebindMask(du, hn::Ge(hn::Abs(v), t));
    // Most vectors keep nothing (about 1.5 k of n lanes pass): skip the
    // compress for those.
    if (!hn::AllFalse(du, keep))
      m += hn::CompressStore(index, keep, du, out + m);
    index = hn::Add(index, step);
  }
  for (; i < n; ++i) {
    float v = acc ? (acc[i] += x[i]) : x[i];
    if (std::fabs(v) >= threshold)
      out[m++] = base + static_cast<uint32_t>(i);
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
                                   uint32_t base, uint32_t* out) {
  return HWY_DYNAMIC_DISPATCH(SelectAtLeast)(acc, x, n, threshold, base, out);
}

} // namespace mccl::detail
#endif // HWY_ONCE
