// Vectorised reduction loops, compiled once per x86 instruction set by
// Highway's foreach_target and chosen at run time (HWY_DYNAMIC_DISPATCH), so
// libmccl runs on any x86-64 and still uses AVX2/AVX-512 where present.
//
// Every element type goes through one loop, Run<Block>(op, ...). A Block
// reduces one vector's worth of elements from bytes to bytes (loading,
// widening float16/bfloat16 to float32, applying the Op, narrowing with
// round-to-nearest-even, storing); an Op combines two compute vectors.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "reducers/reduce_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/cache_control.h>
#include <hwy/targets.h>
#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "reducers/half.hpp"
#include "reducers/reduce_kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace mccl::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// -- blocks: one vector's worth of elements, bytes to bytes ---------------------
// Pointers may be misaligned even for the element type: LoadU/StoreU compile
// to unaligned vector moves (or memcpy on the scalar target), never to
// aligned ones. Each Apply loads both inputs before it stores, so dst may be
// exactly a or b.

// Elements computed in their own type.
template <class T>
struct Plain {
  using D = hn::ScalableTag<T>;
  static constexpr std::size_t kSize = sizeof(T);
  static HWY_INLINE std::size_t Count() { return hn::Lanes(D()); }
  template <class Op>
  static HWY_INLINE void Apply(Op op, uint8_t* dst, const uint8_t* a, const uint8_t* b) {
    const D d;
    const auto va = hn::LoadU(d, reinterpret_cast<const T*>(a));
    const auto vb = hn::LoadU(d, reinterpret_cast<const T*>(b));
    hn::StoreU(op(d, va, vb), d, reinterpret_cast<T*>(dst));
  }
};

using DF = hn::ScalableTag<float>;
using DU16 = hn::Rebind<uint16_t, DF>;  // half as wide as DF, same lane count
using DU32 = hn::RebindToUnsigned<DF>;
using DI32 = hn::RebindToSigned<DF>;

// float32 -> bfloat16 with round to nearest even, leaving the result in the
// upper 16 bits of each lane (the lower 16 are junk). Same arithmetic as
// float_to_bf16 in half.hpp: add 0x7FFF plus the kept lsb, so ties go to
// even; a NaN is kept apart (quiet bit set) so the add cannot carry it into
// inf. Highway's DemoteTo(bfloat16_t) truncates, so it is not used.
HWY_INLINE hn::Vec<DU32> RoundToBF16High(hn::Vec<DF> v) {
  const DU32 du;
  const auto x = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(x), hn::Set(du, 1));
  const auto rounded = hn::Add(hn::Add(x, hn::Set(du, 0x7FFF)), lsb);
  const auto quiet_nan = hn::Or(x, hn::Set(du, 0x00400000));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet_nan, rounded);
}

// bfloat16 in pairs: each 32-bit lane holds two elements. A bfloat16 is the
// top half of a float32, so one element widens with a shift and the other
// with a mask, and the two results go back with a mask, a shift and an or:
// no lane-changing shuffles, which are the bottleneck of widen/narrow.
struct BF16 {
  static constexpr std::size_t kSize = 2;
  static HWY_INLINE std::size_t Count() { return 2 * hn::Lanes(DU32()); }
  template <class Op>
  static HWY_INLINE void Apply(Op op, uint8_t* dst, const uint8_t* a, const uint8_t* b) {
    const DF df;
    const DU32 du;
    const auto high = hn::Set(du, 0xFFFF0000u);
    const auto xa = hn::LoadU(du, reinterpret_cast<const uint32_t*>(a));
    const auto xb = hn::LoadU(du, reinterpret_cast<const uint32_t*>(b));
    const auto lo = op(df, hn::BitCast(df, hn::ShiftLeft<16>(xa)),
                       hn::BitCast(df, hn::ShiftLeft<16>(xb)));
    const auto hi = op(df, hn::BitCast(df, hn::And(xa, high)), hn::BitCast(df, hn::And(xb, high)));
    const auto r = hn::Or(hn::And(RoundToBF16High(hi), high),
                          hn::ShiftRight<16>(RoundToBF16High(lo)));
    hn::StoreU(r, du, reinterpret_cast<uint32_t*>(dst));
  }
};

