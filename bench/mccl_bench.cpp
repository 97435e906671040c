// mccl-bench: nccl-tests style benchmark of mccl collectives.
//
// Run it under mcclrun (tools/mcclrun -n 4 -- build/bench/mccl-bench) or start
// each rank yourself with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set.
// Per size it prints bytes, element count, p50/p99 time (per iteration the
// slowest rank's time, as nccl-tests does), algbw, busbw, whether every
// element of every iteration matched the reference, and the algorithm that
// ran the op.
//
// Sizes follow nccl-tests: the size is the whole buffer (for allgather,
// reduce_scatter, alltoall, gather and scatter the gathered / full buffer of
// count * world elements, so each rank's count is size / world / element
// size). busbw = algbw * 2(n-1)/n for allreduce, (n-1)/n for allgather,
// reduce_scatter, alltoall, gather and scatter, 1 for broadcast and reduce.
// Every op runs in place except gather and scatter (which have no in-place
// form); the root of rooted ops is -r (default 0); reductions are sums.

#include <mccl/mccl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

enum class bench_op { allreduce, broadcast, reduce, allgather, reduce_scatter, alltoall, gather,
                      scatter, barrier };

struct op_name {
  bench_op op;
  const char* name;
};

constexpr op_name op_names[] = {
  {bench_op::allreduce, "allreduce"},   {bench_op::broadcast, "broadcast"},
  {bench_op::reduce, "reduce"},         {bench_op::allgather, "allgather"},
  {bench_op::reduce_scatter, "reduce_scatter"}, {bench_op::alltoall, "alltoall"},
  {bench_op::gather, "gather"},         {bench_op::scatter, "scatter"},
  {bench_op::barrier, "barrier"},
};

const char* to_string(bench_op op) {
  for (const auto& n : op_names)
    if (n.op == op)
      return n.name;
  return "unknown";
}

bool reduces(bench_op op) {
  return op == bench_op::allreduce || op == bench_op::reduce || op == bench_op::reduce_scatter;
}

bool rooted(bench_op op) {
  return op == bench_op::broadcast || op == bench_op::reduce || op == bench_op::gather
         || op == bench_op::scatter;
}

/// True for ops whose size is the gathered / full buffer of count * world.
bool blocked(bench_op op) {
  return op == bench_op::allgather || op == bench_op::reduce_scatter || op == bench_op::alltoall
         || op == bench_op::gather || op == bench_op::scatter;
}

/// busbw / algbw, as in nccl-tests.
double bus_factor(bench_op op, int world) {
  double n = world;
  switch (op) {
    case bench_op::allreduce: return world > 1 ? 2.0 * (n - 1) / n : 0.0;
    case bench_op::broadcast:
    case bench_op::reduce: return 1.0;
    case bench_op::allgather:
    case bench_op::reduce_scatter:
    case bench_op::alltoall:
    case bench_op::gather:
    case bench_op::scatter: return (n - 1) / n;
    case bench_op::barrier: return 0.0;
  }
  return 0.0;
}

struct dtype_name {
  mccl::dtype type;
  const char* name;
};

// The canonical names first (mccl::to_string(dtype)), then aliases.
constexpr dtype_name dtype_names[] = {
  {mccl::dtype::float32, "float32"}, {mccl::dtype::float64, "float64"},
  {mccl::dtype::float16, "float16"}, {mccl::dtype::bfloat16, "bfloat16"},
  {mccl::dtype::int8, "int8"},       {mccl::dtype::uint8, "uint8"},
  {mccl::dtype::int32, "int32"},     {mccl::dtype::int64, "int64"},
  {mccl::dtype::boolean, "bool"},    {mccl::dtype::float32, "float"},
  {mccl::dtype::float64, "double"},  {mccl::dtype::float16, "half"},
  {mccl::dtype::bfloat16, "bf16"},   {mccl::dtype::int32, "int"},
  {mccl::dtype::boolean, "boolean"},
};

struct options {
  std::size_t min_bytes = 4;
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t factor = 4;
  int iters = 0;  // 0: chosen per size
  int warmup = -1;
  bool check = true;
  bench_op op = bench_op::allreduce;
  mccl::dtype type = mccl::dtype::float32;
  std::string algo; // "" = MCCL_ALGO from the environment, else the built-in table
  int root = 0;
};

