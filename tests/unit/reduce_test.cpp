#include "reducers/reduce.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <mccl/error.hpp>
#include "reducers/half.hpp"
#include "reducers/reduce_kernels.hpp"
#include "kernel_targets.hpp"

using namespace mccl;

namespace {

constexpr redop all_ops[] = {redop::sum, redop::prod, redop::min,  redop::max,
                             redop::avg, redop::band, redop::bor,  redop::bxor};
constexpr dtype all_types[] = {dtype::float32, dtype::float64, dtype::float16,
                               dtype::bfloat16, dtype::int8,   dtype::uint8,
                               dtype::int32,   dtype::int64,   dtype::boolean,
                               dtype::int16,   dtype::uint16,  dtype::uint32,
                               dtype::uint64};
constexpr std::size_t sizes[] = {0, 1, 3, 17, 64, 1000, 4099};


// -- independent float16/bfloat16 reference ------------------------------------
// Written from the definitions with double arithmetic, not bit tricks, so it
// shares nothing with reducers/half.hpp or the vector code.

struct fmt16 {
  int man_bits;  // stored mantissa bits
  int bias;
  int emin() const { return 1 - bias; }
  int emax() const { return bias; }
};
constexpr fmt16 f16_fmt{10, 15};
constexpr fmt16 bf16_fmt{7, 127};

double ref_decode(fmt16 f, uint16_t h) {
  const bool neg = (h & 0x8000) != 0;
  const int exp = (h & 0x7FFF) >> f.man_bits;
  const int man = h & ((1 << f.man_bits) - 1);
  const int exp_all_ones = (1 << (15 - f.man_bits)) - 1;
  double v;
  if (exp == exp_all_ones)
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exp == 0)
    v = std::ldexp(man, f.emin() - f.man_bits);
  else
    v = std::ldexp(man + (1 << f.man_bits), exp - f.bias - f.man_bits);
  return neg ? -v : v;
}

// Correctly rounded (to nearest, ties to even) double -> 16-bit format. NaN
// gives the canonical quiet NaN; callers compare NaNs by class only.
uint16_t ref_round(fmt16 f, double x) {
  const int exp_all_ones = (1 << (15 - f.man_bits)) - 1;
  const uint16_t inf = static_cast<uint16_t>(exp_all_ones << f.man_bits);
  if (std::isnan(x))
    return static_cast<uint16_t>(inf | (1 << (f.man_bits - 1)));
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  if (std::isinf(a))
    return sign | inf;
  if (a == 0)
    return sign;
  // Scale so that one unit in the last place of the result is 1, round to an
  // integer (nearbyint: ties to even in the default mode), scale back.
  const int e = std::max(std::ilogb(a), f.emin());
  const double quantum = std::ldexp(1.0, e - f.man_bits);
  const double v = std::nearbyint(a / quantum) * quantum;
  if (v >= std::ldexp(1.0, f.emax() + 1))
    return sign | inf;
  if (v == 0)
    return sign;
  const int ev = std::ilogb(v);
  if (ev < f.emin())  // subnormal
    return static_cast<uint16_t>(sign
                                 | static_cast<int>(v / std::ldexp(1.0, f.emin() - f.man_bits)));
  const int man = static_cast<int>(v / std::ldexp(1.0, ev - f.man_bits)) - (1 << f.man_bits);
  return static_cast<uint16_t>(sign | ((ev + f.bias) << f.man_bits) | man);
}

bool is_nan16(fmt16 f, uint16_t h) {
  const int exp_all_ones = (1 << (15 - f.man_bits)) - 1;
  return ((h & 0x7FFF) >> f.man_bits) == exp_all_ones && (h & ((1 << f.man_bits) - 1)) != 0;
}

bool is_quiet_nan16(fmt16 f, uint16_t h) {
  return is_nan16(f, h) && (h & (1 << (f.man_bits - 1))) != 0;
}

float as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// The documented semantics: float16 ops are correctly rounded (computed
// exactly in double here: sums and products of two halves fit), bfloat16 ops
// are computed in float32 and then rounded.
uint16_t ref_op16(dtype t, redop op, uint16_t a, uint16_t b) {
  const fmt16 f = t == dtype::float16 ? f16_fmt : bf16_fmt;
  const double x = ref_decode(f, a);
  const double y = ref_decode(f, b);
  double r = 0;
  switch (op) {
    case redop::sum:
    case redop::avg: r = x + y; break;
    case redop::prod: r = x * y; break;
    case redop::min: r = std::isnan(x) || std::isnan(y) ? NAN : (y < x ? y : x); break;
    case redop::max: r = std::isnan(x) || std::isnan(y) ? NAN : (x < y ? y : x); break;
    default: ADD_FAILURE() << "no 16-bit reference for " << to_string(op);
  }
  if (t == dtype::bfloat16 && (op == redop::sum || op == redop::avg || op == redop::prod)) {
    const float xf = static_cast<float>(x);
    const float yf = static_cast<float>(y);
    r = op == redop::prod ? xf * yf : xf + yf;
  }
  return ref_round(f, r);
}

