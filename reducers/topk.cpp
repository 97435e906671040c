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

namespace {

/// Elements per call of the filter: its candidates are appended to a
/// buffer that grows with what it finds, never to one the size of v.
constexpr std::size_t block = 16384;

/// Indices i with |v[i]| >= t (with acc: acc += x first, v = acc), ascending.
void collect(float* acc, const float* x, std::size_t n, float t, std::vector<uint32_t>& out) {
  out.clear();
  std::size_t m = 0;
  for (std::size_t i = 0; i < n; i += block) {
    auto len = std::min(block, n - i);
    if (out.size() < m + len + 64)
      out.resize(std::max(out.size() * 2, m + len + 64));
    m += detail::select_at_least_kernel(acc ? acc + i : nullptr, x + i, len, t,
                                        static_cast<uint32_t>(i), out.data() + m);
  }
  out.resize(m);
}

/// The top k of v among `cand` (all indices with |v| at or above some
/// threshold, ascending), or of all of v when fewer than k are there.
std::vector<uint32_t> finish(const float* v, std::size_t n, std::size_t k, std::vector<uint32_t> cand) {
  if (cand.size() < k) {
    // Fewer than k elements that are not NaN: the NaNs fill up, first ones
    // first, so that every rank contributes exactly k.
    std::vector<bool> taken(n, false);
    for (auto i : cand)
      taken[i] = true;
    for (std::size_t i = 0; i < n && cand.size() < k; ++i)
      if (!taken[i])
        cand.push_back(static_cast<uint32_t>(i));
    std::sort(cand.begin(), cand.end());
    return cand;
  }
  if (cand.size() == k)
    return cand;
  // The k-th largest magnitude among the candidates (on a contiguous copy:
  // ordering indices by v[i] would jump around v), then one pass in index
  // order keeps everything above it and the lowest-index ties: ascending,
  // deterministic, no sort of the result.
  std::vector<float> mags(cand.size());
  for (std::size_t j = 0; j < cand.size(); ++j)
    mags[j] = std::fabs(v[cand[j]]);
  std::vector<float> order = mags;
  std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k - 1), order.end(),
                   std::greater<float>());
  const float kth = order[k - 1];
  std::size_t above = 0;
  for (float m : mags)
    above += m > kth;
  std::size_t ties = k - above;
  std::vector<uint32_t> out;
  out.reserve(k);
  for (std::size_t j = 0; j < cand.size(); ++j)
    if (mags[j] > kth || (mags[j] == kth && ties > 0 && ties--))
      out.push_back(cand[j]);
  return out;
}

/// An evenly spread sample of |value(i)|, ending in 0 (the last resort):
/// the thresholds to try, ordered only as far as they are used.
template <class Value>
std::vector<float> sampled_magnitudes(std::size_t n, Value value) {
  constexpr std::size_t max_sample = 8192;
  const std::size_t stride = std::max<std::size_t>(1, n / max_sample);
  std::vector<float> sample;
  for (std::size_t i = 0; i < n; i += stride) {
    float v = value(i);
    if (!std::isnan(v))
      sample.push_back(std::fabs(v));
  }
  sample.push_back(0.0f);
  return sample;
}

/// The pos-th largest of the sample. Called with growing pos: everything
/// after an earlier pos is already no larger, so only that tail is ordered.
float threshold_at(std::vector<float>& sample, std::size_t pos, std::size_t ordered_from) {
  std::nth_element(sample.begin() + static_cast<std::ptrdiff_t>(ordered_from),
                   sample.begin() + static_cast<std::ptrdiff_t>(pos), sample.end(),
                   std::greater<float>());
  return sample[pos];
}

/// The first threshold to try: about 1.5x the sample's share of k lies
/// above it, so one pass usually collects a few more than k candidates.
std::size_t first_guess(const std::vector<float>& sample, std::size_t n, std::size_t k) {
  auto want = static_cast<double>(k) / static_cast<double>(n) * 1.5;
  return std::min(sample.size() - 1, static_cast<std::size_t>(want * static_cast<double>(sample.size())));
}

/// Lower thresholds (a sample four times further down each time) until at
/// least k candidates are at or above one, or the threshold is zero.
void widen_until_k(const float* v, std::size_t n, std::size_t k, std::vector<float>& sample,
                   std::size_t pos, std::vector<uint32_t>& cand) {
  while (cand.size() < k && pos + 1 < sample.size()) {
    auto next = std::min(sample.size() - 1, pos * 4 + 1);
    collect(nullptr, v, n, threshold_at(sample, next, pos + 1), cand);
    pos = next;
  }
}

} // namespace

std::vector<uint32_t> topk_indices(const float* v, std::size_t n, std::size_t k) {
  k = std::min(k, n);
  if (k == 0)
    return {};
  auto sample = sampled_magnitudes(n, [v](std::size_t i) { return v[i]; });
  auto pos = first_guess(sample, n, k);
  std::vector<uint32_t> cand;
  collect(nullptr, v, n, threshold_at(sample, pos, 0), cand);
  widen_until_k(v, n, k, sample, pos, cand);
  return finish(v, n, k, std::move(cand));
}

std::vector<uint32_t> topk_indices_after_adding(float* residual, const float* x, std::size_t n,
                                                std::size_t k) {
  k = std::min(k, n);
  if (k == 0) {
    for (std::size_t i = 0; i < n; ++i)
      residual[i] += x[i];
    return {};
  }
  // The sample reads the sums it will find; the pass then adds and selects.
  auto sample = sampled_magnitudes(n, [&](std::size_t i) { return residual[i] + x[i]; });
  auto pos = first_guess(sample, n, k);
  std::vector<uint32_t> cand;
  collect(residual, x, n, threshold_at(sample, pos, 0), cand);
  widen_until_k(residual, n, k, sample, pos, cand);
  return finish(residual, n, k, std::move(cand));
}

} // namespace mccl
