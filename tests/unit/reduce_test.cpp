#include "reducers/reduce.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "config/error.hpp"

using namespace mccl;

namespace {

constexpr redop all_ops[] = {redop::sum, redop::prod, redop::min,  redop::max,
                             redop::avg, redop::band, redop::bor,  redop::bxor};
constexpr dtype all_types[] = {dtype::float32, dtype::float64, dtype::float16,
                               dtype::bfloat16, dtype::int8,   dtype::uint8,
                               dtype::int32,   dtype::int64,   dtype::boolean};
constexpr std::size_t sizes[] = {0, 1, 7, 1000, 65537};

// Reference semantics, written independently of the kernels: wide
// arithmetic truncated to the element width, NaN-propagating float min/max.
template <class T>
T ref_op(redop op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case redop::sum:
      case redop::avg: return a + b;
      case redop::prod: return a * b;
      case redop::min: return std::isnan(a) || std::isnan(b) ? (std::isnan(a) ? a : b)
                                                             : (b < a ? b : a);
      case redop::max: return std::isnan(a) || std::isnan(b) ? (std::isnan(a) ? a : b)
                                                             : (a < b ? b : a);
      default: ADD_FAILURE() << "no float reference for " << to_string(op); return a;
    }
  } else {
    using W = std::conditional_t<std::is_signed_v<T>, __int128, unsigned __int128>;
    auto wrap = [](W v) { return static_cast<T>(static_cast<uint64_t>(v)); };
    switch (op) {
      case redop::sum:
      case redop::avg: return wrap(W(a) + W(b));
      case redop::prod: return wrap(W(a) * W(b));
      case redop::min: return a < b ? a : b;
      case redop::max: return a < b ? b : a;
      case redop::band: return static_cast<T>(a & b);
      case redop::bor: return static_cast<T>(a | b);
      case redop::bxor: return static_cast<T>(a ^ b);
    }
    return a;
  }
}

uint8_t ref_bool(redop op, uint8_t a, uint8_t b) {
  bool x = a != 0;
  bool y = b != 0;
  switch (op) {
    case redop::sum:
    case redop::max:
    case redop::bor: return x || y;
    case redop::prod:
    case redop::min:
    case redop::band: return x && y;
    case redop::bxor: return x != y;
    case redop::avg: break;
  }
  ADD_FAILURE() << "no bool reference for " << to_string(op);
  return 0;
}

template <class T>
std::vector<T> random_values(std::size_t n, std::mt19937_64& rng, bool as_bool) {
  std::vector<T> v(n);
  for (auto& x : v) {
    if (as_bool) {
      // Non-canonical true bytes (2, 255) must read as true.
      static constexpr uint8_t picks[] = {0, 1, 0, 1, 2, 255};
      x = static_cast<T>(picks[rng() % 6]);
    } else if constexpr (std::is_floating_point_v<T>) {
      x = static_cast<T>(std::uniform_real_distribution<double>(-100.0, 100.0)(rng));
    } else {
      x = static_cast<T>(rng());
    }
  }
  return v;
}

template <class T>
bool same(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    return (std::isnan(a) && std::isnan(b)) || a == b;
  else
    return a == b;
}