[[noreturn]] void usage(const char* why) {
  if (why)
    std::fprintf(stderr, "mccl-bench: %s\n", why);
  std::fprintf(stderr,
               "usage: mccl-bench [-o OP] [-a ALGO] [-d DTYPE] [-r ROOT] [-b MIN] [-e MAX]\n"
               "                  [-f FACTOR] [-n ITERS] [-w WARMUP] [--no-check]\n"
               "  -o, --op OP       allreduce (default), broadcast, reduce, allgather,\n"
               "                    reduce_scatter, alltoall, gather, scatter, barrier\n"
               "  -a, --algo ALGO   run OP with this algorithm (passes MCCL_ALGO=\"OP=ALGO\" as an\n"
               "                    explicit setting); default: MCCL_ALGO from the environment,\n"
               "                    else mccl's built-in table. An algorithm that cannot run on\n"
               "                    this many ranks falls back to the table: the algorithm column\n"
               "                    shows what ran\n"
               "  -d, --dtype T     float32 (default), float64, float16, bfloat16, int8, uint8,\n"
               "                    int32, int64, bool (reductions: no float16/bfloat16)\n"
               "  -r, --root R      root of broadcast, reduce, gather and scatter (default 0)\n"
               "  -b, -e, -f        sizes in bytes, with K/M/G suffixes (default -b 4 -e 64M -f 4);\n"
               "                    the size is the whole buffer (nccl-tests' convention)\n"
               "  -n, -w            timed and warm-up iterations per size (default: by size)\n"
               "  --no-check        skip the comparison with the locally computed reference\n"
               "  Ranks come from RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (as set by\n"
               "  mcclrun or torchrun). Reductions are sums; ops run in place (gather and\n"
               "  scatter out of place).\n");
  std::exit(2);
}

std::size_t parse_size(const char* flag, const char* text) {
  auto v = mccl::parse_byte_size(text);
  if (!v || *v == 0)
    usage((std::string(flag) + " expects a byte size such as 4, 64K or 16M, got \"" + text + "\"").c_str());
  return *v;
}

int parse_int(const char* flag, const char* text) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 0 || v > 1000000)
    usage((std::string(flag) + " expects a count, got \"" + text + "\"").c_str());
  return static_cast<int>(v);
}

bench_op parse_op(const std::string& text) {
  for (const auto& n : op_names)
    if (text == n.name)
      return n.op;
  std::string known;
  for (const auto& n : op_names)
    known += (known.empty() ? "" : ", ") + std::string(n.name);
  usage(("-o expects one of " + known + ", got \"" + text + "\"").c_str());
}

mccl::dtype parse_dtype(const std::string& text) {
  for (const auto& n : dtype_names)
    if (text == n.name)
      return n.type;
  usage(("-d expects float32, float64, float16, bfloat16, int8, uint8, int32, int64 or bool, got \""
         + text + "\"")
          .c_str());
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc)
        usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "-b") o.min_bytes = parse_size("-b", value());
    else if (a == "-e") o.max_bytes = parse_size("-e", value());
    else if (a == "-f") o.factor = static_cast<std::size_t>(parse_int("-f", value()));
    else if (a == "-n") o.iters = parse_int("-n", value());
    else if (a == "-w") o.warmup = parse_int("-w", value());
    else if (a == "-o" || a == "--op") o.op = parse_op(value());
    else if (a == "-a" || a == "--algo") {
      o.algo = value();
      if (o.algo.empty())
        usage((a + " expects an algorithm name").c_str());
    }
    else if (a == "-d" || a == "--dtype") o.type = parse_dtype(value());
    else if (a == "-r" || a == "--root") o.root = parse_int("-r", value());
    else if (a == "--no-check") o.check = false;
    else if (a == "-h" || a == "--help") usage(nullptr);
    else usage(("unknown option " + a).c_str());
  }
  if (o.factor < 2)
    usage("-f must be at least 2");
  if (o.min_bytes > o.max_bytes)
    usage("-b must not exceed -e");
  if (reduces(o.op)) {
    auto why = mccl::check_reduction(mccl::redop::sum, o.type);
    if (!why.empty())
      usage((std::string("-o ") + to_string(o.op) + " -d " + mccl::to_string(o.type) + ": " + why).c_str());
  }
  return o;
}

/// Iterations for a size when -n is not given: enough for a stable median,
/// few enough that a 4-rank demo on 2 cores finishes in seconds.
int default_iters(std::size_t bytes) {
  if (bytes <= (64u << 10)) return 200;
  if (bytes <= (1u << 20)) return 50;
  if (bytes <= (16u << 20)) return 10;
  return 5;
}

