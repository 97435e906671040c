// Conformance: every operation x dtype x reduction x world 1..8 x counts
// (0, 1, odd, prime, multi-chunk) x in-place / out-of-place, under every
// algorithm choice, compared with a reference each rank computes locally
// from the inputs every rank is known to contribute.
//
// Tolerances: integer and bool results must be exact (wrapping arithmetic
// as documented in reducers/reduce.hpp). Inputs are small integers or powers
// of two, so float sums, products, min and max are exact too; only avg
// divides, and its result must be within one unit in the last place of the
// dtype (2^-23 relative for float32, 2^-52 float64, 2^-10 float16, 2^-7
// bfloat16) of the exact quotient.
//
// Ranks are threads of this process, linked over shared memory (one host;
// small ops on the host board), or over loopback TCP with MCCL_TRANSPORT=tcp
// (the "tcp." tests of CMakeLists.txt); the host-aware configurations
// split them into hosts with MCCL_HOST_ID, so their links are a mix of
// shared memory (inside a host) and TCP (between hosts). The built-in
// table's configuration and one host-aware one copy every chunk between
// ranks of one host once, straight from the sender's memory (single copy);
// the others pass every byte through the rings. Ops are issued in
// batches and waited for together: this also exercises many ops in flight
// on one communicator.

#include <mccl/mccl.hpp>

#include "rank_threads.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <thread>
#include <vector>

namespace {

using mccl::dtype;
using mccl::redop;

constexpr dtype all_dtypes[] = {dtype::float32, dtype::float64, dtype::float16, dtype::bfloat16,
                                dtype::int8,    dtype::uint8,   dtype::int32,   dtype::int64,
                                dtype::boolean};
constexpr redop all_redops[] = {redop::sum, redop::prod, redop::min,  redop::max,
                                redop::avg, redop::band, redop::bor,  redop::bxor};
/// 0, 1, odd, prime, and a prime that spans several 4 KiB chunks.
constexpr std::size_t all_counts[] = {0, 1, 7, 13, 4099};

bool is_float(dtype t) {
  return t == dtype::float32 || t == dtype::float64 || t == dtype::float16 || t == dtype::bfloat16;
}

// ---- element codec (independent of mccl's own conversions) -----------------

uint16_t to_half_bits(double v) { // exact for the values used here
  if (v == 0)
    return std::signbit(v) ? 0x8000 : 0;
  float f = static_cast<float>(v);
  uint32_t b;
  std::memcpy(&b, &f, 4);
  uint32_t sign = (b >> 16) & 0x8000;
  int exp = static_cast<int>((b >> 23) & 0xff) - 127 + 15;
  uint32_t mant = b & 0x7fffff;
  // Round to nearest even at bit 13 (normal range only: inputs are small).
  uint32_t m = mant >> 13, rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (m & 1)))
    ++m;
  if (m == 0x400) {
    m = 0;
    ++exp;
  }
  return static_cast<uint16_t>(sign | static_cast<uint32_t>(exp) << 10 | m);
}

double from_half_bits(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  int mant = h & 0x3ff;
  double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  if (exp == 31)
    v = mant ? NAN : INFINITY;
  return (h & 0x8000) ? -v : v;
}

uint16_t to_bf16_bits(double v) {
  float f = static_cast<float>(v);
  uint32_t b;
  std::memcpy(&b, &f, 4);
  uint32_t rest = b & 0xffff, hi = b >> 16;
  if (rest > 0x8000 || (rest == 0x8000 && (hi & 1)))
    ++hi;
  return static_cast<uint16_t>(hi);
}

