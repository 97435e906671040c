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

/// Elements per call of the filter: its candidates are appended to
/// buffers that grow with what it finds, never to ones the size of v.
constexpr std::size_t block = 16384;

/// The candidates of one selection: indices with |v[i]| at or above a
/// threshold, ascending, and their values. Kept per thread and reused, so
/// that a selection every step neither allocates nor faults in fresh pages
/// (about a quarter of a 64 MiB selection's time when it did).
struct candidates {
  std::vector<uint32_t> index;
  std::vector<float> value;
  std::vector<float> magnitude; ///< scratch for finding the k-th largest
  std::size_t count = 0;

  static candidates& of_this_thread() {
    thread_local candidates c;
    return c;
  }

  /// Keeps the buffers for the next selection of k, unless this one needed
  /// far more than a selection usually does (a threshold lowered to
  /// nothing collects all of v): that much memory is not held per thread.
  void keep_for(std::size_t k) {
    if (index.size() > 16 * k + block) {
      index = {};
      value = {};
      magnitude = {};
    }
  }
};

/// Candidates i with |v[i]| >= t (with acc: acc += x first, v = acc).
void collect(float* acc, const float* x, std::size_t n, float t, candidates& c) {
  c.count = 0;
  for (std::size_t i = 0; i < n; i += block) {
    auto len = std::min(block, n - i);
    if (c.index.size() < c.count + len) {
      auto size = std::max(c.index.size() * 2, c.count + len);
      c.index.resize(size);
      c.value.resize(size);
    }
    c.count += detail::select_at_least_kernel(acc ? acc + i : nullptr, x + i, len, t,
                                              static_cast<uint32_t>(i), c.index.data() + c.count,
                                              c.value.data() + c.count);
  }
}

/// The top k of v among the candidates (all indices with |v| at or above
/// some threshold), or of all of v when fewer than k are there, to index
/// and value.
void finish(const float* v, std::size_t n, std::size_t k, candidates& c, uint32_t* index, float* value) {
  if (c.count < k) {
    // Fewer than k elements that are not NaN: the NaNs fill up, first ones
    // first, so that every rank contributes exactly k.
    std::vector<uint32_t> out(c.index.begin(), c.index.begin() + static_cast<std::ptrdiff_t>(c.count));
    std::vector<bool> taken(n, false);
    for (auto i : out)
      taken[i] = true;
    for (std::size_t i = 0; i < n && out.size() < k; ++i)
      if (!taken[i])
        out.push_back(static_cast<uint32_t>(i));
    std::sort(out.begin(), out.end());
    for (std::size_t j = 0; j < k; ++j) {
      index[j] = out[j];
      value[j] = v[out[j]];
    }
    return;
  }
  // The k-th largest magnitude among the candidates, then one pass in index
  // order keeps everything above it and the lowest-index ties: ascending,
  // deterministic, no sort of the result. When fewer than k candidates lie
  // above the smallest, that smallest is the k-th (many equal values, e.g.
  // quantised gradients): no selection needed.
  float kth = std::fabs(c.value[0]);
  for (std::size_t j = 1; j < c.count; ++j)
    kth = std::min(kth, std::fabs(c.value[j]));
  std::size_t above = 0;
  for (std::size_t j = 0; j < c.count; ++j)
    above += std::fabs(c.value[j]) > kth;
  if (above >= k) {
    c.magnitude.resize(std::max(c.magnitude.size(), c.count));
    auto mags = c.magnitude.begin();
    for (std::size_t j = 0; j < c.count; ++j)
      mags[static_cast<std::ptrdiff_t>(j)] = std::fabs(c.value[j]);
    std::nth_element(mags, mags + static_cast<std::ptrdiff_t>(k - 1),
                     mags + static_cast<std::ptrdiff_t>(c.count), std::greater<float>());
    kth = mags[static_cast<std::ptrdiff_t>(k - 1)];
    above = 0;
    for (std::size_t j = 0; j < c.count; ++j)
      above += std::fabs(c.value[j]) > kth;
  }
  std::size_t ties = k - above;
  std::size_t m = 0;
  for (std::size_t j = 0; j < c.count && m < k; ++j) {
    float mag = std::fabs(c.value[j]);
    if (mag > kth || (mag == kth && ties > 0 && ties--)) {
      index[m] = c.index[j];
      value[m++] = c.value[j];
    }
  }
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
                   std::size_t pos, candidates& cand) {
  while (cand.count < k && pos + 1 < sample.size()) {
    auto next = std::min(sample.size() - 1, pos * 4 + 1);
    collect(nullptr, v, n, threshold_at(sample, next, pos + 1), cand);
    pos = next;
  }
}

} // namespace

std::size_t topk_select(const float* v, std::size_t n, std::size_t k, uint32_t* index, float* value) {
  k = std::min(k, n);
  if (k == 0)
    return 0;
  auto sample = sampled_magnitudes(n, [v](std::size_t i) { return v[i]; });
  auto pos = first_guess(sample, n, k);
  auto& cand = candidates::of_this_thread();
  collect(nullptr, v, n, threshold_at(sample, pos, 0), cand);
  widen_until_k(v, n, k, sample, pos, cand);
  finish(v, n, k, cand, index, value);
  cand.keep_for(k);
  return k;
}

std::size_t topk_select_after_adding(float* residual, const float* x, std::size_t n, std::size_t k,
                                     uint32_t* index, float* value) {
  k = std::min(k, n);
  if (k == 0) {
    for (std::size_t i = 0; i < n; ++i)
      residual[i] += x[i];
    return 0;
  }
  // The sample reads the sums it will find; the pass then adds and selects.
  auto sample = sampled_magnitudes(n, [&](std::size_t i) { return residual[i] + x[i]; });
  auto pos = first_guess(sample, n, k);
  auto& cand = candidates::of_this_thread();
  collect(residual, x, n, threshold_at(sample, pos, 0), cand);
  widen_until_k(residual, n, k, sample, pos, cand);
  finish(residual, n, k, cand, index, value);
  cand.keep_for(k);
  for (std::size_t j = 0; j < k; ++j)
    residual[index[j]] = 0.0f;
  return k;
}

} // namespace mccl