// -- reference for the other dtypes ---------------------------------------------

// Wide arithmetic truncated to the element width, NaN-propagating float min/max.
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

// Element storage per dtype: 16-bit floats travel as their bit patterns.
template <class T>
std::vector<T> random_values(dtype t, std::size_t n, std::mt19937_64& rng) {
  std::vector<T> v(n);
  for (auto& x : v) {
    if (t == dtype::boolean) {
      // Non-canonical true bytes (2, 255) must read as true.
      static constexpr uint8_t picks[] = {0, 1, 0, 1, 2, 255};
      x = static_cast<T>(picks[rng() % 6]);
    } else if (t == dtype::float16 || t == dtype::bfloat16) {
      // Half arbitrary bit patterns (subnormals, inf, NaN, huge values whose
      // sums and products overflow or underflow), half ordinary values.
      const fmt16 f = t == dtype::float16 ? f16_fmt : bf16_fmt;
      if (rng() % 2)
        x = static_cast<T>(rng());
      else
        x = static_cast<T>(ref_round(f, std::uniform_real_distribution<double>(-100, 100)(rng)));
    } else if constexpr (std::is_floating_point_v<T>) {
      x = static_cast<T>(std::uniform_real_distribution<double>(-100.0, 100.0)(rng));
      if (rng() % 64 == 0)
        x = std::numeric_limits<T>::quiet_NaN();
    } else {
      x = static_cast<T>(rng());
    }
  }
  return v;
}

template <class T>
T expected(dtype t, redop op, T a, T b) {
  if constexpr (std::is_same_v<T, uint16_t>)
    return t == dtype::uint16 ? ref_op<T>(op, a, b) : ref_op16(t, op, a, b);
  else if constexpr (std::is_same_v<T, uint8_t>)
    return t == dtype::boolean ? ref_bool(op, a, b) : ref_op<T>(op, a, b);
  else
    return ref_op<T>(op, a, b);
}

// Exact match, except that a NaN matches a NaN; 16-bit NaN results must also
// be quiet.
template <class T>
::testing::AssertionResult same(dtype t, T got, T want) {
  bool ok;
  if (t == dtype::uint16) {
    ok = got == want;
  } else if constexpr (std::is_same_v<T, uint16_t>) {
    const fmt16 f = t == dtype::float16 ? f16_fmt : bf16_fmt;
    ok = is_nan16(f, want) ? is_quiet_nan16(f, got) : got == want;
  } else if constexpr (std::is_floating_point_v<T>) {
    ok = (std::isnan(got) && std::isnan(want)) || got == want;
  } else {
    ok = got == want;
  }
  if (ok)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << +got << ", want " << +want;
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
  auto a = random_values<T>(t, n, rng);
  auto b = random_values<T>(t, n, rng);
  std::vector<T> want(n);
  for (std::size_t i = 0; i < n; ++i)
    want[i] = expected<T>(t, op, a[i], b[i]);
  auto context = [&] {
    return std::string(to_string(op)) + "/" + to_string(t) + " n=" + std::to_string(n)
           + " offsets " + std::to_string(off_a) + "," + std::to_string(off_b);
  };

  // In place: dst = dst op src.
  placed<T> dst(a, off_a);
  placed<T> src(b, off_b);
  reduce(op, t, dst.at, src.at, n);
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_TRUE(same(t, load<T>(dst.at, i), want[i]))
        << context() << " reduce at " << i << " of " << +a[i] << ", " << +b[i];
  // The bytes after the last element are untouched (the tail is staged).
  for (std::size_t i = n * sizeof(T); i < n * sizeof(T) + 64; ++i)
    ASSERT_EQ(dst.at[i], 0) << context() << " wrote past the end";

  // Out of place into a third buffer, and aliased with either operand.
  placed<T> pa(a, off_a);
  placed<T> pb(b, off_b);
  placed<T> out(std::vector<T>(n), (off_a + off_b) % 8);
  reduce3(op, t, out.at, pa.at, pb.at, n);
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_TRUE(same(t, load<T>(out.at, i), want[i])) << context() << " reduce3 at " << i;
  reduce3(op, t, pa.at, pa.at, pb.at, n);
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_TRUE(same(t, load<T>(pa.at, i), want[i])) << context() << " reduce3 dst=a at " << i;
  placed<T> qa(a, off_a);
  reduce3(op, t, pb.at, qa.at, pb.at, n);
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_TRUE(same(t, load<T>(pb.at, i), want[i])) << context() << " reduce3 dst=b at " << i;
}