// ---- deterministic data ----------------------------------------------------
//
// Element j of rank r's input holds value(r, j) = (r + 1) * (j % 7 + 1):
// small positive integers, so sums are exact in every float type and the
// reference is computed without communication. The sum over ranks of
// value(r, j) is world (world + 1) / 2 * (j % 7 + 1). Integer dtypes wrap
// modulo 2^bits on both sides, bool holds value != 0 (its sum is an or).
// Buffers are compared byte for byte with the reference.

int64_t value(int rank, std::size_t j) {
  return static_cast<int64_t>(rank + 1) * static_cast<int64_t>(j % 7 + 1);
}

int64_t ranks_sum(int world, std::size_t j) {
  return static_cast<int64_t>(world) * (world + 1) / 2 * static_cast<int64_t>(j % 7 + 1);
}

/// IEEE binary16 bits of v mod 2048 (exact: integers below 2048 need 11 bits).
uint16_t half_bits(int64_t v) {
  auto x = static_cast<uint32_t>(v % 2048);
  if (x == 0)
    return 0;
  int e = 31 - __builtin_clz(x);
  uint32_t mantissa = (x << (10 - e)) & 0x3ffu;
  return static_cast<uint16_t>(((e + 15) << 10) | mantissa);
}

/// Writes v as one element of type t at p.
void put(mccl::dtype t, unsigned char* p, int64_t v) {
  switch (t) {
    case mccl::dtype::float32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, sizeof f);
      return;
    }
    case mccl::dtype::float64: {
      double d = static_cast<double>(v);
      std::memcpy(p, &d, sizeof d);
      return;
    }
    case mccl::dtype::float16: {
      uint16_t h = half_bits(v);
      std::memcpy(p, &h, sizeof h);
      return;
    }
    case mccl::dtype::bfloat16: {
      float f = static_cast<float>(v);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      auto b = static_cast<uint16_t>(bits >> 16);
      std::memcpy(p, &b, sizeof b);
      return;
    }
    case mccl::dtype::int8:
    case mccl::dtype::uint8:
      *p = static_cast<unsigned char>(static_cast<uint64_t>(v) & 0xffu);
      return;
    case mccl::dtype::int32: {
      auto x = static_cast<uint32_t>(static_cast<uint64_t>(v));
      std::memcpy(p, &x, sizeof x);
      return;
    }
    case mccl::dtype::int64:
      std::memcpy(p, &v, sizeof v);
      return;
    case mccl::dtype::boolean:
      *p = v != 0 ? 1 : 0;
      return;
  }
}

using bytes_t = std::vector<unsigned char>;

/// n elements of type t, element j = f(j).
template <class F>
bytes_t make(mccl::dtype t, std::size_t n, F f) {
  std::size_t e = mccl::dtype_size(t);
  bytes_t out(n * e);
  for (std::size_t j = 0; j < n; ++j)
    put(t, out.data() + j * e, f(j));
  return out;
}

/// One size of one op on this rank: the buffers' initial contents and the
/// part of the result buffer that is checked, with its expected bytes.
struct plan {
  std::size_t count = 0;       ///< the count argument of the call
  std::size_t bytes = 0;       ///< the reported size (nccl-tests' convention)
  std::size_t total_count = 0; ///< elements in the reported size
  bytes_t send;                ///< the in-place buffer, or the send buffer
  bytes_t recv;                ///< the receive buffer (out of place only)
  bool in_place = true;
  std::size_t check_offset = 0; ///< bytes into the result buffer
  bytes_t expected;             ///< empty: nothing to check on this rank
};