// Helpers for the float16 fallback below: 16-bit elements in 32-bit lanes.
HWY_INLINE hn::Vec<DU32> LoadU16(const uint8_t* p) {
  return hn::PromoteTo(DU32(), hn::LoadU(DU16(), reinterpret_cast<const uint16_t*>(p)));
}

HWY_INLINE void StoreU16(hn::Vec<DU32> bits, uint8_t* p) {
  // Every lane holds a value < 2^16 here, so truncation loses nothing.
  hn::StoreU(hn::TruncateTo(DU16(), bits), DU16(), reinterpret_cast<uint16_t*>(p));
}

HWY_INLINE hn::Mask<DU32> Below(hn::Vec<DU32> x, int32_t limit) {
  // Callers pass |x| < 2^31, where a signed compare is an unsigned one; not
  // every target has unsigned 32-bit compares.
  return hn::RebindMask(DU32(), hn::Lt(hn::BitCast(DI32(), x), hn::Set(DI32(), limit)));
}

// float16. Targets with F16C (AVX2 and up) convert in hardware; vcvtps2ph
// with Highway's immediate rounds to nearest even, handles subnormals,
// overflow and NaN. Highway's fallback for older targets truncates and
// mishandles inf/NaN, so those get the integer version below; its narrowing
// matches half.hpp's float_to_f16 (and so vcvtps2ph) bit for bit.
struct F16 {
  static constexpr std::size_t kSize = 2;
  static HWY_INLINE std::size_t Count() { return hn::Lanes(DF()); }
  template <class Op>
  static HWY_INLINE void Apply(Op op, uint8_t* dst, const uint8_t* a, const uint8_t* b) {
    const DF d;
    const auto va = Load(d, a);
    const auto vb = Load(d, b);
    Store(d, op(d, va, vb), dst);
  }

  static HWY_INLINE hn::Vec<DF> Load(DF d, const uint8_t* p) {
#if HWY_TARGET <= HWY_AVX2
    const hn::Rebind<hwy::float16_t, DF> dh;
    const auto bits = hn::LoadU(DU16(), reinterpret_cast<const uint16_t*>(p));
    return hn::PromoteTo(d, hn::BitCast(dh, bits));
#else
    const DU32 du;
    const auto h = LoadU16(p);
    const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000)));
    const auto exp = hn::And(h, hn::Set(du, 0x7C00));
    const auto man = hn::And(h, hn::Set(du, 0x3FF));
    // Normal: rebias the exponent from 15 to 127.
    const auto normal = hn::Add(hn::ShiftLeft<13>(hn::And(h, hn::Set(du, 0x7FFF))),
                                hn::Set(du, 0x38000000));
    // Subnormal (and zero): man * 2^-24, exact in float32.
    const auto sub = hn::BitCast(
        du, hn::Mul(hn::ConvertTo(d, hn::BitCast(DI32(), man)), hn::Set(d, 0x1p-24f)));
    // Inf/NaN, payload kept. (vcvtph2ps also quiets a signalling NaN; not
    // needed here, every op's result on a NaN input is a quiet NaN anyway.)
    const auto special = hn::Or(hn::Set(du, 0x7F800000), hn::ShiftLeft<13>(man));
    const auto is_sub = hn::RebindMask(du, hn::Eq(hn::BitCast(DI32(), exp), hn::Zero(DI32())));
    const auto is_special =
        hn::RebindMask(du, hn::Eq(hn::BitCast(DI32(), exp), hn::Set(DI32(), 0x7C00)));
    auto bits = hn::IfThenElse(is_sub, sub, hn::IfThenElse(is_special, special, normal));
    return hn::BitCast(d, hn::Or(bits, sign));