template <class T>
void check_all_shapes(redop op, dtype t) {
  std::mt19937_64 rng(static_cast<uint64_t>(op) * 131 + static_cast<uint64_t>(t));
  const std::size_t offsets[][2] = {{0, 0}, {1, 1}, {1, 3}, {sizeof(T), 0}, {5, sizeof(T) + 1}};
  for (std::size_t n : sizes)
    for (auto& o : offsets) {
      check_pair<T>(op, t, n, o[0], o[1], rng);
      if (::testing::Test::HasFatalFailure())
        return;
    }
}

void check_supported(redop op, dtype t) {
  switch (t) {
    case dtype::float32: return check_all_shapes<float>(op, t);
    case dtype::float64: return check_all_shapes<double>(op, t);
    case dtype::float16:
    case dtype::bfloat16: return check_all_shapes<uint16_t>(op, t);
    case dtype::int8: return check_all_shapes<int8_t>(op, t);
    case dtype::uint8:
    case dtype::boolean: return check_all_shapes<uint8_t>(op, t);
    case dtype::int32: return check_all_shapes<int32_t>(op, t);
    case dtype::int64: return check_all_shapes<int64_t>(op, t);
    case dtype::int16: return check_all_shapes<int16_t>(op, t);
    case dtype::uint16: return check_all_shapes<uint16_t>(op, t);
    case dtype::uint32: return check_all_shapes<uint32_t>(op, t);
    case dtype::uint64: return check_all_shapes<uint64_t>(op, t);
  }
  FAIL() << "not a dtype: " << static_cast<int>(t);
}

bool is_float(dtype t) {
  return t == dtype::float32 || t == dtype::float64 || t == dtype::float16
         || t == dtype::bfloat16;
}

bool bitwise(redop op) {
  return op == redop::band || op == redop::bor || op == redop::bxor;
}

bool expected_supported(redop op, dtype t) {
  if (bitwise(op) && is_float(t))
    return false;
  return !(op == redop::avg && t == dtype::boolean);
}

// dst = a op b on one element pair of a 16-bit float dtype, through reduce().
uint16_t reduce16(redop op, dtype t, uint16_t a, uint16_t b) {
  reduce(op, t, &a, &b, 1);
  return a;
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
  EXPECT_STREQ(to_string(dtype::int16), "int16");
  EXPECT_STREQ(to_string(dtype::uint16), "uint16");
  EXPECT_STREQ(to_string(dtype::uint32), "uint32");
  EXPECT_STREQ(to_string(dtype::uint64), "uint64");
  EXPECT_EQ(dtype_size(dtype::int16), 2u);
  EXPECT_EQ(dtype_size(dtype::uint16), 2u);
  EXPECT_EQ(dtype_size(dtype::uint32), 4u);
  EXPECT_EQ(dtype_size(dtype::uint64), 8u);
  // Values travel on the wire and through the C API: appended, never renumbered.
  EXPECT_EQ(static_cast<int>(dtype::boolean), 8);
  EXPECT_EQ(static_cast<int>(dtype::int16), 9);
  EXPECT_EQ(static_cast<int>(dtype::uint64), 12);
}

TEST(reduce, every_supported_pair_matches_scalar_reference) {
  kernel_test::for_each_kernel_target([] {
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
    // 4 floats x 5 ops + 8 ints x 8 ops + bool x 7 ops.
    EXPECT_EQ(checked, 91);
  });
}

TEST(reduce, unsupported_pairs_name_op_and_dtype) {
  int refused = 0;
  for (auto t : all_types)
    for (auto op : all_ops) {
      if (expected_supported(op, t))
        continue;
      ++refused;
      std::string msg = check_reduction(op, t);
      ASSERT_NE(msg, "") << to_string(op) << "/" << to_string(t);
      EXPECT_NE(msg.find(to_string(op)), std::string::npos) << msg;
      EXPECT_NE(msg.find(to_string(t)), std::string::npos) << msg;
      float x[2] = {1, 2};
      try {
        reduce(op, t, x, x + 1, 1);
        ADD_FAILURE() << "reduce accepted " << msg;
      } catch (const error& e) {
        EXPECT_EQ(e.code(), errc::invalid_argument) << e.what();
        EXPECT_NE(e.message().find(to_string(t)), std::string::npos) << e.what();
        EXPECT_NE(e.message().find(to_string(op)), std::string::npos) << e.what();
      }
    }
  // Bitwise ops on the 4 float dtypes, and avg on bool.
  EXPECT_EQ(refused, 13);
  EXPECT_EQ(check_reduction(redop::band, dtype::float32),
            "reduction band is not defined for dtype float32 (bitwise ops need an integer or "
            "bool dtype)");
  EXPECT_EQ(check_reduction(redop::bxor, dtype::bfloat16),
            "reduction bxor is not defined for dtype bfloat16 (bitwise ops need an integer or "
            "bool dtype)");
  EXPECT_EQ(check_reduction(redop::sum, dtype::float16), "");
  EXPECT_EQ(check_reduction(redop::avg, dtype::bfloat16), "");
  EXPECT_NE(check_reduction(redop::avg, dtype::boolean).find("avg"), std::string::npos);
  EXPECT_NE(check_reduction(redop::avg, dtype::boolean).find("bool"), std::string::npos);
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
  kernel_test::for_each_kernel_target([] {
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
  });
}

