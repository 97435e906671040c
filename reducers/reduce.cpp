#include "reducers/reduce.hpp"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include "config/error.hpp"

namespace mccl {

const char* to_string(redop op) noexcept {
  switch (op) {
    case redop::sum: return "sum";
    case redop::prod: return "prod";
    case redop::min: return "min";
    case redop::max: return "max";
    case redop::avg: return "avg";
    case redop::band: return "band";
    case redop::bor: return "bor";
    case redop::bxor: return "bxor";
  }
  return "unknown";
}

namespace {

// -- element operators --------------------------------------------------------

// Integer arithmetic goes through the unsigned type so overflow wraps instead
// of being undefined. int8/uint8 promote to int first, where 255 * 255 fits.
template <class T>
T wrap_add(T a, T b) noexcept {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}

template <class T>
T wrap_mul(T a, T b) noexcept {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}

struct op_sum {
  template <class T>
  T operator()(T a, T b) const noexcept {
    if constexpr (std::is_integral_v<T>)
      return wrap_add(a, b);
    else
      return a + b;
  }
};

struct op_prod {
  template <class T>
  T operator()(T a, T b) const noexcept {
    if constexpr (std::is_integral_v<T>)
      return wrap_mul(a, b);
    else
      return a * b;
  }
};

// Floats: a NaN on either side wins, so the result does not depend on which
// rank's value happened to be the accumulator.
struct op_min {
  template <class T>
  T operator()(T a, T b) const noexcept {
    if constexpr (std::is_floating_point_v<T>)
      return (b < a || b != b) ? b : a;
    else
      return b < a ? b : a;
  }
};

struct op_max {
  template <class T>
  T operator()(T a, T b) const noexcept {
    if constexpr (std::is_floating_point_v<T>)
      return (a < b || b != b) ? b : a;
    else
      return a < b ? b : a;
  }
};

struct op_band {
  template <class T>
  T operator()(T a, T b) const noexcept { return static_cast<T>(a & b); }
};

struct op_bor {
  template <class T>
  T operator()(T a, T b) const noexcept { return static_cast<T>(a | b); }
};

struct op_bxor {
  template <class T>
  T operator()(T a, T b) const noexcept { return static_cast<T>(a ^ b); }
};

// bool bytes: any non-zero input counts as true, outputs are always 0 or 1.
struct op_lor {
  uint8_t operator()(uint8_t a, uint8_t b) const noexcept {
    return static_cast<uint8_t>((a | b) != 0);
  }
};

struct op_land {
  uint8_t operator()(uint8_t a, uint8_t b) const noexcept {
    return static_cast<uint8_t>((a != 0) & (b != 0));
  }
};

struct op_lxor {
  uint8_t operator()(uint8_t a, uint8_t b) const noexcept {
    return static_cast<uint8_t>((a != 0) ^ (b != 0));
  }
};

// -- kernels -----------------------------------------------------------------

// Inner loops run a constant 64 bytes' worth of elements: a fixed trip count
// with __restrict lets GCC vectorise without peeling or alias versioning, so
// even -O2's cheap cost model keeps them.
template <class T>
constexpr std::size_t block_elems = 64 / sizeof(T);

template <class T, class Op>
void kernel3(T* __restrict dst, const T* __restrict a, const T* __restrict b, std::size_t n,
             Op op) noexcept {
  constexpr std::size_t w = block_elems<T>;
  std::size_t i = 0;
  for (; i + w <= n; i += w)
    for (std::size_t j = 0; j < w; ++j)
      dst[i + j] = op(a[i + j], b[i + j]);
  for (; i < n; ++i)
    dst[i] = op(a[i], b[i]);
}

// dst[i] = dst[i] op src[i].
template <class T, class Op>
void kernel_left(T* __restrict dst, const T* __restrict src, std::size_t n, Op op) noexcept {
  constexpr std::size_t w = block_elems<T>;
  std::size_t i = 0;
  for (; i + w <= n; i += w)
    for (std::size_t j = 0; j < w; ++j)
      dst[i + j] = op(dst[i + j], src[i + j]);
  for (; i < n; ++i)
    dst[i] = op(dst[i], src[i]);
}

// dst[i] = src[i] op dst[i]: keeps operand order when dst is the right operand.
template <class T, class Op>
void kernel_right(T* __restrict dst, const T* __restrict src, std::size_t n, Op op) noexcept {
  constexpr std::size_t w = block_elems<T>;
  std::size_t i = 0;
  for (; i + w <= n; i += w)
    for (std::size_t j = 0; j < w; ++j)
      dst[i + j] = op(src[i + j], dst[i + j]);
  for (; i < n; ++i)
    dst[i] = op(src[i], dst[i]);
}

template <class T, class Op>
void kernel_self(T* dst, std::size_t n, Op op) noexcept {
  for (std::size_t i = 0; i < n; ++i)
    dst[i] = op(dst[i], dst[i]);
}

template <class T>
bool aligned_for(const void* p) noexcept {
  return reinterpret_cast<std::uintptr_t>(p) % alignof(T) == 0;
}

// Misaligned buffers are staged through this much aligned stack per operand.
constexpr std::size_t bounce_bytes = 4096;

// dst = a op b on raw bytes. Exact aliasing of dst with a and/or b is fine:
// each chunk of a and b is read completely before that chunk of dst is written.
template <class T, class Op>
void apply(Op op, void* dst, const void* a, const void* b, std::size_t n) {
  if (aligned_for<T>(dst) && aligned_for<T>(a) && aligned_for<T>(b)) {
    auto* d = static_cast<T*>(dst);
    auto* x = static_cast<const T*>(a);
    auto* y = static_cast<const T*>(b);
    if (d == x && d == y)
      kernel_self(d, n, op);
    else if (d == x)
      kernel_left(d, y, n, op);
    else if (d == y)
      kernel_right(d, x, n, op);
    else
      kernel3(d, x, y, n, op);
    return;
  }
  constexpr std::size_t per = bounce_bytes / sizeof(T);
  alignas(64) T bx[per];
  alignas(64) T by[per];
  auto* d = static_cast<unsigned char*>(dst);
  auto* x = static_cast<const unsigned char*>(a);
  auto* y = static_cast<const unsigned char*>(b);
  for (std::size_t i = 0; i < n; i += per) {
    std::size_t bytes = std::min(per, n - i) * sizeof(T);
    std::memcpy(bx, x + i * sizeof(T), bytes);
    std::memcpy(by, y + i * sizeof(T), bytes);
    kernel_left(bx, by, bytes / sizeof(T), op);
    std::memcpy(d + i * sizeof(T), bx, bytes);
  }
}

template <class T>
void apply_numeric(redop op, void* dst, const void* a, const void* b, std::size_t n) {
  switch (op) {
    case redop::sum:
    case redop::avg: return apply<T>(op_sum{}, dst, a, b, n);
    case redop::prod: return apply<T>(op_prod{}, dst, a, b, n);
    case redop::min: return apply<T>(op_min{}, dst, a, b, n);
    case redop::max: return apply<T>(op_max{}, dst, a, b, n);
    case redop::band:
      if constexpr (std::is_integral_v<T>)
        return apply<T>(op_band{}, dst, a, b, n);
      break;
    case redop::bor:
      if constexpr (std::is_integral_v<T>)
        return apply<T>(op_bor{}, dst, a, b, n);
      break;
    case redop::bxor:
      if constexpr (std::is_integral_v<T>)
        return apply<T>(op_bxor{}, dst, a, b, n);
      break;
  }
  throw error(errc::internal, std::string("no kernel for reduction ") + to_string(op));
}

void apply_bool(redop op, void* dst, const void* a, const void* b, std::size_t n) {
  switch (op) {
    case redop::sum:
    case redop::max:
    case redop::bor: return apply<uint8_t>(op_lor{}, dst, a, b, n);
    case redop::prod:
    case redop::min:
    case redop::band: return apply<uint8_t>(op_land{}, dst, a, b, n);
    case redop::bxor: return apply<uint8_t>(op_lxor{}, dst, a, b, n);
    case redop::avg: break;
  }
  throw error(errc::internal, std::string("no bool kernel for reduction ") + to_string(op));
}

// -- validation --------------------------------------------------------------

struct verdict {
  errc code = errc::none;
  std::string message;
};

bool known(dtype t) noexcept {
  return dtype_size(t) != 0;
}

bool known(redop op) noexcept {
  return static_cast<uint8_t>(op) <= static_cast<uint8_t>(redop::bxor);
}

verdict classify(redop op, dtype t) {
  if (!known(op))
    return {errc::invalid_argument, "unknown redop value " + std::to_string(static_cast<int>(op))
                                      + " (dtype " + to_string(t) + ")"};
  if (!known(t))
    return {errc::invalid_argument, "unknown dtype value " + std::to_string(static_cast<int>(t))
                                      + " (reduction " + to_string(op) + ")"};
  if (t == dtype::float16 || t == dtype::bfloat16)
    return {errc::unsupported, std::string("dtype ") + to_string(t)
                                 + " is not supported by this version's reducers (reduction "
                                 + to_string(op) + ")"};
  bool bitwise = op == redop::band || op == redop::bor || op == redop::bxor;
  if (bitwise && (t == dtype::float32 || t == dtype::float64))
    return {errc::invalid_argument, std::string("reduction ") + to_string(op)
                                      + " is not defined for dtype " + to_string(t)
                                      + " (bitwise ops need an integer or bool dtype)"};
  if (op == redop::avg && t == dtype::boolean)
    return {errc::invalid_argument,
            "reduction avg is not defined for dtype bool (a mean of booleans is not a boolean)"};
  return {};
}

void require_supported(redop op, dtype t, const char* fn) {
  auto v = classify(op, t);
  if (v.code != errc::none)
    throw error(v.code, std::string(fn) + ": " + v.message);
}

// -- avg ---------------------------------------------------------------------

template <class T>
void divide(T* dst, std::size_t n, int world) noexcept {
  if constexpr (std::is_floating_point_v<T>) {
    const T w = static_cast<T>(world);
    for (std::size_t i = 0; i < n; ++i)
      dst[i] = dst[i] / w;
  } else {
    // Promotion to at least int keeps `world` itself representable; C++
    // integer division truncates toward zero.
    for (std::size_t i = 0; i < n; ++i)
      dst[i] = static_cast<T>(dst[i] / world);
  }
}

template <class T>
void divide_bytes(void* dst, std::size_t n, int world) noexcept {
  if (aligned_for<T>(dst)) {
    divide(static_cast<T*>(dst), n, world);
    return;
  }
  constexpr std::size_t per = bounce_bytes / sizeof(T);
  alignas(64) T buf[per];
  auto* d = static_cast<unsigned char*>(dst);
  for (std::size_t i = 0; i < n; i += per) {
    std::size_t bytes = std::min(per, n - i) * sizeof(T);
    std::memcpy(buf, d + i * sizeof(T), bytes);
    divide(buf, bytes / sizeof(T), world);
    std::memcpy(d + i * sizeof(T), buf, bytes);
  }
}

void require_buffers(const char* fn, std::size_t n, std::initializer_list<const void*> ptrs) {
  if (n == 0)
    return;
  for (auto* p : ptrs)
    if (p == nullptr)
      throw error(errc::invalid_argument,
                  std::string(fn) + ": null buffer with n = " + std::to_string(n));
}

} // namespace

std::string check_reduction(redop op, dtype t) {
  return classify(op, t).message;
}

void reduce(redop op, dtype t, void* dst, const void* src, std::size_t n) {
  require_supported(op, t, "reduce");
  require_buffers("reduce", n, {dst, src});
  reduce3(op, t, dst, dst, src, n);
}

void reduce3(redop op, dtype t, void* dst, const void* a, const void* b, std::size_t n) {
  require_supported(op, t, "reduce3");
  require_buffers("reduce3", n, {dst, a, b});
  if (n == 0)
    return;
  switch (t) {
    case dtype::float32: return apply_numeric<float>(op, dst, a, b, n);
    case dtype::float64: return apply_numeric<double>(op, dst, a, b, n);
    case dtype::int8: return apply_numeric<int8_t>(op, dst, a, b, n);
    case dtype::uint8: return apply_numeric<uint8_t>(op, dst, a, b, n);
    case dtype::int32: return apply_numeric<int32_t>(op, dst, a, b, n);
    case dtype::int64: return apply_numeric<int64_t>(op, dst, a, b, n);
    case dtype::boolean: return apply_bool(op, dst, a, b, n);
    case dtype::float16:
    case dtype::bfloat16: break;
  }
  throw error(errc::internal, std::string("reduce3: no kernel for dtype ") + to_string(t));
}

void finish_avg(dtype t, void* dst, std::size_t n, int world) {
  require_supported(redop::avg, t, "finish_avg");
  if (world < 1)
    throw error(errc::invalid_argument,
                "finish_avg: world must be >= 1, got " + std::to_string(world));
  require_buffers("finish_avg", n, {dst});
  if (n == 0)
    return;
  switch (t) {
    case dtype::float32: return divide_bytes<float>(dst, n, world);
    case dtype::float64: return divide_bytes<double>(dst, n, world);
    case dtype::int8: return divide_bytes<int8_t>(dst, n, world);
    case dtype::uint8: return divide_bytes<uint8_t>(dst, n, world);
    case dtype::int32: return divide_bytes<int32_t>(dst, n, world);
    case dtype::int64: return divide_bytes<int64_t>(dst, n, world);
    case dtype::boolean:
    case dtype::float16:
    case dtype::bfloat16: break;
  }
  throw error(errc::internal, std::string("finish_avg: no kernel for dtype ") + to_string(t));
}

} // namespace mccl