double from_bf16_bits(uint16_t h) {
  uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

/// Stores v (a value of the dtype's range, or a wrapped integer) at p[i].
void put(dtype t, void* p, std::size_t i, double v) {
  auto b = static_cast<uint8_t*>(p);
  switch (t) {
    case dtype::float32: { float x = static_cast<float>(v); std::memcpy(b + 4 * i, &x, 4); break; }
    case dtype::float64: std::memcpy(b + 8 * i, &v, 8); break;
    case dtype::float16: { auto x = to_half_bits(v); std::memcpy(b + 2 * i, &x, 2); break; }
    case dtype::bfloat16: { auto x = to_bf16_bits(v); std::memcpy(b + 2 * i, &x, 2); break; }
    case dtype::int8: b[i] = static_cast<uint8_t>(static_cast<int64_t>(v)); break;
    case dtype::uint8: b[i] = static_cast<uint8_t>(static_cast<int64_t>(v)); break;
    case dtype::boolean: b[i] = v != 0 ? 1 : 0; break;
    case dtype::int32: { auto x = static_cast<uint32_t>(static_cast<int64_t>(v)); std::memcpy(b + 4 * i, &x, 4); break; }
    case dtype::int64: { auto x = static_cast<int64_t>(v); std::memcpy(b + 8 * i, &x, 8); break; }
    case dtype::int16:
    case dtype::uint16: { auto x = static_cast<uint16_t>(static_cast<int64_t>(v)); std::memcpy(b + 2 * i, &x, 2); break; }
    case dtype::uint32: { auto x = static_cast<uint32_t>(static_cast<int64_t>(v)); std::memcpy(b + 4 * i, &x, 4); break; }
    case dtype::uint64: { auto x = static_cast<uint64_t>(static_cast<int64_t>(v)); std::memcpy(b + 8 * i, &x, 8); break; }
  }
}

double get(dtype t, const void* p, std::size_t i) {
  auto b = static_cast<const uint8_t*>(p);
  switch (t) {
    case dtype::float32: { float x; std::memcpy(&x, b + 4 * i, 4); return x; }
    case dtype::float64: { double x; std::memcpy(&x, b + 8 * i, 8); return x; }
    case dtype::float16: { uint16_t x; std::memcpy(&x, b + 2 * i, 2); return from_half_bits(x); }
    case dtype::bfloat16: { uint16_t x; std::memcpy(&x, b + 2 * i, 2); return from_bf16_bits(x); }
    case dtype::int8: return static_cast<int8_t>(b[i]);
    case dtype::uint8: return b[i];
    case dtype::boolean: return b[i];
    case dtype::int32: { int32_t x; std::memcpy(&x, b + 4 * i, 4); return x; }
    case dtype::int64: { int64_t x; std::memcpy(&x, b + 8 * i, 8); return static_cast<double>(x); }
    case dtype::int16: { int16_t x; std::memcpy(&x, b + 2 * i, 2); return x; }
    case dtype::uint16: { uint16_t x; std::memcpy(&x, b + 2 * i, 2); return x; }
    case dtype::uint32: { uint32_t x; std::memcpy(&x, b + 4 * i, 4); return x; }
    case dtype::uint64: { uint64_t x; std::memcpy(&x, b + 8 * i, 8); return static_cast<double>(x); }
  }
  return 0;
}

/// Rank r's input element i for an op with reduction `op`.
double input(dtype t, redop op, int r, std::size_t i) {
  auto k = static_cast<int64_t>(r) * 37 + static_cast<int64_t>(i) * 11;
  if (t == dtype::boolean)
    return (k % 3) == 0 ? 1 : 0;
  if (op == redop::prod) {
    if (is_float(t)) { // powers of two and signs: products stay exact
      static const double f[] = {1, 2, -1, 0.5};
      return f[k % 4];
    }
    return static_cast<double>(k % 5) - 2;
  }
  if (op == redop::band || op == redop::bor || op == redop::bxor)
    return static_cast<double>((k * 2654435761ll) % 127);
  if (is_float(t))
    return static_cast<double>(k % 9) - 4;
  return t == dtype::uint8 ? static_cast<double>(k % 256) : static_cast<double>(k % 200) - 100;
}

/// Wraps an integer to the dtype's width, as the reducers do.
int64_t wrap(dtype t, int64_t v) {
  switch (t) {
    case dtype::int8: return static_cast<int8_t>(static_cast<uint8_t>(v));
    case dtype::uint8: return static_cast<uint8_t>(v);
    case dtype::int32: return static_cast<int32_t>(static_cast<uint32_t>(v));
    default: return v;
  }
}

/// The reduction over ranks 0..world-1 of input(..., i + offset).
double reference(dtype t, redop op, int world, std::size_t i) {
  if (t == dtype::boolean) {
    bool acc = input(t, op, 0, i) != 0;
    for (int r = 1; r < world; ++r) {
      bool v = input(t, op, r, i) != 0;
      if (op == redop::sum || op == redop::max || op == redop::bor) acc = acc || v;
      else if (op == redop::bxor) acc = acc != v;
      else acc = acc && v;
    }
    return acc;
  }
  if (is_float(t)) {
    double acc = input(t, op, 0, i);
    for (int r = 1; r < world; ++r) {
      double v = input(t, op, r, i);
      switch (op) {
        case redop::prod: acc *= v; break;
        case redop::min: acc = std::min(acc, v); break;
        case redop::max: acc = std::max(acc, v); break;
        default: acc += v;
      }
    }
    return op == redop::avg ? acc / world : acc;
  }
  auto acc = static_cast<int64_t>(input(t, op, 0, i));
  for (int r = 1; r < world; ++r) {
    auto v = static_cast<int64_t>(input(t, op, r, i));
    switch (op) {
      case redop::prod: acc = wrap(t, static_cast<int64_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(v))); break;
      case redop::min: acc = std::min(acc, v); break;
      case redop::max: acc = std::max(acc, v); break;
      case redop::band: acc &= v; break;
      case redop::bor: acc |= v; break;
      case redop::bxor: acc ^= v; break;
      default: acc = wrap(t, acc + v);
    }
  }
  return static_cast<double>(op == redop::avg ? wrap(t, acc) / world : wrap(t, acc));
}