TEST(reduce, float_min_max_propagate_nan) {
  kernel_test::for_each_kernel_target([] {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const double dnan = std::numeric_limits<double>::quiet_NaN();
    for (auto op : {redop::min, redop::max}) {
      // Long enough for full vectors; NaN on either side, and on both.
      std::vector<float> dst(40, 2.0f), src(40, 3.0f);
      std::vector<double> dstd(40, 2.0), srcd(40, 3.0);
      dst[0] = nan, src[1] = nan, dst[33] = nan, src[33] = nan, src[39] = nan;
      dstd[0] = dnan, srcd[1] = dnan, srcd[39] = dnan;
      reduce(op, dtype::float32, dst.data(), src.data(), dst.size());
      reduce(op, dtype::float64, dstd.data(), srcd.data(), dstd.size());
      for (std::size_t i : {0, 1, 33, 39})
        EXPECT_TRUE(std::isnan(dst[i])) << to_string(op) << " float32 at " << i;
      for (std::size_t i : {0, 1, 39})
        EXPECT_TRUE(std::isnan(dstd[i])) << to_string(op) << " float64 at " << i;
      EXPECT_EQ(dst[2], op == redop::min ? 2.0f : 3.0f);
      EXPECT_EQ(dstd[2], op == redop::min ? 2.0 : 3.0);

      // 16-bit floats: NaN in either operand wins and comes out quiet,
      // including a signalling NaN input.
      for (auto t : {dtype::float16, dtype::bfloat16}) {
        const fmt16 f = t == dtype::float16 ? f16_fmt : bf16_fmt;
        const uint16_t one = ref_round(f, 1.0);
        const uint16_t qnan = t == dtype::float16 ? 0x7E00 : 0x7FC0;
        const uint16_t snan = t == dtype::float16 ? 0x7D00 : 0x7F81;
        for (uint16_t n : {qnan, snan, static_cast<uint16_t>(qnan | 0x8000)}) {
          EXPECT_TRUE(is_quiet_nan16(f, reduce16(op, t, n, one))) << to_string(t);
          EXPECT_TRUE(is_quiet_nan16(f, reduce16(op, t, one, n))) << to_string(t);
        }
        const uint16_t two = ref_round(f, 2.0);
        EXPECT_EQ(reduce16(op, t, one, two), op == redop::min ? one : two) << to_string(t);
        const uint16_t inf = t == dtype::float16 ? 0x7C00 : 0x7F80;
        EXPECT_EQ(reduce16(op, t, inf, one), op == redop::min ? one : inf) << to_string(t);
      }
    }
  });
}

TEST(reduce, bfloat16_rounds_to_nearest_even) {
  // Scalar conversion: truncation would give 0x3F80 for all of these.
  EXPECT_EQ(float_to_bf16(as_float(0x3F808001)), 0x3F81);  // just above the tie: up
  EXPECT_EQ(float_to_bf16(as_float(0x3F808000)), 0x3F80);  // tie, even below: stays
  EXPECT_EQ(float_to_bf16(as_float(0x3F818000)), 0x3F82);  // tie, odd below: up to even
  EXPECT_EQ(float_to_bf16(as_float(0x3F807FFF)), 0x3F80);  // just below the tie: down
  EXPECT_EQ(float_to_bf16(as_float(0x7F7FFFFF)), 0x7F80);  // float max rounds to inf
  EXPECT_EQ(float_to_bf16(as_float(0xFF7FFFFF)), 0xFF80);
  EXPECT_EQ(float_to_bf16(as_float(0x7F800000)), 0x7F80);
  EXPECT_EQ(float_to_bf16(as_float(0x7FFFFFFF)) & 0x7FC0, 0x7FC0);  // NaN stays NaN, not inf
  EXPECT_EQ(float_to_bf16(as_float(0x7F800001)), 0x7FC0);           // signalling -> quiet
  EXPECT_EQ(float_to_bf16(as_float(0x00018000)), 0x0002);           // subnormal tie to even
  EXPECT_EQ(bf16_to_float(0x3F81), as_float(0x3F810000));

  kernel_test::for_each_kernel_target([] {
    const auto t = dtype::bfloat16;
    // 1 + 2^-8 + 2^-15: above the tie, so up (truncation gives 0x3F80).
    EXPECT_EQ(reduce16(redop::sum, t, 0x3F80, 0x3B81), 0x3F81);
    // 1 + 2^-8: exact tie, 0x3F80 is even.
    EXPECT_EQ(reduce16(redop::sum, t, 0x3F80, 0x3B80), 0x3F80);
    // (1 + 2^-7) + 2^-8: tie, 0x3F81 is odd, so up to 0x3F82.
    EXPECT_EQ(reduce16(redop::sum, t, 0x3F81, 0x3B80), 0x3F82);
    // Products: 1.0078125^2 = 1.01568603..., between 0x3F82 and 0x3F83, nearer 0x3F82.
    EXPECT_EQ(reduce16(redop::prod, t, 0x3F81, 0x3F81), 0x3F82);
    // Overflow: max * 2 is inf.
    EXPECT_EQ(reduce16(redop::prod, t, 0x7F7F, 0x4000), 0x7F80);
    EXPECT_EQ(reduce16(redop::sum, t, 0xFF7F, 0xFF7F), 0xFF80);
    // inf + -inf is a (quiet) NaN.
    EXPECT_TRUE(is_quiet_nan16(bf16_fmt, reduce16(redop::sum, t, 0x7F80, 0xFF80)));
  });
}

