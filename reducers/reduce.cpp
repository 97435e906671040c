#include "reducers/reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include <mccl/error.hpp>
#include "reducers/reduce_kernels.hpp"

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
  bool bitwise = op == redop::band || op == redop::bor || op == redop::bxor;
  bool floating = t == dtype::float32 || t == dtype::float64 || t == dtype::float16
                  || t == dtype::bfloat16;
  if (bitwise && floating)
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

// Integer means are rare and short (one pass at the end of an allreduce), and
// SIMD has no integer division, so they stay scalar. Promotion to at least
// int keeps `world` itself representable; C++ integer division truncates
// toward zero.
template <class T>
void divide_ints(T* dst, std::size_t n, int world) noexcept {
  for (std::size_t i = 0; i < n; ++i)
    dst[i] = static_cast<T>(dst[i] / world);
}

// A chunk can start at any byte: misaligned buffers are staged through an
// aligned stack buffer rather than accessed through a misaligned T*.
template <class T>
void divide_ints_bytes(void* dst, std::size_t n, int world) noexcept {
  if (reinterpret_cast<std::uintptr_t>(dst) % alignof(T) == 0) {
    divide_ints(static_cast<T*>(dst), n, world);
    return;
  }
  constexpr std::size_t per = 4096 / sizeof(T);
  alignas(64) T buf[per];
  auto* d = static_cast<unsigned char*>(dst);
  for (std::size_t i = 0; i < n; i += per) {
    std::size_t bytes = std::min(per, n - i) * sizeof(T);
    std::memcpy(buf, d + i * sizeof(T), bytes);
    divide_ints(buf, bytes / sizeof(T), world);
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
  if (!detail::reduce_kernel(op, t, dst, a, b, n))
    throw error(errc::internal, std::string("reduce3: no kernel for reduction ") + to_string(op)
                                  + " on dtype " + to_string(t));
}

void reduce_many(redop op, dtype t, void* dst, const void* const* sources, std::size_t k, std::size_t n) {
  require_supported(op, t, "reduce_many");
  if (k == 0)
    throw error(errc::invalid_argument, "reduce_many: no source");
  if (n == 0)
    return;
  require_buffers("reduce_many", n, {dst, sources});
  for (std::size_t i = 0; i < k; ++i)
    require_buffers("reduce_many", n, {sources[i]});
  if (k == 1) {
    if (dst != sources[0])
      std::memmove(dst, sources[0], n * dtype_size(t));
    return;
  }
  if (!detail::reduce_many_kernel(op, t, dst, sources, k, n))
    throw error(errc::internal, std::string("reduce_many: no kernel for reduction ") + to_string(op) + " on dtype "
                                  + to_string(t));
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
    case dtype::int8: return divide_ints_bytes<int8_t>(dst, n, world);
    case dtype::uint8: return divide_ints_bytes<uint8_t>(dst, n, world);
    case dtype::int32: return divide_ints_bytes<int32_t>(dst, n, world);
    case dtype::int64: return divide_ints_bytes<int64_t>(dst, n, world);
    case dtype::int16: return divide_ints_bytes<int16_t>(dst, n, world);
    case dtype::uint16: return divide_ints_bytes<uint16_t>(dst, n, world);
    case dtype::uint32: return divide_ints_bytes<uint32_t>(dst, n, world);
    case dtype::uint64: return divide_ints_bytes<uint64_t>(dst, n, world);
    default:
      if (detail::divide_float_kernel(t, dst, n, world))
        return;
  }
  throw error(errc::internal, std::string("finish_avg: no kernel for dtype ") + to_string(t));
}

namespace {

void require_wire_type(dtype wire_type, const char* fn) {
  if (wire_type != dtype::float16 && wire_type != dtype::bfloat16)
    throw error(errc::invalid_argument, std::string(fn) + ": wire type " + to_string(wire_type)
                                          + " (float32 payloads travel as float16 or bfloat16)");
}

} // namespace

void narrow_for_wire(dtype wire_type, void* wire, float* values, std::size_t n) {
  require_wire_type(wire_type, "narrow_for_wire");
  require_buffers("narrow_for_wire", n, {wire, values});
  if (n > 0)
    detail::narrow_kernel(wire_type, wire, values, n);
}

void round_for_wire(dtype wire_type, float* values, std::size_t n) {
  require_wire_type(wire_type, "round_for_wire");
  require_buffers("round_for_wire", n, {values});
  constexpr std::size_t piece = 4096;
  uint16_t wire[piece];
  for (std::size_t i = 0; i < n; i += piece)
    detail::narrow_kernel(wire_type, wire, values + i, std::min(piece, n - i));
}

void widen_from_wire(dtype wire_type, float* dst, const void* wire, std::size_t n) {
  require_wire_type(wire_type, "widen_from_wire");
  require_buffers("widen_from_wire", n, {dst, wire});
  if (n > 0)
    detail::widen_kernel(redop::sum, wire_type, dst, nullptr, wire, n);
}

void reduce_from_wire(redop op, dtype wire_type, float* dst, const float* a, const void* wire,
                      std::size_t n) {
  require_wire_type(wire_type, "reduce_from_wire");
  require_supported(op, dtype::float32, "reduce_from_wire");
  require_buffers("reduce_from_wire", n, {dst, a, wire});
  if (n > 0 && !detail::widen_kernel(op, wire_type, dst, a, wire, n))
    throw error(errc::invalid_argument, std::string("reduce_from_wire: reduction ")
                                          + to_string(op) + " on float32");
}

} // namespace mccl