bool close_enough(dtype t, redop op, double got, double want) {
  if (!is_float(t) || op != redop::avg)
    return got == want;
  double ulp = t == dtype::float32 ? 0x1p-23 : t == dtype::float64 ? 0x1p-52
             : t == dtype::float16 ? 0x1p-10 : 0x1p-7;
  return std::fabs(got - want) <= ulp * std::max(1.0, std::fabs(want));
}

using buffer = std::vector<uint8_t>;

buffer make(dtype t, std::size_t n) { return buffer(n * mccl::dtype_size(t) + 1, 0xAB); }

/// One op to issue, how to check it afterwards, and the buffers that must
/// live until it is done.
struct pending_op {
  mccl::work work;
  std::function<void()> check;
  std::vector<std::shared_ptr<buffer>> keep;
};

/// The operations a configuration runs (its MCCL_ALGO changes only some;
/// the others would repeat the built-in table's run).
enum ops : unsigned {
  allreduce_ops = 1,
  reduce_ops = 2,
  reduce_scatter_ops = 4, ///< and reduce_scatterv
  broadcast_ops = 8,
  allgather_ops = 16,     ///< and allgatherv
  /// gather, scatter, alltoall(v), send/recv: one algorithm each.
  other_ops = 32,
  every_op = 63,
};

/// Everything a rank runs, in the same order on every rank.
class rank_program {
public:
  rank_program(mccl::communicator& c, unsigned ops)
    : comm_(c), w_(c.size()), r_(c.rank()), ops_(ops) {}

  void run() {
    for (auto t : all_dtypes)
      for (auto n : all_counts)
        for (bool in_place : {false, true}) {
          for (auto op : all_redops)
            if (mccl::check_reduction(op, t).empty()) {
              if (ops_ & allreduce_ops)
                allreduce(t, op, n, in_place);
              if (ops_ & reduce_ops)
                reduce(t, op, n, in_place, static_cast<int>((n + 1) % w_));
              if (ops_ & reduce_scatter_ops) {
                reduce_scatter(t, op, n, in_place, false);
                reduce_scatter(t, op, n, in_place, true);
              }
            }
          if (ops_ & broadcast_ops)
            broadcast(t, n, in_place, static_cast<int>(n % w_));
          if (ops_ & allgather_ops) {
            allgather(t, n, in_place, false);
            allgather(t, n, in_place, true);
          }
          if (ops_ & other_ops) {
            gather(t, n, in_place, static_cast<int>((n + 2) % w_));
            scatter(t, n, in_place, static_cast<int>((n + 3) % w_));
            alltoall(t, n, in_place);
            alltoallv(t, n);
            send_recv(t, n, in_place);
          }
          flush();
        }
    // Large: a prime count spanning hundreds of chunks on every path.
    for (auto t : {dtype::float32, dtype::bfloat16, dtype::int64})
      for (bool in_place : {false, true})
        allreduce(t, redop::sum, 100003, in_place);
    flush();
    comm_.barrier().wait();
  }

private:
  std::string where(const char* op, dtype t, std::size_t n, bool in_place, const char* extra = "") {
    std::ostringstream o;
    o << op << " " << mccl::to_string(t) << " count " << n << (in_place ? " in place" : " out of place")
      << extra << ", rank " << r_ << " of " << w_;
    return o.str();
  }