plan make_plan(bench_op op, mccl::dtype t, std::size_t size, int rank, int world, int root) {
  plan p;
  std::size_t e = mccl::dtype_size(t);
  auto mine = [rank](std::size_t j) { return value(rank, j); };
  auto sentinel = [](std::size_t) { return int64_t{0}; }; // never a value (all are >= 1)
  if (op == bench_op::barrier)
    return p;
  if (!blocked(op)) {
    std::size_t n = std::max<std::size_t>(1, size / e);
    p.count = p.total_count = n;
    p.bytes = n * e;
    p.send = make(t, n, mine);
    if (op == bench_op::allreduce || (op == bench_op::reduce && rank == root))
      p.expected = make(t, n, [world](std::size_t j) { return ranks_sum(world, j); });
    else if (op == bench_op::broadcast)
      p.expected = make(t, n, [root](std::size_t j) { return value(root, j); });
    return p;
  }
  std::size_t c = std::max<std::size_t>(1, size / static_cast<std::size_t>(world) / e);
  std::size_t n = c * static_cast<std::size_t>(world);
  p.count = c;
  p.total_count = n;
  p.bytes = n * e;
  auto gathered = [c](std::size_t j) { return value(static_cast<int>(j / c), j % c); };
  switch (op) {
    case bench_op::allgather:
      // This rank's block holds its input; the others must be overwritten.
      p.send = make(t, n, [&](std::size_t j) {
        return j / c == static_cast<std::size_t>(rank) ? value(rank, j % c) : 0;
      });
      p.expected = make(t, n, gathered);
      break;
    case bench_op::reduce_scatter:
      p.send = make(t, n, mine);
      p.check_offset = static_cast<std::size_t>(rank) * c * e;
      p.expected = make(t, c, [&](std::size_t k) { return ranks_sum(world, rank * c + k); });
      break;
    case bench_op::alltoall:
      // Block j of rank r goes to rank j: there, block r of the result.
      p.send = make(t, n, mine);
      p.expected = make(t, n, [&](std::size_t j) { return value(static_cast<int>(j / c), rank * c + j % c); });
      break;
    case bench_op::gather:
      p.in_place = false;
      p.send = make(t, c, mine);
      if (rank == root) {
        p.recv = make(t, n, sentinel);
        p.expected = make(t, n, gathered);
      }
      break;
    case bench_op::scatter:
      p.in_place = false;
      if (rank == root)
        p.send = make(t, n, mine);
      p.recv = make(t, c, sentinel);
      p.expected = make(t, c, [&](std::size_t k) { return value(root, rank * c + k); });
      break;
    default:
      break;
  }
  return p;
}

/// Starts one op on `buf` (in place) or `send` -> `recv`.
mccl::work start(mccl::communicator& comm, bench_op op, mccl::dtype t, const plan& p,
                 unsigned char* buf, const unsigned char* send, unsigned char* recv, int root) {
  std::size_t e = mccl::dtype_size(t);
  std::size_t mine = static_cast<std::size_t>(comm.rank()) * p.count * e;
  switch (op) {
    case bench_op::allreduce: return comm.allreduce(buf, buf, p.count, t, mccl::redop::sum);
    case bench_op::broadcast: return comm.broadcast(buf, p.count, t, root);
    case bench_op::reduce: return comm.reduce(buf, buf, p.count, t, mccl::redop::sum, root);
    case bench_op::allgather: return comm.allgather(buf + mine, buf, p.count, t);
    case bench_op::reduce_scatter:
      return comm.reduce_scatter(buf, buf + mine, p.count, t, mccl::redop::sum);
    case bench_op::alltoall: return comm.alltoall(buf, buf, p.count, t);
    case bench_op::gather: return comm.gather(send, recv, p.count, t, root);
    case bench_op::scatter: return comm.scatter(send, recv, p.count, t, root);
    case bench_op::barrier: return comm.barrier();
  }
  return {};
}

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  auto idx = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size()))) ;
  return v[std::min(v.size() - 1, idx == 0 ? 0 : idx - 1)];
}

} // namespace