#endif
  }

  static HWY_INLINE void Store(DF d, hn::Vec<DF> v, uint8_t* p) {
    (void)d;  // used by the integer version only
#if HWY_TARGET <= HWY_AVX2
    const hn::Rebind<hwy::float16_t, DF> dh;
    hn::StoreU(hn::BitCast(DU16(), hn::DemoteTo(dh, v)), DU16(), reinterpret_cast<uint16_t*>(p));
#else
    // Branch-free form of float_to_f16 (half.hpp): compute every case, select.
    const DU32 du;
    const auto bits = hn::BitCast(du, v);
    const auto sign = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 0x8000));
    const auto x = hn::And(bits, hn::Set(du, 0x7FFFFFFF));
    const auto odd = hn::And(hn::ShiftRight<13>(x), hn::Set(du, 1));
    const auto normal = hn::ShiftRight<13>(
        hn::Sub(hn::Add(hn::Add(x, hn::Set(du, 0xFFF)), odd), hn::Set(du, 0x38000000)));
    // |v| < 2^-14: adding 0.5f makes the FPU round |v| to a multiple of 2^-24
    // (the float16 subnormal step) to nearest even; the low mantissa bits of
    // the sum are then the float16 encoding. Assumes the default rounding mode.
    const auto half = hn::Set(d, 0.5f);
    const auto sub =
        hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(d, x), half)), hn::BitCast(du, half));
    const auto nan =
        hn::Or(hn::Set(du, 0x7E00), hn::And(hn::ShiftRight<13>(x), hn::Set(du, 0x3FF)));
    auto r = hn::IfThenElse(Below(x, 0x38800000), sub, normal);
    r = hn::IfThenElse(Below(x, 0x477FF000), r, hn::Set(du, 0x7C00));  // >= 65520: inf
    r = hn::IfThenElse(Below(x, 0x7F800001), r, nan);
    StoreU16(hn::Or(r, sign), p);
#endif
  }
};

// -- ops ----------------------------------------------------------------------

struct OpSum {
  template <class D, class V>
  HWY_INLINE V operator()(D, V a, V b) const { return hn::Add(a, b); }  // ints wrap
};

// 8-bit lanes have no multiply: multiply as 16-bit lanes, once for the even
// bytes (low byte of the product) and once for the odd ones (high byte of a
// times b with its low byte cleared, so the product lands in the high byte).
template <class D, class V>
HWY_INLINE V Mul8(D d, V a, V b) {
#if HWY_TARGET == HWY_SCALAR
  using T = hn::TFromD<D>;
  return hn::Set(d, static_cast<T>(static_cast<unsigned>(hn::GetLane(a)) *
                                   static_cast<unsigned>(hn::GetLane(b))));
#else
  const hn::Repartition<uint16_t, D> dw;
  const auto x = hn::BitCast(dw, a);
  const auto y = hn::BitCast(dw, b);
  const auto even = hn::And(hn::Mul(x, y), hn::Set(dw, 0x00FF));
  const auto odd = hn::Mul(hn::ShiftRight<8>(x), hn::And(y, hn::Set(dw, 0xFF00)));
  return hn::BitCast(d, hn::Or(even, odd));
#endif
}

struct OpProd {
  template <class D, class V>
  HWY_INLINE V operator()(D d, V a, V b) const {
    if constexpr (sizeof(hn::TFromD<D>) == 1)
      return Mul8(d, a, b);
    else
      return hn::Mul(a, b);  // wraps for 32/64-bit ints (emulated where needed)
  }
};

// x86 min/max return the second operand when either is NaN, other targets
// are unspecified; a NaN on either side must win, so fix those lanes up with
// a + b, which is a quiet NaN whenever an input is NaN.
template <class D, class V>
HWY_INLINE V NanWins(D, V a, V b, V r) {
  return hn::IfThenElse(hn::Or(hn::IsNaN(a), hn::IsNaN(b)), hn::Add(a, b), r);
}

struct OpMin {
  template <class D, class V>
  HWY_INLINE V operator()(D d, V a, V b) const {
    if constexpr (hwy::IsFloat<hn::TFromD<D>>())
      return NanWins(d, a, b, hn::Min(a, b));
    else
      return hn::Min(a, b);
  }
};