TEST(reduce, float16_rounding_overflow_subnormals) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_f16(65519.996f), 0x7BFF);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7C00);
  EXPECT_EQ(float_to_f16(-1e9f), 0xFC00);
  EXPECT_EQ(float_to_f16(0x1p-24f), 0x0001);
  EXPECT_EQ(float_to_f16(0x1p-25f), 0x0000);         // tie between 0 and 2^-24: even
  EXPECT_EQ(float_to_f16(0x1.000002p-25f), 0x0001);  // just above the tie
  EXPECT_EQ(float_to_f16(0x3p-25f), 0x0002);         // 1.5 * 2^-24: tie, up to even
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_f16(as_float(0x7F800001)), 0x7E00);  // signalling NaN -> quiet
  EXPECT_EQ(float_to_f16(as_float(0xFFC00000)), 0xFE00);
  EXPECT_EQ(f16_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(f16_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(bits_of(f16_to_float(0x7D00)), 0x7FE00000u);  // signalling NaN -> quiet

  kernel_test::for_each_kernel_target([] {
    const auto t = dtype::float16;
    // Ties to even: 1 + 2^-11 stays at 1.0; (1 + 2^-10) + 2^-11 goes up to 1 + 2^-9.
    EXPECT_EQ(reduce16(redop::sum, t, 0x3C00, 0x1000), 0x3C00);
    EXPECT_EQ(reduce16(redop::sum, t, 0x3C01, 0x1000), 0x3C02);
    EXPECT_EQ(reduce16(redop::sum, t, 0x3C00, 0x1001), 0x3C01);  // above the tie
    // Overflow: 65504 + 8 = 65512 rounds back to 65504; + 16 = 65520 is the
    // tie with odd 65504 below, so inf; 65504 + 65504 is inf.
    EXPECT_EQ(reduce16(redop::sum, t, 0x7BFF, 0x4800), 0x7BFF);
    EXPECT_EQ(reduce16(redop::sum, t, 0x7BFF, 0x4C00), 0x7C00);
    EXPECT_EQ(reduce16(redop::sum, t, 0x7BFF, 0x7BFF), 0x7C00);
    EXPECT_EQ(reduce16(redop::prod, t, 0xFBFF, 0x4000), 0xFC00);
    // Subnormals: 2^-24 + 2^-24; the largest subnormal + 2^-24 is the
    // smallest normal; 2^-24 * 0.5 is the tie with 0; 3 * 2^-24 * 0.5 ties to 2.
    EXPECT_EQ(reduce16(redop::sum, t, 0x0001, 0x0001), 0x0002);
    EXPECT_EQ(reduce16(redop::sum, t, 0x03FF, 0x0001), 0x0400);
    EXPECT_EQ(reduce16(redop::prod, t, 0x0001, 0x3800), 0x0000);
    EXPECT_EQ(reduce16(redop::prod, t, 0x0003, 0x3800), 0x0002);
    EXPECT_EQ(reduce16(redop::prod, t, 0x8001, 0x3A00), 0x8001);  // -2^-24 * 0.75
    EXPECT_EQ(reduce16(redop::min, t, 0x8001, 0x0001), 0x8001);
    // inf arithmetic and NaN.
    EXPECT_EQ(reduce16(redop::sum, t, 0x7C00, 0x3C00), 0x7C00);
    EXPECT_TRUE(is_quiet_nan16(f16_fmt, reduce16(redop::sum, t, 0x7C00, 0xFC00)));
    EXPECT_TRUE(is_quiet_nan16(f16_fmt, reduce16(redop::prod, t, 0x7D00, 0x3C00)));
  });
}

// half.hpp against the independent reference: every 16-bit pattern, and the
// float32 values around every rounding boundary.
TEST(reduce, half_conversions_match_reference) {
  for (const fmt16 f : {f16_fmt, bf16_fmt}) {
    const bool is_f16 = f.man_bits == 10;
    auto widen = [&](uint16_t h) { return is_f16 ? f16_to_float(h) : bf16_to_float(h); };
    auto narrow = [&](float x) { return is_f16 ? float_to_f16(x) : float_to_bf16(x); };
    for (uint32_t h = 0; h <= 0xFFFF; ++h) {
      const auto h16 = static_cast<uint16_t>(h);
      const double want = ref_decode(f, h16);
      const float got = widen(h16);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << std::hex << h;
        ASSERT_EQ(narrow(got) & 0x7FFF, (h | (1u << (f.man_bits - 1))) & 0x7FFF) << std::hex << h;
        continue;
      }
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << h;
      ASSERT_EQ(narrow(got), h16) << std::hex << h;
      // Just below, at and just above the midpoint to the next pattern up
      // (in magnitude), as float32 bit patterns.
      const double next = ref_decode(f, static_cast<uint16_t>(h16 + 1));
      if ((h & 0x7FFF) == 0x7FFF || std::isnan(next) || std::isinf(next) || std::isinf(want))
        continue;
      const float mid = static_cast<float>((want + next) / 2);  // exact: fits float32
      ASSERT_EQ(static_cast<double>(mid), (want + next) / 2);
      for (uint32_t m : {bits_of(mid) - 1, bits_of(mid), bits_of(mid) + 1}) {
        const float x = as_float(m);
        ASSERT_EQ(narrow(x), ref_round(f, x)) << std::hex << m;
      }
    }
    std::mt19937 rng(7);
    for (int i = 0; i < 1000000; ++i) {
      const float x = as_float(static_cast<uint32_t>(rng()));
      if (std::isnan(x))
        continue;
      ASSERT_EQ(narrow(x), ref_round(f, x)) << std::hex << bits_of(x);
    }
  }
}