  void issue(mccl::work w, std::function<void()> check, std::vector<std::shared_ptr<buffer>> keep) {
    batch_.push_back({std::move(w), std::move(check), std::move(keep)});
    if (batch_.size() >= 48)
      flush();
  }

  void flush() {
    for (auto& p : batch_) {
      try {
        p.work.wait();
        p.check();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r_ << ": " << e.what();
      }
    }
    batch_.clear();
  }

  template <class F>
  void expect_each(const std::string& what, std::size_t n, dtype t, redop op, F&& pair) {
    for (std::size_t i = 0; i < n; ++i) {
      auto [got, want] = pair(i);
      if (!close_enough(t, op, got, want)) {
        ADD_FAILURE() << what << ", " << mccl::to_string(op) << ": element " << i << " is " << got
                      << ", expected " << want;
        return;
      }
    }
  }

  void allreduce(dtype t, redop op, std::size_t n, bool in_place) {
    auto in = std::make_shared<buffer>(make(t, n));
    for (std::size_t i = 0; i < n; ++i)
      put(t, in->data(), i, input(t, op, r_, i));
    auto out = in_place ? in : std::make_shared<buffer>(make(t, n));
    auto w = comm_.allreduce(in->data(), out->data(), n, t, op);
    issue(w, [=] {
      expect_each(where("allreduce", t, n, in_place) + " (" + w.metrics().algorithm + ")", n, t, op,
                  [&](std::size_t i) {
                    return std::pair{get(t, out->data(), i), reference(t, op, w_, i)};
                  });
    }, {in, out});
  }

  void reduce(dtype t, redop op, std::size_t n, bool in_place, int root) {
    auto in = std::make_shared<buffer>(make(t, n));
    for (std::size_t i = 0; i < n; ++i)
      put(t, in->data(), i, input(t, op, r_, i));
    auto out = in_place ? in : std::make_shared<buffer>(make(t, n));
    auto w = comm_.reduce(in->data(), out->data(), n, t, op, root);
    issue(w, [=] {
      if (r_ != root)
        return;
      expect_each(where("reduce", t, n, in_place) + " (" + w.metrics().algorithm + ")", n, t, op,
                  [&](std::size_t i) {
                    return std::pair{get(t, out->data(), i), reference(t, op, w_, i)};
                  });
    }, {in, out});
  }

  /// Per-rank counts for the v-variants: uneven, some empty.
  std::vector<std::size_t> vcounts(std::size_t n) const {
    std::vector<std::size_t> c(static_cast<std::size_t>(w_));
    for (int k = 0; k < w_; ++k)
      c[k] = n == 0 ? 0 : (n + static_cast<std::size_t>(k) * 5) % (n + 3);
    return c;
  }

  static std::vector<std::size_t> offsets(const std::vector<std::size_t>& c) {
    std::vector<std::size_t> o(c.size() + 1, 0);
    for (std::size_t k = 0; k < c.size(); ++k)
      o[k + 1] = o[k] + c[k];
    return o;
  }

  void reduce_scatter(dtype t, redop op, std::size_t n, bool in_place, bool v) {
    auto counts = v ? vcounts(n) : std::vector<std::size_t>(static_cast<std::size_t>(w_), n);
    auto off = offsets(counts);
    auto total = off.back();
    auto in = std::make_shared<buffer>(make(t, total));
    for (std::size_t i = 0; i < total; ++i)
      put(t, in->data(), i, input(t, op, r_, i));
    auto e = mccl::dtype_size(t);
    auto out = in_place ? in : std::make_shared<buffer>(make(t, counts[r_]));
    void* recv = in_place ? in->data() + off[r_] * e : out->data();
    auto w = v ? comm_.reduce_scatterv(in->data(), recv, counts, t, op)
               : comm_.reduce_scatter(in->data(), recv, n, t, op);
    issue(w, [=] {
      expect_each(where(v ? "reduce_scatterv" : "reduce_scatter", t, n, in_place) + " ("
                    + w.metrics().algorithm + ")",
                  counts[r_], t, op, [&](std::size_t i) {
                    return std::pair{get(t, recv, i), reference(t, op, w_, off[r_] + i)};
                  });
    }, {in, out});
  }