struct OpMax {
  template <class D, class V>
  HWY_INLINE V operator()(D d, V a, V b) const {
    if constexpr (hwy::IsFloat<hn::TFromD<D>>())
      return NanWins(d, a, b, hn::Max(a, b));
    else
      return hn::Max(a, b);
  }
};

struct OpAnd {
  template <class D, class V>
  HWY_INLINE V operator()(D, V a, V b) const { return hn::And(a, b); }
};

struct OpOr {
  template <class D, class V>
  HWY_INLINE V operator()(D, V a, V b) const { return hn::Or(a, b); }
};

struct OpXor {
  template <class D, class V>
  HWY_INLINE V operator()(D, V a, V b) const { return hn::Xor(a, b); }
};

// bool bytes: any non-zero byte is true; results are 0 or 1. On unsigned
// bytes, min(x, 1) is exactly "x != 0".
struct OpLogicalOr {
  template <class D, class V>
  HWY_INLINE V operator()(D d, V a, V b) const { return hn::Min(hn::Or(a, b), hn::Set(d, 1)); }
};

struct OpLogicalAnd {
  template <class D, class V>
  HWY_INLINE V operator()(D d, V a, V b) const { return hn::Min(hn::Min(a, b), hn::Set(d, 1)); }
};

struct OpLogicalXor {
  template <class D, class V>
  HWY_INLINE V operator()(D d, V a, V b) const {
    const auto one = hn::Set(d, 1);
    return hn::Xor(hn::Min(a, one), hn::Min(b, one));
  }
};

// dst = dst / w (the b operand is ignored); float16/bfloat16 divide in float32.
template <class T>
struct OpDivideBy {
  T w;
  template <class D, class V>
  HWY_INLINE V operator()(D d, V a, V) const { return hn::Div(a, hn::Set(d, w)); }
};

// -- the loop -------------------------------------------------------------------

// Fewer elements than one block: stage them through zeroed aligned vectors.
template <class B, class Op>
HWY_NOINLINE void Partial(Op op, uint8_t* dst, const uint8_t* a, const uint8_t* b,
                          std::size_t count) {
  HWY_ALIGN uint8_t va[HWY_MAX_BYTES] = {};
  HWY_ALIGN uint8_t vb[HWY_MAX_BYTES] = {};
  const std::size_t bytes = count * B::kSize;
  std::memcpy(va, a, bytes);
  std::memcpy(vb, b, bytes);
  B::Apply(op, va, va, vb);
  std::memcpy(dst, va, bytes);
}

// Inputs are prefetched this many bytes ahead. The hardware prefetcher alone
// left float16/bfloat16 sums at ~75% of memcpy's speed on 64 MiB (their
// conversions keep the core busy, so fewer loads are in flight); 2-4 KiB
// ahead brings them level with float32 (~95%).
constexpr std::size_t kPrefetchAhead = 4096;

// Four blocks at byte offset o: fewer loop overheads and more independent
// loads in flight when streaming from memory.
template <class B, class Op>
HWY_INLINE void Apply4(Op op, uint8_t* dst, const uint8_t* a, const uint8_t* b, std::size_t o,
                       std::size_t step) {
  B::Apply(op, dst + o, a + o, b + o);
  B::Apply(op, dst + o + step, a + o + step, b + o + step);
  B::Apply(op, dst + o + 2 * step, a + o + 2 * step, b + o + 2 * step);
  B::Apply(op, dst + o + 3 * step, a + o + 3 * step, b + o + 3 * step);
}