template <class T>
T load(const unsigned char* p, std::size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

// Places values at byte `offset` inside an oversized buffer so that every
// alignment, including ones below alignof(T), gets exercised.
template <class T>
struct placed {
  std::vector<unsigned char> storage;
  unsigned char* at;
  placed(const std::vector<T>& v, std::size_t offset)
    : storage(v.size() * sizeof(T) + offset + 64) {
    at = storage.data() + offset;
    if (!v.empty())
      std::memcpy(at, v.data(), v.size() * sizeof(T));
  }
};

template <class T>
void check_pair(redop op, dtype t, std::size_t n, std::size_t off_a, std::size_t off_b,
                std::mt19937_64& rng) {
  bool as_bool = t == dtype::boolean;
  auto a = random_values<T>(n, rng, as_bool);
  auto b = random_values<T>(n, rng, as_bool);
  std::vector<T> expect(n);
  for (std::size_t i = 0; i < n; ++i)
    if constexpr (std::is_same_v<T, uint8_t>)
      expect[i] = as_bool ? ref_bool(op, a[i], b[i]) : ref_op<T>(op, a[i], b[i]);
    else
      expect[i] = ref_op<T>(op, a[i], b[i]);
  auto context = [&] {
    return std::string(to_string(op)) + "/" + to_string(t) + " n=" + std::to_string(n)
           + " offsets " + std::to_string(off_a) + "," + std::to_string(off_b);
  };

  // In place: dst = dst op src.
  placed<T> dst(a, off_a);
  placed<T> src(b, off_b);
  reduce(op, t, dst.at, src.at, n);
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_TRUE(same(load<T>(dst.at, i), expect[i])) << context() << " reduce at " << i;

  // Out of place into a third buffer, and aliased with either operand.
  placed<T> pa(a, off_a);
  placed<T> pb(b, off_b);
  placed<T> out(std::vector<T>(n), (off_a + off_b) % 8);
  reduce3(op, t, out.at, pa.at, pb.at, n);
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_TRUE(same(load<T>(out.at, i), expect[i])) << context() << " reduce3 at " << i;
  reduce3(op, t, pa.at, pa.at, pb.at, n);
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_TRUE(same(load<T>(pa.at, i), expect[i])) << context() << " reduce3 dst=a at " << i;
  placed<T> qa(a, off_a);
  reduce3(op, t, pb.at, qa.at, pb.at, n);
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_TRUE(same(load<T>(pb.at, i), expect[i])) << context() << " reduce3 dst=b at " << i;
}

template <class T>
void check_all_shapes(redop op, dtype t) {
  std::mt19937_64 rng(static_cast<uint64_t>(op) * 131 + static_cast<uint64_t>(t));
  const std::size_t offsets[][2] = {{0, 0}, {1, 3}, {sizeof(T), 0}, {5, sizeof(T) + 1}};
  for (std::size_t n : sizes)
    for (auto& o : offsets)
      check_pair<T>(op, t, n, o[0], o[1], rng);
}

void check_supported(redop op, dtype t) {
  switch (t) {
    case dtype::float32: return check_all_shapes<float>(op, t);
    case dtype::float64: return check_all_shapes<double>(op, t);
    case dtype::int8: return check_all_shapes<int8_t>(op, t);
    case dtype::uint8:
    case dtype::boolean: return check_all_shapes<uint8_t>(op, t);
    case dtype::int32: return check_all_shapes<int32_t>(op, t);
    case dtype::int64: return check_all_shapes<int64_t>(op, t);
    default: FAIL() << "not a supported dtype: " << to_string(t);
  }
}

bool is_float(dtype t) {
  return t == dtype::float32 || t == dtype::float64;
}

bool bitwise(redop op) {
  return op == redop::band || op == redop::bor || op == redop::bxor;
}

bool expected_supported(redop op, dtype t) {
  if (t == dtype::float16 || t == dtype::bfloat16)
    return false;
  if (bitwise(op) && is_float(t))
    return false;
  return !(op == redop::avg && t == dtype::boolean);
}

} // namespace

TEST(reduce, names) {
  EXPECT_STREQ(to_string(dtype::float32), "float32");
  EXPECT_STREQ(to_string(dtype::bfloat16), "bfloat16");
  EXPECT_STREQ(to_string(dtype::boolean), "bool");
  EXPECT_STREQ(to_string(redop::bxor), "bxor");
  EXPECT_STREQ(to_string(static_cast<redop>(99)), "unknown");
  EXPECT_EQ(dtype_size(dtype::float64), 8u);
  EXPECT_EQ(dtype_size(dtype::bfloat16), 2u);
  EXPECT_EQ(dtype_size(dtype::boolean), 1u);
  EXPECT_EQ(dtype_size(static_cast<dtype>(42)), 0u);
}