TEST(reduce, avg_over_world) {
  kernel_test::for_each_kernel_target([] {
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

    int16_t s16[] = {-7, 7};
    finish_avg(dtype::int16, s16, 2, 2);
    EXPECT_EQ(s16[0], -3);
    EXPECT_EQ(s16[1], 3);
    uint16_t u16[] = {65535};
    finish_avg(dtype::uint16, u16, 1, 2);
    EXPECT_EQ(u16[0], 32767);
    uint32_t u32[] = {4294967295u};
    finish_avg(dtype::uint32, u32, 1, 3);
    EXPECT_EQ(u32[0], 1431655765u);
    uint64_t u64[] = {18446744073709551615ull};  // above int64's range: no signed detour
    finish_avg(dtype::uint64, u64, 1, 5);
    EXPECT_EQ(u64[0], 3689348814741910323ull);

    float f = 1;
    EXPECT_THROW(finish_avg(dtype::float32, &f, 1, 0), error);
    EXPECT_THROW(finish_avg(dtype::boolean, u, 1, 2), error);
  });
}

// float16/bfloat16 means divide in float32 and round once to nearest even:
// compare every element with the reference at several worlds and offsets.
TEST(reduce, avg_16bit_floats_round_to_nearest_even) {
  kernel_test::for_each_kernel_target([] {
    std::mt19937_64 rng(11);
    for (auto t : {dtype::float16, dtype::bfloat16}) {
      const fmt16 f = t == dtype::float16 ? f16_fmt : bf16_fmt;
      for (int world : {1, 2, 3, 7, 1000})
        for (std::size_t off : {0, 1})
          for (std::size_t n : {1, 17, 1000}) {
            auto v = random_values<uint16_t>(t, n, rng);
            placed<uint16_t> buf(v, off);
            finish_avg(t, buf.at, n, world);
            for (std::size_t i = 0; i < n; ++i) {
              const double x = ref_decode(f, v[i]);
              const double q = t == dtype::float16
                                   ? x / world  // correctly rounded; see ref_op16
                                   : static_cast<double>(static_cast<float>(x) / world);
              ASSERT_TRUE(same(t, load<uint16_t>(buf.at, i), ref_round(f, q)))
                  << to_string(t) << " world " << world << " of " << v[i];
            }
          }
      // Halving only moves the exponent; halving 3 * 2^-24 gives a tie
      // between subnormals 1 and 2, which goes to the even 2.
      uint16_t h = 0x3C03;
      finish_avg(dtype::float16, &h, 1, 2);
      EXPECT_EQ(h, 0x3803);
      h = 0x0003;
      finish_avg(dtype::float16, &h, 1, 2);
      EXPECT_EQ(h, 0x0002);
    }
  });
}