int main(int argc, char** argv) {
  auto opt = parse(argc, argv);
  try {
    mccl::runtime rt;
    auto co = mccl::comm_options_from_env();
    if (!opt.algo.empty())
      co.overrides.set("MCCL_ALGO", std::string(to_string(opt.op)) + "=" + opt.algo);
    auto comm = rt.create_communicator(co);
    int rank = comm.rank();
    int world = comm.size();
    if (rooted(opt.op) && opt.root >= world)
      throw mccl::error(mccl::errc::invalid_argument,
                        "-r " + std::to_string(opt.root) + " is not a rank of " + std::to_string(world));
    if (rank == 0) {
      std::string what = to_string(opt.op);
      if (opt.op != bench_op::barrier) {
        what += std::string(", ") + mccl::to_string(opt.type);
        if (reduces(opt.op))
          what += ", sum";
        if (rooted(opt.op))
          what += ", root " + std::to_string(opt.root);
        what += opt.op == bench_op::gather || opt.op == bench_op::scatter ? ", out of place"
                                                                          : ", in place";
      }
      const auto& spec = comm.settings().algo;
      std::string algo = !opt.algo.empty() ? "algorithm " + opt.algo + " forced (MCCL_ALGO=\"" + spec.text + "\")"
                         : spec.empty()   ? std::string("built-in algorithm table")
                                          : "MCCL_ALGO=\"" + spec.text + "\" from the environment";
      std::printf("# mccl-bench: %s, %d rank(s), %s\n", what.c_str(), world, algo.c_str());
      std::printf("# %12s %12s %10s %10s %12s %12s %6s  %s\n", "bytes", "count", "p50(us)",
                  "p99(us)", "algbw(GB/s)", "busbw(GB/s)", "check", "algorithm");
      std::fflush(stdout);
    }
    bool all_ok = true;
    std::vector<std::string> fallbacks; // sizes where the forced algorithm did not run
    std::size_t last_bytes = 0;
    for (std::size_t size = opt.min_bytes; size <= opt.max_bytes; size *= opt.factor) {
      bool last_size = size > opt.max_bytes / opt.factor || opt.op == bench_op::barrier;
      plan p = make_plan(opt.op, opt.type, size, rank, world, opt.root);
      // Rounding to whole elements per rank can give a size already measured.
      if (opt.op != bench_op::barrier && p.bytes == last_bytes) {
        if (last_size)
          break;
        continue;
      }
      last_bytes = p.bytes;
      int iters = opt.iters > 0 ? opt.iters : default_iters(p.bytes);
      int warmup = opt.warmup >= 0 ? opt.warmup : std::max(2, iters / 10);
      bytes_t buf(p.in_place ? p.send.size() : p.recv.size());
      unsigned char* result = buf.data();
      std::vector<double> times;
      int bad = 0;
      std::string algorithm;
      for (int it = 0; it < warmup + iters; ++it) {
        // Every iteration starts from the same inputs, so a stale result
        // from the previous iteration cannot pass the check.
        const bytes_t& init = p.in_place ? p.send : p.recv;
        if (!init.empty())
          std::memcpy(buf.data(), init.data(), init.size());
        comm.barrier().wait();
        auto t0 = std::chrono::steady_clock::now();
        auto w = start(comm, opt.op, opt.type, p, buf.data(), p.send.empty() ? nullptr : p.send.data(),
                       buf.empty() ? nullptr : buf.data(), opt.root);
        w.wait();
        auto t1 = std::chrono::steady_clock::now();
        if (it >= warmup)
          times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        if (it == warmup + iters - 1)
          algorithm = w.metrics().algorithm;
        if (opt.check && !p.expected.empty()
            && std::memcmp(result + p.check_offset, p.expected.data(), p.expected.size()) != 0)
          ++bad;
      }
      // The slowest rank defines each iteration's time; a rank that saw a
      // wrong element makes the size fail everywhere.
      comm.allreduce(times.data(), times.size(), mccl::redop::max).wait();
      comm.allreduce(&bad, 1, mccl::redop::max).wait();
      if (bad)
        all_ok = false;
      if (rank == 0) {
        double p50 = percentile(times, 50), p99 = percentile(times, 99);
        double algbw = p50 > 0 ? static_cast<double>(p.bytes) / (p50 * 1e-6) / 1e9 : 0.0;
        double busbw = algbw * bus_factor(opt.op, world);
        std::printf("  %12zu %12zu %10.1f %10.1f %12.3f %12.3f %6s  %s\n", p.bytes, p.total_count,
                    p50, p99, algbw, busbw,
                    !opt.check || opt.op == bench_op::barrier ? "-" : bad ? "WRONG" : "ok",
                    algorithm.c_str());
        std::fflush(stdout);
        if (!opt.algo.empty() && algorithm != opt.algo)
          fallbacks.push_back(std::to_string(p.bytes));
      }
      if (last_size)
        break;
    }
    if (rank == 0 && !fallbacks.empty()) {
      std::string sizes;
      for (const auto& s : fallbacks)
        sizes += (sizes.empty() ? "" : ", ") + s;
      std::printf("# note: %s %s did not run at %s bytes (it does not fit %d rank(s)); the "
                  "built-in table chose instead (see the algorithm column)\n",
                  to_string(opt.op), opt.algo.c_str(), sizes.c_str(), world);
      std::fflush(stdout);
    }
    comm.finalize();
    if (!all_ok) {
      if (rank == 0)
        std::fprintf(stderr, "mccl-bench: some results were WRONG\n");
      return 1;
    }
  } catch (const mccl::error& e) {
    std::fprintf(stderr, "mccl-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