  void broadcast(dtype t, std::size_t n, bool in_place, int root) {
    auto in = std::make_shared<buffer>(make(t, n));
    for (std::size_t i = 0; i < n; ++i)
      put(t, in->data(), i, input(t, redop::sum, r_, i));
    auto out = in_place ? in : std::make_shared<buffer>(make(t, n));
    auto w = comm_.broadcast(in->data(), out->data(), n, t, root);
    issue(w, [=] {
      auto want = make_input(t, root, n);
      expect_each(where("broadcast", t, n, in_place) + " (" + w.metrics().algorithm + ")", n, t,
                  redop::sum, [&](std::size_t i) {
                    return std::pair{get(t, out->data(), i), get(t, want.data(), i)};
                  });
    }, {in, out});
  }

  static buffer make_input(dtype t, int r, std::size_t n, std::size_t first = 0) {
    auto b = make(t, n);
    for (std::size_t i = 0; i < n; ++i)
      put(t, b.data(), i, input(t, redop::sum, r, first + i));
    return b;
  }

  void allgather(dtype t, std::size_t n, bool in_place, bool v) {
    auto counts = v ? vcounts(n) : std::vector<std::size_t>(static_cast<std::size_t>(w_), n);
    auto off = offsets(counts);
    auto e = mccl::dtype_size(t);
    auto out = std::make_shared<buffer>(make(t, off.back()));
    auto mine = std::make_shared<buffer>(make_input(t, r_, counts[r_]));
    const void* send = mine->data();
    if (in_place) {
      std::memcpy(out->data() + off[r_] * e, mine->data(), counts[r_] * e);
      send = out->data() + off[r_] * e;
    }
    auto w = v ? comm_.allgatherv(send, out->data(), counts, t) : comm_.allgather(send, out->data(), n, t);
    issue(w, [=] {
      for (int k = 0; k < w_; ++k) {
        auto want = make_input(t, k, counts[k]);
        expect_each(where(v ? "allgatherv" : "allgather", t, n, in_place) + " (" + w.metrics().algorithm
                      + "), block of rank " + std::to_string(k),
                    counts[k], t, redop::sum, [&](std::size_t i) {
                      return std::pair{get(t, out->data(), off[k] + i), get(t, want.data(), i)};
                    });
      }
    }, {out, mine});
  }

  void gather(dtype t, std::size_t n, bool in_place, int root) {
    auto e = mccl::dtype_size(t);
    auto out = std::make_shared<buffer>(make(t, n * w_));
    auto mine = std::make_shared<buffer>(make_input(t, r_, n));
    const void* send = mine->data();
    if (in_place && r_ == root) {
      std::memcpy(out->data() + r_ * n * e, mine->data(), n * e);
      send = out->data() + r_ * n * e;
    }
    auto w = comm_.gather(send, out->data(), n, t, root);
    issue(w, [=] {
      if (r_ != root)
        return;
      for (int k = 0; k < w_; ++k) {
        auto want = make_input(t, k, n);
        expect_each(where("gather", t, n, in_place) + ", block of rank " + std::to_string(k), n, t,
                    redop::sum, [&](std::size_t i) {
                      return std::pair{get(t, out->data(), k * n + i), get(t, want.data(), i)};
                    });
      }
    }, {out, mine});
  }

  void scatter(dtype t, std::size_t n, bool in_place, int root) {
    auto e = mccl::dtype_size(t);
    auto all = std::make_shared<buffer>(make_input(t, root, n * w_));
    auto out = std::make_shared<buffer>(make(t, n));
    void* recv = in_place && r_ == root ? all->data() + r_ * n * e : out->data();
    auto w = comm_.scatter(r_ == root ? all->data() : nullptr, recv, n, t, root);
    issue(w, [=] {
      auto want = make_input(t, root, n, r_ * n);
      expect_each(where("scatter", t, n, in_place), n, t, redop::sum, [&](std::size_t i) {
        return std::pair{get(t, recv, i), get(t, want.data(), i)};
      });
    }, {all, out});
  }

  void alltoall(dtype t, std::size_t n, bool in_place) {
    // Block j of rank r's input is input(r, j * n + i).
    auto in = std::make_shared<buffer>(make_input(t, r_, n * w_));
    auto out = in_place ? in : std::make_shared<buffer>(make(t, n * w_));
    auto w = comm_.alltoall(in->data(), out->data(), n, t);
    issue(w, [=] {
      for (int k = 0; k < w_; ++k) {
        auto want = make_input(t, k, n, r_ * n);
        expect_each(where("alltoall", t, n, in_place) + ", block from rank " + std::to_string(k), n, t,
                    redop::sum, [&](std::size_t i) {
                      return std::pair{get(t, out->data(), k * n + i), get(t, want.data(), i)};
                    });
      }
    }, {in, out});
  }

