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
// lanes at or above the threshold go to out, in order.
std::size_t SelectAtLeast(const float* v, std::size_t n, float threshold, uint32_t* out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const std::size_t lanes = hn::Lanes(df);
  const auto t = hn::Set(df, threshold);
  const auto step = hn::Set(du, static_cast<uint32_t>(lanes));
  auto index = hn::Iota(du, 0);
  std::size_t m = 0, i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto keep = hn::RebindMask(du, hn::Ge(hn::Abs(hn::LoadU(df, v + i)), t));
    m += hn::CompressStore(index, keep, du, out + m);
    index = hn::Add(index, step);
  }
  for (; i < n; ++i)
    if (std::fabs(v[i]) >= threshold)
      out[m++] = static_cast<uint32_t>(i);
  return m;
}

} // namespace HWY_NAMESPACE
} // namespace mccl::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mccl::detail {

HWY_EXPORT(SelectAtLeast);

std::size_t select_at_least_kernel(const float* v, std::size_t n, float threshold, uint32_t* out) {
  return HWY_DYNAMIC_DISPATCH(SelectAtLeast)(v, n, threshold, out);
}

} // namespace mccl::detail
#endif // HWY_ONCE