TEST(reduce, every_supported_pair_matches_scalar_reference) {
  int checked = 0;
  for (auto t : all_types)
    for (auto op : all_ops) {
      if (!expected_supported(op, t))
        continue;
      ASSERT_EQ(check_reduction(op, t), "") << to_string(op) << "/" << to_string(t);
      check_supported(op, t);
      ++checked;
      if (HasFatalFailure())
        return;
    }
  // 2 floats x 5 ops + 4 ints x 8 ops + bool x 7 ops.
  EXPECT_EQ(checked, 49);
}

TEST(reduce, unsupported_pairs_name_op_and_dtype) {
  for (auto t : all_types)
    for (auto op : all_ops) {
      if (expected_supported(op, t))
        continue;
      std::string msg = check_reduction(op, t);
      ASSERT_NE(msg, "") << to_string(op) << "/" << to_string(t);
      EXPECT_NE(msg.find(to_string(op)), std::string::npos) << msg;
      EXPECT_NE(msg.find(to_string(t)), std::string::npos) << msg;
      float x[2] = {1, 2};
      try {
        reduce(op, t, x, x + 1, 1);
        ADD_FAILURE() << "reduce accepted " << msg;
      } catch (const error& e) {
        errc want = (t == dtype::float16 || t == dtype::bfloat16) ? errc::unsupported
                                                                  : errc::invalid_argument;
        EXPECT_EQ(e.code(), want) << e.what();
        EXPECT_NE(e.message().find(to_string(t)), std::string::npos) << e.what();
      }
    }
  EXPECT_EQ(check_reduction(redop::band, dtype::float32),
            "reduction band is not defined for dtype float32 (bitwise ops need an integer or "
            "bool dtype)");
  EXPECT_NE(check_reduction(redop::sum, dtype::float16).find("not supported by this version"),
            std::string::npos);
  EXPECT_NE(check_reduction(static_cast<redop>(77), dtype::int32), "");
  EXPECT_NE(check_reduction(redop::sum, static_cast<dtype>(77)), "");
  EXPECT_THROW(reduce3(redop::sum, static_cast<dtype>(77), nullptr, nullptr, nullptr, 0), error);
}

TEST(reduce, null_buffers_only_with_zero_count) {
  reduce(redop::sum, dtype::float32, nullptr, nullptr, 0);
  float x = 1;
  EXPECT_THROW(reduce(redop::sum, dtype::float32, nullptr, &x, 1), error);
  EXPECT_THROW(reduce3(redop::sum, dtype::float32, &x, nullptr, &x, 1), error);
  EXPECT_THROW(finish_avg(dtype::float32, nullptr, 1, 2), error);
}