TEST(reduce, reduce3_aliasing) {
  kernel_test::for_each_kernel_target([] {
    std::vector<int32_t> v(100);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<int32_t>(i);
    reduce3(redop::sum, dtype::int32, v.data(), v.data(), v.data(), v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      EXPECT_EQ(v[i], static_cast<int32_t>(2 * i));

    // Output over either operand of a 16-bit float sum (values small enough
    // to be exact, so the expected bits are known).
    std::vector<uint16_t> a(70), b(70);
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] = float_to_bf16(static_cast<float>(i));
      b[i] = float_to_bf16(0.5f * static_cast<float>(i) + 1.0f);
    }
    auto a2 = a;
    auto b2 = b;
    reduce3(redop::sum, dtype::bfloat16, a2.data(), a2.data(), b.data(), a.size());
    reduce3(redop::sum, dtype::bfloat16, b2.data(), a.data(), b2.data(), a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      const uint16_t want = float_to_bf16(1.5f * static_cast<float>(i) + 1.0f);
      EXPECT_EQ(a2[i], want) << i;
      EXPECT_EQ(b2[i], want) << i;
    }
  });
}

namespace {

/// Element i of two arrays of `t` holds the same value: the same bytes, or
/// NaN in both (which NaN an operation returns when both its operands are
/// NaN is the compiler's choice of operand order: IEEE 754 leaves it open).
bool same_element(dtype t, const uint8_t* a, const uint8_t* b, std::size_t i) {
  auto size = dtype_size(t);
  if (std::memcmp(a + i * size, b + i * size, size) == 0)
    return true;
  switch (t) {
    case dtype::float32: return std::isnan(load<float>(a, i)) && std::isnan(load<float>(b, i));
    case dtype::float64: return std::isnan(load<double>(a, i)) && std::isnan(load<double>(b, i));
    case dtype::float16: return is_nan16(f16_fmt, load<uint16_t>(a, i)) && is_nan16(f16_fmt, load<uint16_t>(b, i));
    case dtype::bfloat16:
      return is_nan16(bf16_fmt, load<uint16_t>(a, i)) && is_nan16(bf16_fmt, load<uint16_t>(b, i));
    default: return false;
  }
}

} // namespace

TEST(reduce, reduce_many_gives_the_bits_of_one_reduce_per_source) {
  // Random bytes of every dtype (floats: any bit pattern, NaN and inf
  // included) from k sources, folded by reduce_many and by a copy plus one
  // reduce() per further source: the same bytes, NaN's payload aside.
  kernel_test::for_each_kernel_target([] {
    std::mt19937_64 rng(7);
    int checked = 0;
    for (auto t : all_types)
      for (auto op : all_ops) {
        if (!expected_supported(op, t))
          continue;
        for (std::size_t k : {1, 2, 3, 5, 33})
          for (std::size_t n : {1, 7, 70, 1000}) {
            auto bytes = n * dtype_size(t);
            std::vector<std::vector<uint8_t>> src(k, std::vector<uint8_t>(bytes + 1));
            std::vector<const void*> at;
            for (auto& v : src) {
              for (auto& b : v)
                b = static_cast<uint8_t>(rng());
              at.push_back(v.data() + 1); // misaligned, as a chunk may be
            }
            std::vector<uint8_t> want(bytes), got(bytes);
            std::memcpy(want.data(), at[0], bytes);
            for (std::size_t i = 1; i < k; ++i)
              reduce(op, t, want.data(), at[i], n);
            reduce_many(op, t, got.data(), at.data(), k, n);
            for (std::size_t i = 0; i < n; ++i)
              ASSERT_TRUE(same_element(t, got.data(), want.data(), i))
                << to_string(op) << "/" << to_string(t) << " k=" << k << " n=" << n << " at " << i;
            if (k >= 2) { // into the first source, as in place
              auto* first = static_cast<uint8_t*>(const_cast<void*>(at[0]));
              reduce_many(op, t, first, at.data(), k, n);
              for (std::size_t i = 0; i < n; ++i)
                ASSERT_TRUE(same_element(t, first, want.data(), i)) << to_string(op) << "/" << to_string(t) << " in place";
            }
            ++checked;
          }
      }
    EXPECT_EQ(checked, 91 * 5 * 4);
  });
}