// dst = a op b over n elements.
template <class B, class Op>
HWY_INLINE void Run(Op op, void* dst_v, const void* a_v, const void* b_v, std::size_t n) {
  const std::size_t count = B::Count();  // elements per block
  const std::size_t step = count * B::kSize;
  auto* dst = static_cast<uint8_t*>(dst_v);
  auto* a = static_cast<const uint8_t*>(a_v);
  auto* b = static_cast<const uint8_t*>(b_v);
  std::size_t i = 0;
  // Stores that straddle cache lines cost the most (15% of float32 sum at 16
  // bytes off on AVX-512), so when dst is at least element-aligned, do the
  // elements up to the next block boundary of dst separately. a and b may
  // still be misaligned; their loads are cheaper to split.
  const auto dst_addr = reinterpret_cast<std::uintptr_t>(dst);
  if (n >= 8 * count && dst_addr % B::kSize == 0 && dst_addr % step != 0) {
    i = (step - dst_addr % step) / B::kSize;
    Partial<B>(op, dst, a, b, i);
  }
  // Prefetch only while the address stays inside the buffers; the last
  // kPrefetchAhead bytes were prefetched by earlier iterations.
  const std::size_t ahead = kPrefetchAhead / B::kSize;
  for (; i + 4 * count + ahead <= n; i += 4 * count) {
    const std::size_t o = i * B::kSize;
    for (std::size_t line = 0; line < 4 * step; line += 64) {
      hwy::Prefetch(a + o + kPrefetchAhead + line);
      hwy::Prefetch(b + o + kPrefetchAhead + line);
    }
    Apply4<B>(op, dst, a, b, o, step);
  }
  for (; i + 4 * count <= n; i += 4 * count)
    Apply4<B>(op, dst, a, b, i * B::kSize, step);
  for (; i + count <= n; i += count) {
    const std::size_t o = i * B::kSize;
    B::Apply(op, dst + o, a + o, b + o);
  }
  if (i < n) {
    const std::size_t o = i * B::kSize;
    Partial<B>(op, dst + o, a + o, b + o, n - i);
  }
}

// -- per-dtype dispatch ---------------------------------------------------------
// WithKernel calls fn(B{}, Op{}) with the block type and operation of
// (op, t), or returns false when there is none: one switch that every entry
// point below shares.

template <class C, class Fn>
bool WithFloatOp(redop op, Fn&& fn) {
  switch (op) {
    case redop::sum:
    case redop::avg: fn(C{}, OpSum{}); return true;
    case redop::prod: fn(C{}, OpProd{}); return true;
    case redop::min: fn(C{}, OpMin{}); return true;
    case redop::max: fn(C{}, OpMax{}); return true;
    default: return false;
  }
}

template <class T, class Fn>
bool WithIntOp(redop op, Fn&& fn) {
  using C = Plain<T>;
  switch (op) {
    case redop::band: fn(C{}, OpAnd{}); return true;
    case redop::bor: fn(C{}, OpOr{}); return true;
    case redop::bxor: fn(C{}, OpXor{}); return true;
    default: return WithFloatOp<C>(op, fn);  // arithmetic ops are shared
  }
}

template <class Fn>
bool WithBoolOp(redop op, Fn&& fn) {
  using C = Plain<uint8_t>;
  switch (op) {
    case redop::sum:
    case redop::max:
    case redop::bor: fn(C{}, OpLogicalOr{}); return true;
    case redop::prod:
    case redop::min:
    case redop::band: fn(C{}, OpLogicalAnd{}); return true;
    case redop::bxor: fn(C{}, OpLogicalXor{}); return true;
    default: return false;
  }
}

template <class Fn>
bool WithKernel(redop op, dtype t, Fn&& fn) {
  switch (t) {
    case dtype::float32: return WithFloatOp<Plain<float>>(op, fn);
    case dtype::float64: return WithFloatOp<Plain<double>>(op, fn);
    case dtype::float16: return WithFloatOp<F16>(op, fn);
    case dtype::bfloat16: return WithFloatOp<BF16>(op, fn);
    case dtype::int8: return WithIntOp<int8_t>(op, fn);
    case dtype::uint8: return WithIntOp<uint8_t>(op, fn);
    case dtype::int32: return WithIntOp<int32_t>(op, fn);
    case dtype::int64: return WithIntOp<int64_t>(op, fn);
    case dtype::boolean: return WithBoolOp(op, fn);
    case dtype::int16: return WithIntOp<int16_t>(op, fn);
    case dtype::uint16: return WithIntOp<uint16_t>(op, fn);
    case dtype::uint32: return WithIntOp<uint32_t>(op, fn);
    case dtype::uint64: return WithIntOp<uint64_t>(op, fn);
  }
  return false;
}