TEST(reduce, integer_sum_and_prod_wrap) {
  int32_t a32[] = {std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(),
                   65536};
  int32_t b32[] = {1, -1, 65536};
  reduce(redop::sum, dtype::int32, a32, b32, 2);
  EXPECT_EQ(a32[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(a32[1], std::numeric_limits<int32_t>::max());
  reduce(redop::prod, dtype::int32, a32 + 2, b32 + 2, 1);
  EXPECT_EQ(a32[2], 0);

  int64_t a64[] = {std::numeric_limits<int64_t>::max(), int64_t{1} << 32};
  int64_t b64[] = {1, int64_t{1} << 32};
  reduce(redop::sum, dtype::int64, a64, b64, 1);
  EXPECT_EQ(a64[0], std::numeric_limits<int64_t>::min());
  reduce(redop::prod, dtype::int64, a64 + 1, b64 + 1, 1);
  EXPECT_EQ(a64[1], 0);

  int8_t a8[] = {127, -128, 16};
  int8_t b8[] = {1, -1, 16};
  reduce(redop::sum, dtype::int8, a8, b8, 2);
  EXPECT_EQ(a8[0], -128);
  EXPECT_EQ(a8[1], 127);
  reduce(redop::prod, dtype::int8, a8 + 2, b8 + 2, 1);
  EXPECT_EQ(a8[2], 0);

  uint8_t u[] = {255, 200};
  uint8_t v[] = {1, 2};
  reduce(redop::sum, dtype::uint8, u, v, 1);
  EXPECT_EQ(u[0], 0);
  reduce(redop::prod, dtype::uint8, u + 1, v + 1, 1);
  EXPECT_EQ(u[1], 144);
}

TEST(reduce, float_min_max_propagate_nan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto op : {redop::min, redop::max}) {
    float dst[] = {nan, 1.0f, 2.0f};
    float src[] = {1.0f, nan, 3.0f};
    reduce(op, dtype::float32, dst, src, 3);
    EXPECT_TRUE(std::isnan(dst[0])) << to_string(op);
    EXPECT_TRUE(std::isnan(dst[1])) << to_string(op);
    EXPECT_EQ(dst[2], op == redop::min ? 2.0f : 3.0f);
  }
}

TEST(reduce, avg_over_world) {
  constexpr int world = 4;
  std::vector<float> acc(1000, 0.0f);
  std::vector<double> accd(1000, 0.0);
  std::vector<int32_t> acci(1000, 0);
  for (int r = 0; r < world; ++r) {
    std::vector<float> mine(acc.size());
    std::vector<double> mined(acc.size());
    std::vector<int32_t> minei(acc.size());
    for (std::size_t i = 0; i < mine.size(); ++i) {
      mine[i] = static_cast<float>(i) + static_cast<float>(r);
      mined[i] = static_cast<double>(i) * 0.5 + r;
      minei[i] = -static_cast<int32_t>(i) - r;
    }
    reduce(redop::avg, dtype::float32, acc.data(), mine.data(), acc.size());
    reduce(redop::avg, dtype::float64, accd.data(), mined.data(), accd.size());
    reduce(redop::avg, dtype::int32, acci.data(), minei.data(), acci.size());
  }
  finish_avg(dtype::float32, acc.data(), acc.size(), world);
  finish_avg(dtype::float64, accd.data(), accd.size(), world);
  finish_avg(dtype::int32, acci.data(), acci.size(), world);
  for (std::size_t i = 0; i < acc.size(); ++i) {
    EXPECT_FLOAT_EQ(acc[i], static_cast<float>(i) + 1.5f);
    EXPECT_DOUBLE_EQ(accd[i], static_cast<double>(i) * 0.5 + 1.5);
    // Sum is -(4i + 6); truncating division rounds toward zero.
    EXPECT_EQ(acci[i], -static_cast<int32_t>((4 * i + 6) / 4));
  }

  // Misaligned integer buffer goes through the bounce path.
  unsigned char raw[1 + 3 * sizeof(int64_t)];
  int64_t vals[] = {-7, 7, 9};
  std::memcpy(raw + 1, vals, sizeof(vals));
  finish_avg(dtype::int64, raw + 1, 3, 2);
  std::memcpy(vals, raw + 1, sizeof(vals));
  EXPECT_EQ(vals[0], -3);
  EXPECT_EQ(vals[1], 3);
  EXPECT_EQ(vals[2], 4);

  uint8_t u[] = {255, 3};
  finish_avg(dtype::uint8, u, 1, 300);
  EXPECT_EQ(u[0], 0);
  finish_avg(dtype::uint8, u + 1, 1, 1);
  EXPECT_EQ(u[1], 3);

  EXPECT_THROW(finish_avg(dtype::float32, acc.data(), 1, 0), error);
  EXPECT_THROW(finish_avg(dtype::boolean, u, 1, 2), error);
  EXPECT_THROW(finish_avg(dtype::float16, u, 1, 2), error);
}

TEST(reduce, same_buffer_as_both_operands) {
  std::vector<int32_t> v(100);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<int32_t>(i);
  reduce3(redop::sum, dtype::int32, v.data(), v.data(), v.data(), v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(v[i], static_cast<int32_t>(2 * i));
}