  /// Rank a sends rank b (a + 2b + n) % (n + 2) elements.
  std::size_t v_count(int a, int b, std::size_t n) const {
    return n == 0 ? 0 : (static_cast<std::size_t>(a) + 2 * static_cast<std::size_t>(b) + n) % (n + 2);
  }

  void alltoallv(dtype t, std::size_t n) {
    std::vector<std::size_t> sc(w_), rc(w_);
    for (int k = 0; k < w_; ++k) {
      sc[k] = v_count(r_, k, n);
      rc[k] = v_count(k, r_, n);
    }
    auto soff = offsets(sc), roff = offsets(rc);
    // The block for rank k holds input(r, 1000 * k + i).
    auto in = std::make_shared<buffer>(make(t, soff.back()));
    for (int k = 0; k < w_; ++k)
      for (std::size_t i = 0; i < sc[k]; ++i)
        put(t, in->data(), soff[k] + i, input(t, redop::sum, r_, 1000 * k + i));
    auto out = std::make_shared<buffer>(make(t, roff.back()));
    auto w = comm_.alltoallv(in->data(), sc, out->data(), rc, t);
    issue(w, [=] {
      for (int k = 0; k < w_; ++k)
        expect_each(where("alltoallv", t, n, false) + ", block from rank " + std::to_string(k), rc[k],
                    t, redop::sum, [&](std::size_t i) {
                      return std::pair{get(t, out->data(), roff[k] + i),
                                       get(t, make_input(t, k, 1, 1000 * r_ + i).data(), 0)};
                    });
    }, {in, out});
  }

  /// Every rank sends two tagged messages to every other rank and posts the
  /// receives in the opposite tag order (matching is by tag, not arrival).
  void send_recv(dtype t, std::size_t n, bool reverse) {
    if (w_ == 1)
      return;
    for (int k = 0; k < w_; ++k) {
      if (k == r_)
        continue;
      for (uint32_t tag : {1u, 2u}) {
        auto msg = std::make_shared<buffer>(make_input(t, r_, n, 100 * tag + 10 * k));
        issue(comm_.send(msg->data(), n, t, k, tag), [] {}, {msg});
      }
    }
    for (int k = 0; k < w_; ++k) {
      if (k == r_)
        continue;
      for (uint32_t tag : reverse ? std::vector<uint32_t>{2u, 1u} : std::vector<uint32_t>{1u, 2u}) {
        auto got = std::make_shared<buffer>(make(t, n));
        auto w = comm_.recv(got->data(), n, t, k, tag);
        issue(w, [=] {
          auto want = make_input(t, k, n, 100 * tag + 10 * r_);
          expect_each(where("recv", t, n, false) + " from rank " + std::to_string(k) + " tag "
                        + std::to_string(tag),
                      n, t, redop::sum, [&](std::size_t i) {
                        return std::pair{get(t, got->data(), i), get(t, want.data(), i)};
                      });
        }, {got});
      }
    }
  }

  mccl::communicator& comm_;
  int w_;
  int r_;
  unsigned ops_;
  std::vector<pending_op> batch_;
};

/// One algorithm configuration: MCCL_ALGO and the operations it changes;
/// with `host_of`, rank r of a world w acts as if on host host_of(r, w)
/// (MCCL_HOST_ID): shared memory inside such a host, TCP between them.
struct algo_config {
  const char* name;
  const char* algo;
  unsigned ops;
  int (*host_of)(int rank, int world) = nullptr;
  /// Every chunk between ranks of one host copied once, straight from the
  /// sender's memory (MCCL_SHM_SINGLE_COPY_BYTES=4K, the chunk size here).
  bool single_copy = false;
  /// Runs on the host board only (MCCL_ALGO names a board algorithm): not
  /// under MCCL_TRANSPORT=tcp, where it is refused.
  bool board_only = false;
};