bool Reduce3(redop op, dtype t, void* dst, const void* a, const void* b, std::size_t n) {
  return WithKernel(op, t, [&](auto block, auto o) { Run<decltype(block)>(o, dst, a, b, n); });
}

// dst = sources[0] op sources[1] op ... in that order, one source at a time
// over all n elements: the same steps, and so the same bits, as reduce3 and
// then reduce for each further source, without choosing the kernel again
// for every source (a tiny op of many ranks is mostly that choice).
bool ReduceMany(redop op, dtype t, void* dst, const void* const* sources, std::size_t k, std::size_t n) {
  return WithKernel(op, t, [&](auto block, auto o) {
    using B = decltype(block);
    if (n < B::Count()) {
      // Less than one vector: the running result stays in a vector's
      // buffer from source to source instead of going through dst each time.
      HWY_ALIGN uint8_t acc[HWY_MAX_BYTES] = {};
      HWY_ALIGN uint8_t next[HWY_MAX_BYTES] = {};
      const std::size_t bytes = n * B::kSize;
      std::memcpy(acc, sources[0], bytes);
      for (std::size_t i = 1; i < k; ++i) {
        std::memcpy(next, sources[i], bytes);
        B::Apply(o, acc, acc, next);
      }
      std::memcpy(dst, acc, bytes);
      return;
    }
    Run<B>(o, dst, sources[0], sources[1], n);
    for (std::size_t i = 2; i < k; ++i)
      Run<B>(o, dst, dst, sources[i], n);
  });
}

bool DivideFloat(dtype t, void* dst, std::size_t n, int world) {
  const float wf = static_cast<float>(world);
  switch (t) {
    case dtype::float32: Run<Plain<float>>(OpDivideBy<float>{wf}, dst, dst, dst, n); return true;
    case dtype::float64:
      Run<Plain<double>>(OpDivideBy<double>{static_cast<double>(world)}, dst, dst, dst, n);
      return true;
    case dtype::float16: Run<F16>(OpDivideBy<float>{wf}, dst, dst, dst, n); return true;
    case dtype::bfloat16: Run<BF16>(OpDivideBy<float>{wf}, dst, dst, dst, n); return true;
    default: return false;
  }
}

// -- float32 <-> 16-bit floats on the wire (compression) -------------------------

// One vector of float32 to and from 16-bit storage, rounding to nearest even.
struct WireF16 {
  static HWY_INLINE hn::Vec<DF> Load(const uint8_t* p) { return F16::Load(DF(), p); }
  static HWY_INLINE void Store(hn::Vec<DF> v, uint8_t* p) { F16::Store(DF(), v, p); }
  static float LoadOne(uint16_t h) { return f16_to_float(h); }
  static uint16_t StoreOne(float f) { return float_to_f16(f); }
};

struct WireBF16 {
  static HWY_INLINE hn::Vec<DF> Load(const uint8_t* p) {
    return hn::BitCast(DF(), hn::ShiftLeft<16>(LoadU16(p)));
  }
  static HWY_INLINE void Store(hn::Vec<DF> v, uint8_t* p) {
    StoreU16(hn::ShiftRight<16>(RoundToBF16High(v)), p);
  }
  static float LoadOne(uint16_t h) { return bf16_to_float(h); }
  static uint16_t StoreOne(float f) { return float_to_bf16(f); }
};

// wire = narrow(values); values = widen(wire): a sender keeps exactly what
// its peers will receive.
template <class W>
void NarrowInPlace(uint8_t* wire, float* values, std::size_t n) {
  const DF d;
  const std::size_t lanes = hn::Lanes(d);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    W::Store(hn::LoadU(d, values + i), wire + 2 * i);
    hn::StoreU(W::Load(wire + 2 * i), d, values + i);
  }
  for (; i < n; ++i) {
    uint16_t h = W::StoreOne(values[i]);
    std::memcpy(wire + 2 * i, &h, 2);
    values[i] = W::LoadOne(h);
  }
}