TEST(reduce, reduce_many_names_what_is_wrong) {
  float a = 1, b = 2, out = 0;
  const void* two[] = {&a, &b};
  const void* with_null[] = {&a, nullptr};
  EXPECT_THROW(reduce_many(redop::sum, dtype::float32, &out, two, 0, 1), error);
  try {
    reduce_many(redop::sum, dtype::float32, &out, with_null, 2, 1);
    ADD_FAILURE() << "a null source with n = 1 is an error";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("reduce_many: null buffer"), std::string::npos) << e.what();
  }
  try {
    reduce_many(redop::band, dtype::float32, &out, two, 2, 1);
    ADD_FAILURE() << "band on float32 is not a reduction";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("reduce_many"), std::string::npos) << e.what();
  }
  reduce_many(redop::sum, dtype::float32, &out, two, 2, 1);
  EXPECT_EQ(out, 3.0f);
}

// ---- float32 payloads as 16-bit floats (compression on the wire) --------------

namespace {

/// Every float32 class the wire must carry: values around each float16 and
/// bfloat16 rounding boundary, subnormals, overflow, inf, NaN, random bits.
std::vector<float> wire_samples() {
  std::vector<float> v{0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, -65520.0f,
                       0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-14f, 3.0e38f,
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::quiet_NaN()};
  for (uint32_t h = 0; h <= 0xFFFF; h += 7) {
    auto mid = bits_of(f16_to_float(static_cast<uint16_t>(h))) + 0x1000;  // f16 halfway
    v.push_back(as_float(mid));
    v.push_back(as_float(bits_of(bf16_to_float(static_cast<uint16_t>(h))) + 0x8000));  // bf16
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 5000; ++i)
    v.push_back(as_float(static_cast<uint32_t>(rng())));
  return v;
}

uint16_t narrow_one(dtype wire, float x) {
  return wire == dtype::float16 ? float_to_f16(x) : float_to_bf16(x);
}

float widen_one(dtype wire, uint16_t h) {
  return wire == dtype::float16 ? f16_to_float(h) : bf16_to_float(h);
}

bool same_float(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || bits_of(a) == bits_of(b);
}

} // namespace

// narrow_for_wire writes what the scalar conversions give (nearest even) and
// leaves the sender holding exactly the value it sent; widen_from_wire and
// reduce_from_wire read it back and combine in float32. Every length up to a
// few vectors, at an odd offset, for every instruction set.
TEST(reduce, wire_narrow_widen_match_scalar_conversions) {
  const auto samples = wire_samples();
  kernel_test::for_each_kernel_target([&] {
    for (dtype wire : {dtype::float16, dtype::bfloat16}) {
      SCOPED_TRACE(to_string(wire));
      for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{33}, samples.size()}) {
        std::vector<float> values(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(n));
        std::vector<uint16_t> wire_bits(n + 1, 0xDEAD);
        narrow_for_wire(wire, wire_bits.data() + 1, values.data(), n);
        ASSERT_EQ(wire_bits[0], 0xDEAD) << "wrote before the buffer";
        for (std::size_t i = 0; i < n; ++i) {
          uint16_t want = narrow_one(wire, samples[i]);
          if (std::isnan(samples[i]))
            ASSERT_TRUE(std::isnan(widen_one(wire, wire_bits[i + 1]))) << i;
          else
            ASSERT_EQ(wire_bits[i + 1], want) << std::hex << bits_of(samples[i]);
          ASSERT_TRUE(same_float(values[i], widen_one(wire, wire_bits[i + 1]))) << i;
        }
        std::vector<float> back(n, -7.0f);
        widen_from_wire(wire, back.data(), wire_bits.data() + 1, n);
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_TRUE(same_float(back[i], values[i])) << i;
        std::vector<float> a(n), out(n);
        for (std::size_t i = 0; i < n; ++i)
          a[i] = static_cast<float>(i % 13) - 6.5f;
        for (redop op : {redop::sum, redop::prod, redop::min, redop::max, redop::avg}) {
          reduce_from_wire(op, wire, out.data(), a.data(), wire_bits.data() + 1, n);
          std::vector<float> want(n);
          reduce3(op, dtype::float32, want.data(), a.data(), back.data(), n);
          for (std::size_t i = 0; i < n; ++i)
            ASSERT_TRUE(same_float(out[i], want[i])) << to_string(op) << " at " << i;
        }
        // In place: dst == a.
        auto acc = a;
        reduce_from_wire(redop::sum, wire, acc.data(), acc.data(), wire_bits.data() + 1, n);
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_TRUE(same_float(acc[i], a[i] + back[i])) << i;
      }
    }
  });
}

TEST(reduce, wire_rejects_other_types_and_bitwise_ops) {
  float x = 1.0f;
  uint16_t h = 0;
  EXPECT_THROW(narrow_for_wire(dtype::float32, &h, &x, 1), error);
  EXPECT_THROW(widen_from_wire(dtype::int8, &x, &h, 1), error);
  try {
    reduce_from_wire(redop::band, dtype::float16, &x, &x, &h, 1);
    ADD_FAILURE() << "band accepted";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("band"), std::string::npos) << e.what();
  }
}