constexpr const char* host_aware = "allreduce=hier;broadcast=hier;allgather=hier;reduce_scatter=hier";
constexpr unsigned flat_ops = allreduce_ops | reduce_ops | reduce_scatter_ops | broadcast_ops | allgather_ops;
constexpr unsigned host_aware_ops = allreduce_ops | reduce_scatter_ops | broadcast_ops | allgather_ops;

const algo_config configs[] = {
  {"table", "", every_op, nullptr, true},
  {"ring", "allreduce=ring;broadcast=tree;reduce=tree;allgather=ring;reduce_scatter=ring", flat_ops},
  {"rd", "allreduce=rd;broadcast=chain;reduce=ring;allgather=rd;reduce_scatter=rd", flat_ops},
  {"rabenseifner", "allreduce=rabenseifner;broadcast=scatter_allgather;reduce_scatter=halving",
   allreduce_ops | broadcast_ops | reduce_scatter_ops},
  {"oneshot", "allreduce=oneshot", allreduce_ops},
  {"direct", "allreduce=direct", allreduce_ops},
  // Every op the stage runs staged through the board, 4 KiB pieces
  // (MCCL_SHM_STAGE_BYTES below): 4099 and 100003 elements take many.
  {"board_stage", "allreduce=board_rs;reduce=board_rs;broadcast=board_stage;allgather=board_stage;reduce_scatter=board_stage",
   flat_ops, nullptr, false, true},
  {"bidir_ring", "allreduce=bidir_ring;allgather=bidir_ring", allreduce_ops | allgather_ops},
  // Two hosts, ranks alternating (3 ranks: 2 + 1, so one rank folds in).
  {"hier_alternating", host_aware, host_aware_ops, [](int r, int) { return r % 2; }},
  // Pairs of ranks over three hosts (8 ranks: 4 + 2 + 2).
  {"hier_pairs", host_aware, host_aware_ops, [](int r, int) { return r / 2 % 3; }, true},
};
constexpr int config_count = static_cast<int>(sizeof configs / sizeof configs[0]);

class Conformance : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(Conformance, MatchesTheReference) {
  auto [world, config_index] = GetParam();
  const auto& cfg = configs[config_index];
  const char* transport = std::getenv("MCCL_TRANSPORT");
  if (cfg.board_only && transport && std::string(transport) == "tcp")
    GTEST_SKIP() << cfg.name << " runs on the host board only, and over TCP there is none";
  mccl::runtime rt;
  mccl::config_overrides o;
  o.set("MCCL_CONNECT_TIMEOUT_MS", 20000);
  o.set("MCCL_TIMEOUT_MS", 60000);
  o.set("MCCL_CHUNK_BYTES", 4096); // the smallest chunk: many chunks per transfer
  o.set("MCCL_LOG_LEVEL", "warn");
  o.set("MCCL_ALGO", cfg.algo);
  o.set("MCCL_SHM_SINGLE_COPY_BYTES", cfg.single_copy ? "4K" : "0");
  if (cfg.board_only)
    o.set("MCCL_SHM_STAGE_BYTES", "4K");
  auto settings_of = [&](int rank) {
    auto mine = o;
    if (cfg.host_of)
      mine.set("MCCL_HOST_ID", "host" + std::to_string(cfg.host_of(rank, world)));
    return mine;
  };
  mccl_test::run_ranks(rt, world, settings_of, [&](mccl::communicator& comm) {
    rank_program(comm, cfg.ops).run();
  });
}

INSTANTIATE_TEST_SUITE_P(EveryWorldAndAlgorithm, Conformance,
                         ::testing::Combine(::testing::Range(1, 9), ::testing::Range(0, config_count)),
                         [](const auto& info) {
                           return "world" + std::to_string(std::get<0>(info.param)) + "_"
                                  + configs[std::get<1>(info.param)].name;
                         });

TEST(ConformanceInputs, EveryPairOutsideTheDocumentedGapsIsSupported) {
  // The matrix above runs every (op, dtype) pair check_reduction accepts;
  // this pins which pairs those are, so none drops out unnoticed.
  for (auto t : all_dtypes)
    for (auto op : all_redops) {
      bool bitwise = op == redop::band || op == redop::bor || op == redop::bxor;
      bool undefined = (bitwise && is_float(t)) || (op == redop::avg && t == dtype::boolean);
      EXPECT_EQ(mccl::check_reduction(op, t).empty(), !undefined)
        << mccl::to_string(op) << " on " << mccl::to_string(t);
    }
}

} // namespace