// dst = widen(wire), or dst = a op widen(wire) when a is not null.
template <class W, class Op>
void WidenInto(Op op, float* dst, const float* a, const uint8_t* wire, std::size_t n) {
  const DF d;
  const std::size_t lanes = hn::Lanes(d);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    auto v = W::Load(wire + 2 * i);
    hn::StoreU(a ? op(d, hn::LoadU(d, a + i), v) : v, d, dst + i);
  }
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, wire + 2 * i, 2);
    auto v = hn::Set(hn::CappedTag<float, 1>(), W::LoadOne(h));
    if (a)
      v = op(hn::CappedTag<float, 1>(), hn::Set(hn::CappedTag<float, 1>(), a[i]), v);
    dst[i] = hn::GetLane(v);
  }
}

template <class W>
bool WidenAny(redop op, float* dst, const float* a, const uint8_t* wire, std::size_t n) {
  switch (op) {
    case redop::sum:
    case redop::avg: WidenInto<W>(OpSum{}, dst, a, wire, n); return true;
    case redop::prod: WidenInto<W>(OpProd{}, dst, a, wire, n); return true;
    case redop::min: WidenInto<W>(OpMin{}, dst, a, wire, n); return true;
    case redop::max: WidenInto<W>(OpMax{}, dst, a, wire, n); return true;
    default: return false;
  }
}

bool Narrow(dtype wire_type, void* wire, float* values, std::size_t n) {
  auto* w = static_cast<uint8_t*>(wire);
  switch (wire_type) {
    case dtype::float16: NarrowInPlace<WireF16>(w, values, n); return true;
    case dtype::bfloat16: NarrowInPlace<WireBF16>(w, values, n); return true;
    default: return false;
  }
}

bool Widen(redop op, dtype wire_type, float* dst, const float* a, const void* wire, std::size_t n) {
  auto* w = static_cast<const uint8_t*>(wire);
  switch (wire_type) {
    case dtype::float16: return WidenAny<WireF16>(op, dst, a, w, n);
    case dtype::bfloat16: return WidenAny<WireBF16>(op, dst, a, w, n);
    default: return false;
  }
}

const char* TargetName() {
  return hwy::TargetName(HWY_TARGET);
}

} // namespace HWY_NAMESPACE
} // namespace mccl::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mccl::detail {

// Unqualified names: HWY_DYNAMIC_DISPATCH pastes them into per-target
// names, and a qualified one breaks builds with a single target.
HWY_EXPORT(Reduce3);
HWY_EXPORT(ReduceMany);
HWY_EXPORT(DivideFloat);
HWY_EXPORT(TargetName);
HWY_EXPORT(Narrow);
HWY_EXPORT(Widen);

bool reduce_kernel(redop op, dtype t, void* dst, const void* a, const void* b, std::size_t n) {
  return HWY_DYNAMIC_DISPATCH(Reduce3)(op, t, dst, a, b, n);
}

bool reduce_many_kernel(redop op, dtype t, void* dst, const void* const* sources, std::size_t k, std::size_t n) {
  return HWY_DYNAMIC_DISPATCH(ReduceMany)(op, t, dst, sources, k, n);
}

bool divide_float_kernel(dtype t, void* dst, std::size_t n, int world) {
  return HWY_DYNAMIC_DISPATCH(DivideFloat)(t, dst, n, world);
}

bool narrow_kernel(dtype wire_type, void* wire, float* values, std::size_t n) {
  return HWY_DYNAMIC_DISPATCH(Narrow)(wire_type, wire, values, n);
}

bool widen_kernel(redop op, dtype wire_type, float* dst, const float* a, const void* wire,
                  std::size_t n) {
  return HWY_DYNAMIC_DISPATCH(Widen)(op, wire_type, dst, a, wire, n);
}

const char* reduce_kernel_target() {
  return HWY_DYNAMIC_DISPATCH(TargetName)();
}

std::vector<int64_t> reduce_kernel_targets() {
  // Evaluated here, with this file's HWY_TARGETS (sanitized builds compile
  // fewer than a test's own compilation unit would assume).
  return hwy::SupportedAndGeneratedTargets();
}

} // namespace mccl::detail
#endif // HWY_ONCE
