// Top-k selection (reducers/topk.hpp) against a full sort, for every
// instruction set the kernels are built for: sizes around the vector
// width, ties, zeros, NaNs, k from 1 to n.

#include "reducers/topk.hpp"
#include "reducers/reduce_kernels.hpp"
#include "kernel_targets.hpp"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

using namespace mccl;

namespace {

/// The k largest |v| by a stable full sort (ties: lower index), NaNs last.
std::vector<uint32_t> reference(const std::vector<float>& v, std::size_t k) {
  std::vector<uint32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0u);
  auto key = [&](uint32_t i) { return std::isnan(v[i]) ? -1.0f : std::fabs(v[i]); };
  std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return key(a) > key(b); });
  idx.resize(std::min(k, v.size()));
  std::sort(idx.begin(), idx.end());
  return idx;
}

/// topk_select's indices, after checking that its values are v's there.
std::vector<uint32_t> topk_indices(const float* v, std::size_t n, std::size_t k) {
  std::vector<uint32_t> index(std::min(k, n));
  std::vector<float> value(index.size());
  EXPECT_EQ(topk_select(v, n, k, index.data(), value.data()), index.size());
  for (std::size_t j = 0; j < index.size(); ++j) {
    float want = v[index[j]];
    EXPECT_TRUE(value[j] == want || (std::isnan(value[j]) && std::isnan(want))) << "index " << index[j];
  }
  return index;
}


} // namespace

TEST(topk, count_is_ceil_of_ratio_at_least_one) {
  EXPECT_EQ(topk_count(0, 0.5), 0u);
  EXPECT_EQ(topk_count(1, 0.01), 1u);
  EXPECT_EQ(topk_count(40001, 0.01), 401u);
  EXPECT_EQ(topk_count(100, 0.01), 1u);
  EXPECT_EQ(topk_count(100, 1.0), 100u);
}

TEST(topk, matches_a_full_sort) {
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  kernel_test::for_each_kernel_target([&] {
    for (std::size_t n : {1, 2, 15, 16, 17, 63, 1000, 100003}) {
      std::vector<float> v(n);
      for (auto& x : v)
        x = g(rng);
      for (std::size_t k : {std::size_t{1}, n / 100 + 1, n / 3 + 1, n}) {
        ASSERT_EQ(topk_indices(v.data(), n, k), reference(v, k)) << "n " << n << " k " << k;
      }
    }
  });
}

TEST(topk, ties_zeros_and_nans) {
  kernel_test::for_each_kernel_target([&] {
    // Many equal magnitudes of both signs: the lower indices win.
    std::vector<float> ties(1000);
    for (std::size_t i = 0; i < ties.size(); ++i)
      ties[i] = (i % 2 ? -1.0f : 1.0f) * static_cast<float>(i % 4);
    for (std::size_t k : {1, 10, 250, 251, 999})
      ASSERT_EQ(topk_indices(ties.data(), ties.size(), k), reference(ties, k)) << k;
    // All zeros: the first k.
    std::vector<float> zeros(300, 0.0f);
    ASSERT_EQ(topk_indices(zeros.data(), zeros.size(), 7), reference(zeros, 7));
    // NaNs are taken only when there are fewer than k numbers.
    std::vector<float> nans(50, std::numeric_limits<float>::quiet_NaN());
    nans[3] = 2.0f;
    nans[40] = -5.0f;
    ASSERT_EQ(topk_indices(nans.data(), nans.size(), 2), (std::vector<uint32_t>{3, 40}));
    auto four = topk_indices(nans.data(), nans.size(), 4);
    ASSERT_EQ(four.size(), 4u);
    EXPECT_EQ(four, (std::vector<uint32_t>{0, 1, 3, 40}));
    // k beyond n is capped.
    std::vector<float> small{1.0f, -3.0f, 2.0f};
    EXPECT_EQ(topk_indices(small.data(), small.size(), 10), (std::vector<uint32_t>{0, 1, 2}));
  });
}

// Error feedback's form: the residual gets the input added in the same
// pass, the selection is on that sum, and what was picked is no longer owed.
TEST(topk, selection_after_adding_updates_the_residual) {
  std::mt19937 rng(9);
  std::normal_distribution<float> g(0.0f, 1.0f);
  kernel_test::for_each_kernel_target([&] {
    for (std::size_t n : {1, 17, 40001}) {
      std::vector<float> residual(n), x(n);
      for (std::size_t i = 0; i < n; ++i) {
        residual[i] = g(rng);
        x[i] = g(rng);
      }
      std::vector<float> sum(n);
      for (std::size_t i = 0; i < n; ++i)
        sum[i] = residual[i] + x[i];
      auto k = n / 50 + 1;
      std::vector<uint32_t> picked(k);
      std::vector<float> values(k);
      ASSERT_EQ(topk_select_after_adding(residual.data(), x.data(), n, k, picked.data(), values.data()), k);
      ASSERT_EQ(picked, reference(sum, k)) << n;
      auto unsent = sum;
      for (std::size_t j = 0; j < k; ++j) {
        ASSERT_EQ(values[j], sum[picked[j]]) << n;
        unsent[picked[j]] = 0.0f;
      }
      ASSERT_EQ(residual, unsent) << n;
    }
  });
}
