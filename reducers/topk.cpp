#include "reducers/topk.hpp"

#include "reducers/topk_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

namespace mccl {

std::size_t topk_count(std::size_t n, double ratio) {
  if (n == 0)
    return 0;
  auto k = static_cast<std::size_t>(std::ceil(ratio * static_cast<double>(n)));
  return std::clamp<std::size_t>(k, 1, n);
}

std::vector<uint32_t> topk_indices(const float* v, std::size_t n, std::size_t k) {
  k = std::min(k, n);
  if (k == 0)
    return {};
  // A threshold from an evenly spread sample: about 1.5x the sample's
  // share of k lies above it, so one pass usually collects a few more than
  // k candidates. When it finds too few, the next threshold is the next
  // lower sample (at worst zero: every element that is not NaN).
  constexpr std::size_t max_sample = 8192;
  const std::size_t stride = std::max<std::size_t>(1, n / max_sample);
  std::vector<float> sample;
  for (std::size_t i = 0; i < n; i += stride)
    if (!std::isnan(v[i]))
      sample.push_back(std::fabs(v[i]));
  std::sort(sample.begin(), sample.end(), std::greater<float>());
  sample.push_back(0.0f);
  auto want = static_cast<double>(k) / static_cast<double>(n) * 1.5;
  auto pos = std::min(sample.size() - 1,
                      static_cast<std::size_t>(want * static_cast<double>(sample.size())));
  std::vector<uint32_t> cand(n + 64);
  std::size_t m = 0;
  for (;;) {
    m = detail::select_at_least_kernel(v, n, sample[pos], cand.data());
    if (m >= k || pos + 1 >= sample.size())
      break;
    // Too few: drop to a sample four times further down.
    pos = std::min(sample.size() - 1, pos * 4 + 1);
  }
  cand.resize(m);
  if (m < k) {
    // Fewer than k elements that are not NaN: the NaNs fill up, first ones
    // first, so that every rank contributes exactly k.
    std::vector<bool> taken(n, false);
    for (auto i : cand)
      taken[i] = true;
    for (std::size_t i = 0; i < n && cand.size() < k; ++i)
      if (!taken[i])
        cand.push_back(static_cast<uint32_t>(i));
    std::sort(cand.begin(), cand.end());
  } else if (m > k) {
    // Largest magnitude first, the lower index on ties.
    auto before = [v](uint32_t a, uint32_t b) {
      float x = std::fabs(v[a]), y = std::fabs(v[b]);
      return x > y || (x == y && a < b);
    };
    std::nth_element(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(k), cand.end(), before);
    cand.resize(k);
    std::sort(cand.begin(), cand.end());
  }
  return cand;
}

} // namespace mccl
