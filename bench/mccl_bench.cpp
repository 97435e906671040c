// mccl-bench: nccl-tests style benchmark of mccl collectives and of a
// point-to-point exchange.
//
// Run it under mcclrun (tools/mcclrun -n 4 -- build/bench/mccl-bench) or start
// each rank yourself with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set.
// Per size it prints bytes, element count, p50/p99 time (per iteration the
// slowest rank's time, as nccl-tests does), algbw, busbw, whether every
// element of every iteration matched the reference, and the algorithm that
// ran the op; --json writes the same as one JSON object per size. The
// table also says how long setting up took (the slowest rank, from the call
// to a communicator with its links ready) and finalizing (rank 0).
//
// Sizes follow nccl-tests: the size is the whole buffer (for allgather,
// reduce_scatter, alltoall, gather and scatter the gathered / full buffer of
// count * world elements, so each rank's count is size / world / element
// size; for sendrecv the buffer each rank sends). busbw = algbw * 2(n-1)/n
// for allreduce, (n-1)/n for allgather, reduce_scatter, alltoall, gather and
// scatter, 1 for broadcast, reduce and sendrecv.
// allreduce, broadcast, reduce, allgather, reduce_scatter and alltoall run
// in place unless --outofplace is given; gather, scatter and sendrecv run
// out of place. The root of rooted ops is -r (default 0); the reduction of
// reducing ops is --redop (default sum).

#include <mccl/mccl.hpp>

#include "bench_common.hpp"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace bench;

/// mccl-bench runs every op bench_common.hpp knows.
const std::vector<bench_op> supported_ops = {
  bench_op::allreduce, bench_op::broadcast, bench_op::reduce,  bench_op::allgather,
  bench_op::reduce_scatter, bench_op::alltoall, bench_op::gather, bench_op::scatter,
  bench_op::barrier,   bench_op::sendrecv};

/// Ops that mccl-bench runs both in place and out of place.
bool has_both_forms(bench_op op) {
  return op == bench_op::allreduce || op == bench_op::broadcast || op == bench_op::reduce
         || op == bench_op::allgather || op == bench_op::reduce_scatter
         || op == bench_op::alltoall;
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
  {mccl::dtype::int16, "int16"},     {mccl::dtype::uint16, "uint16"},
  {mccl::dtype::uint32, "uint32"},   {mccl::dtype::uint64, "uint64"},
  {mccl::dtype::boolean, "bool"},    {mccl::dtype::float32, "float"},
  {mccl::dtype::float64, "double"},  {mccl::dtype::float16, "half"},
  {mccl::dtype::bfloat16, "bf16"},   {mccl::dtype::int32, "int"},
  {mccl::dtype::boolean, "boolean"},
};

constexpr mccl::redop all_redops[] = {mccl::redop::sum, mccl::redop::prod, mccl::redop::min,
                                      mccl::redop::max, mccl::redop::avg,  mccl::redop::band,
                                      mccl::redop::bor, mccl::redop::bxor};

enum class placement { by_op, in_place, out_of_place };

struct options {
  std::size_t min_bytes = 4;
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t factor = 4;
  int iters = 0;        // 0: chosen per size (or by -t)
  double seconds = 0;   // -t: time budget per size; 0: iteration counts
  int warmup = -1;
  bool check = true;
  bench_op op = bench_op::allreduce;
  mccl::dtype type = mccl::dtype::float32;
  mccl::redop red = mccl::redop::sum;
  bool red_given = false;
  placement place = placement::by_op;
  std::string algo; // "" = MCCL_ALGO from the environment, else the built-in table
  int root = 0;
  std::string json; // "" none, "-" stdout (instead of the table), else a file
  bool progress = false;
  int batch = 1;         // --batch: ops per iteration, each on a buffer of its own
  bool inflight = false; // --inflight: the batch is issued together, then waited
};

/// Whether this run of `o.op` is in place.
bool in_place(const options& o) {
  if (o.place == placement::by_op)
    return has_both_forms(o.op);
  return o.place == placement::in_place;
}

[[noreturn]] void usage(const char* why) {
  if (why) {
    std::fprintf(stderr, "mccl-bench: %s\n(mccl-bench --help lists the options)\n", why);
    std::exit(2);
  }
  std::fprintf(stdout,
               "usage: mccl-bench [-o OP] [-a ALGO] [-d DTYPE] [--redop OP] [-r ROOT]\n"
               "                  [--inplace | --outofplace] [-b MIN] [-e MAX] [-f FACTOR]\n"
               "                  [-n ITERS | -t SECONDS] [-w WARMUP] [--check | --no-check]\n"
               "                  [--batch K [--inflight]] [--json FILE] [--progress]\n"
               "  -o, --op OP       allreduce (default), broadcast, reduce, allgather,\n"
               "                    reduce_scatter, alltoall, gather, scatter, barrier,\n"
               "                    sendrecv (ranks 0-1, 2-3, ... exchange their buffers; with\n"
               "                    an odd number of ranks the last one sits out)\n"
               "  -a, --algo ALGO   run OP with this algorithm (passes MCCL_ALGO=\"OP=ALGO\" as an\n"
               "                    explicit setting); default: MCCL_ALGO from the environment,\n"
               "                    else mccl's built-in table. An algorithm that cannot run on\n"
               "                    this many ranks falls back to the table: the algorithm column\n"
               "                    shows what ran\n"
               "  -d, --dtype T     float32 (default), float64, float16, bfloat16, int8, uint8,\n"
               "                    int16, uint16, int32, uint32, int64, uint64, bool\n"
               "  --redop OP        reduction of allreduce, reduce and reduce_scatter: sum\n"
               "                    (default), prod, min, max, avg, band, bor, bxor\n"
               "  -r, --root R      root of broadcast, reduce, gather and scatter (default 0)\n"
               "  --inplace, --outofplace\n"
               "                    form of allreduce, broadcast, reduce, allgather,\n"
               "                    reduce_scatter and alltoall (default: in place); gather,\n"
               "                    scatter and sendrecv always run out of place\n"
               "  -b, -e, -f        sizes in bytes, with K/M/G suffixes (default -b 4 -e 64M -f 4);\n"
               "                    the size is the whole buffer (nccl-tests' convention)\n"
               "  -n ITERS          timed iterations per size (default: by size)\n"
               "  -t, --time SECS   instead of -n: time each size for about SECS seconds (at\n"
               "                    least 5 iterations; rank 0 decides, every rank follows)\n"
               "  -w WARMUP         warm-up iterations per size (default: by size)\n"
               "  --check           compare every element of every iteration with a locally\n"
               "                    computed reference (the default)\n"
               "  --no-check        skip that comparison\n"
               "  --batch K         K ops per iteration, each on a buffer of its own, issued\n"
               "                    one by one (each waited for before the next); the time of\n"
               "                    one op is the iteration's time / K (default 1)\n"
               "  --inflight        issue the batch together, then wait for all, as DDP does\n"
               "                    with its gradient buckets\n"
               "  --json FILE       also write one JSON object per size to FILE (JSON lines);\n"
               "                    \"-\": to stdout, instead of the table\n"
               "  --progress        print \"# running N bytes (i/k)\" to stderr before each size\n"
               "                    (the default when stderr is a terminal)\n"
               "  Ranks come from RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (as set by\n"
               "  mcclrun or torchrun).\n");
  std::exit(0);
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

double parse_seconds(const char* flag, const char* text) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (*text == '\0' || *end != '\0' || !(v > 0) || v > 86400)
    usage((std::string(flag) + " expects a number of seconds such as 0.5 or 10, got \"" + text
           + "\"")
            .c_str());
  return v;
}

bench_op parse_op_arg(const std::string& text) {
  if (auto op = parse_op(text, supported_ops))
    return *op;
  usage(("-o expects one of " + op_list(supported_ops) + ", got \"" + text + "\"").c_str());
}

mccl::dtype parse_dtype(const std::string& text) {
  for (const auto& n : dtype_names)
    if (text == n.name)
      return n.type;
  usage(("-d expects float32, float64, float16, bfloat16, int8, uint8, int32, int64 or bool, got \""
         + text + "\"")
          .c_str());
}

mccl::redop parse_redop(const std::string& text) {
  for (auto r : all_redops)
    if (text == mccl::to_string(r))
      return r;
  usage(("--redop expects sum, prod, min, max, avg, band, bor or bxor, got \"" + text + "\"").c_str());
}

options parse(int argc, char** argv) {
  options o;
  bool iters_given = false;
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
    else if (a == "-n") {
      o.iters = parse_int("-n", value());
      iters_given = true;
    }
    else if (a == "-t" || a == "--time") o.seconds = parse_seconds(a.c_str(), value());
    else if (a == "-w") o.warmup = parse_int("-w", value());
    else if (a == "-o" || a == "--op") o.op = parse_op_arg(value());
    else if (a == "-a" || a == "--algo") {
      o.algo = value();
      if (o.algo.empty())
        usage((a + " expects an algorithm name").c_str());
    }
    else if (a == "-d" || a == "--dtype") o.type = parse_dtype(value());
    else if (a == "--redop") {
      o.red = parse_redop(value());
      o.red_given = true;
    }
    else if (a == "-r" || a == "--root") o.root = parse_int("-r", value());
    else if (a == "--inplace") o.place = placement::in_place;
    else if (a == "--outofplace") o.place = placement::out_of_place;
    else if (a == "--check") o.check = true;
    else if (a == "--no-check") o.check = false;
    else if (a == "--json") {
      o.json = value();
      if (o.json.empty())
        usage("--json expects a file name or -");
    }
    else if (a == "--progress") o.progress = true;
    else if (a == "--batch") {
      o.batch = parse_int(a.c_str(), value());
      if (o.batch < 1 || o.batch > 1024)
        usage("--batch expects 1..1024 ops");
    }
    else if (a == "--inflight") o.inflight = true;
    else if (a == "-h" || a == "--help") usage(nullptr);
    else usage(("unknown option " + a).c_str());
  }
  if (o.factor < 2)
    usage("-f must be at least 2");
  if (o.min_bytes > o.max_bytes)
    usage("-b must not exceed -e");
  if (iters_given && o.seconds > 0)
    usage("-n and -t exclude each other (-n: a fixed count, -t: a time budget per size)");
  if (iters_given && o.iters == 0)
    usage("-n must be at least 1");
  std::string op = std::string("-o ") + to_string(o.op);
  if (o.place == placement::in_place && !has_both_forms(o.op))
    usage((op + " has no in-place form here (--inplace applies to allreduce, broadcast, reduce, "
                "allgather, reduce_scatter and alltoall)")
            .c_str());
  if (o.place == placement::out_of_place && o.op == bench_op::barrier)
    usage("-o barrier has no buffers: --outofplace does not apply");
  if (o.red_given && !reduces(o.op))
    usage((op + " does not reduce (--redop applies to allreduce, reduce and reduce_scatter)").c_str());
  if (reduces(o.op)) {
    auto why = mccl::check_reduction(o.red, o.type);
    if (!why.empty())
      usage((op + " -d " + mccl::to_string(o.type) + " --redop " + mccl::to_string(o.red) + ": "
             + why)
              .c_str());
  }
  return o;
}

/// -t: at least this many timed iterations, at most the second.
constexpr int min_timed_iters = 5;
constexpr int max_timed_iters = 1000000;

// ---- deterministic data ----------------------------------------------------
//
// Ops that move data: element j of rank r's input holds value(r, j) =
// (r + 1) * (j % 7 + 1), small positive integers (never 0, the fill of
// receive buffers), so the expected result is known without communication.
//
// Reducing ops: element j of rank r's input is reduction_input(op, r, j),
// chosen per reduction so that the result is exact in every dtype and the
// reference is a plain int64 fold over ranks:
//   sum   (r + 1) * (j % 7 + 1)
//   prod  2 where (r + j) % 3 == 0 (for r < 24), else 1: a power of two
//   min, max  (5 r + j) % 13
//   avg   c = j % 3 + 1, plus 1 on even and minus 1 on odd ranks of each pair
//         (0,1), (2,3), ...: the sum is world * c, the mean exactly c
//   band  0x7f with bit (r + j) % 7 cleared
//   bor, bxor  bit (r + j) % 7, and on ranks 0 and 1 also bit j % 5 (set
//         twice, so or, xor and sum differ)
// bool inputs are 0 or 1: element j is 0 on j % 3 of the ranks (all of them
// in smaller worlds; which ones rotates with j), so every world has
// elements where and, or and xor differ from each other. Integer dtypes
// wrap modulo 2^bits on both sides. Buffers are compared byte for byte with
// the reference.


int64_t reduction_input(mccl::redop op, mccl::dtype t, int world, int rank, std::size_t j) {
  auto r = static_cast<std::size_t>(rank);
  if (t == mccl::dtype::boolean)
    return (r + j) % static_cast<std::size_t>(world) < j % 3 ? 0 : 1;
  switch (op) {
    case mccl::redop::sum: return value(rank, j);
    case mccl::redop::prod: return rank < 24 && (r + j) % 3 == 0 ? 2 : 1;
    case mccl::redop::min:
    case mccl::redop::max: return static_cast<int64_t>((5 * r + j) % 13);
    case mccl::redop::avg: {
      auto c = static_cast<int64_t>(j % 3 + 1);
      if (rank >= world / 2 * 2)
        return c; // the unpaired last rank of an odd world
      return rank % 2 == 0 ? c + 1 : c - 1;
    }
    case mccl::redop::band: return 0x7f & ~(int64_t{1} << ((r + j) % 7));
    case mccl::redop::bor:
    case mccl::redop::bxor:
      return (int64_t{1} << ((r + j) % 7)) | (rank < 2 ? int64_t{1} << (j % 5) : 0);
  }
  return 0;
}

/// The reduction over every rank of reduction_input(op, t, world, r, j).
int64_t reduction_result(mccl::redop op, mccl::dtype t, int world, std::size_t j) {
  int64_t acc = reduction_input(op, t, world, 0, j);
  for (int r = 1; r < world; ++r) {
    int64_t x = reduction_input(op, t, world, r, j);
    switch (op) {
      case mccl::redop::sum:
      case mccl::redop::avg: acc += x; break;
      case mccl::redop::prod: acc *= x; break;
      case mccl::redop::min: acc = std::min(acc, x); break;
      case mccl::redop::max: acc = std::max(acc, x); break;
      case mccl::redop::band: acc &= x; break;
      case mccl::redop::bor: acc |= x; break;
      case mccl::redop::bxor: acc ^= x; break;
    }
  }
  return op == mccl::redop::avg ? acc / world : acc;
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
    case mccl::dtype::int16:
    case mccl::dtype::uint16: {
      auto x = static_cast<uint16_t>(static_cast<uint64_t>(v));
      std::memcpy(p, &x, sizeof x);
      return;
    }
    case mccl::dtype::int32:
    case mccl::dtype::uint32: {
      auto x = static_cast<uint32_t>(static_cast<uint64_t>(v));
      std::memcpy(p, &x, sizeof x);
      return;
    }
    case mccl::dtype::int64:
    case mccl::dtype::uint64:
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
  bytes_t recv;                ///< the receive buffer (out of place; empty: none here)
  bool in_place = true;
  int peer = -1;                ///< sendrecv: the partner rank (-1: this rank sits out)
  std::size_t check_offset = 0; ///< bytes into the result buffer
  bytes_t expected;             ///< empty: nothing to check on this rank
};

/// The reported size of a requested size (whole elements, whole blocks).
std::size_t reported_bytes(bench_op op, mccl::dtype t, std::size_t size, int world) {
  std::size_t e = mccl::dtype_size(t);
  if (op == bench_op::barrier)
    return 0;
  if (!blocked(op))
    return std::max<std::size_t>(1, size / e) * e;
  auto w = static_cast<std::size_t>(world);
  return std::max<std::size_t>(1, size / w / e) * w * e;
}

/// The requested sizes -b, -b*f, ... <= -e, less those that round to a size
/// already in the list.
std::vector<std::size_t> sweep_sizes(const options& o, int world) {
  std::vector<std::size_t> sizes;
  std::size_t last = 0;
  for (std::size_t size = o.min_bytes; size <= o.max_bytes; size *= o.factor) {
    std::size_t b = reported_bytes(o.op, o.type, size, world);
    if (o.op == bench_op::barrier) {
      sizes.push_back(size); // one row: a barrier has no size
      break;
    }
    if (b != last)
      sizes.push_back(size);
    last = b;
    if (size > o.max_bytes / o.factor)
      break;
  }
  return sizes;
}

/// Receive buffers of out-of-place reductions start as this byte: no
/// reduction_result() in any dtype (or a non-integer float), so a result
/// that was never written cannot pass the check.
constexpr unsigned char reduction_fill = 0xa5;

plan make_plan(const options& o, std::size_t size, int rank, int world) {
  plan p;
  const bench_op op = o.op;
  const mccl::dtype t = o.type;
  const int root = o.root;
  std::size_t e = mccl::dtype_size(t);
  p.in_place = in_place(o);
  auto mine = [rank](std::size_t j) { return value(rank, j); };
  auto sentinel = [](std::size_t) { return int64_t{0}; }; // never a value (all are >= 1)
  auto reduction_in = [&](std::size_t j) { return reduction_input(o.red, t, world, rank, j); };
  auto reduction_out = [&](std::size_t j) { return reduction_result(o.red, t, world, j); };
  if (op == bench_op::barrier)
    return p;
  if (!blocked(op)) {
    std::size_t n = std::max<std::size_t>(1, size / e);
    p.count = p.total_count = n;
    p.bytes = n * e;
    switch (op) {
      case bench_op::allreduce:
      case bench_op::reduce: {
        p.send = make(t, n, reduction_in);
        bool result_here = op == bench_op::allreduce || rank == root;
        if (result_here) {
          p.expected = make(t, n, reduction_out);
          if (!p.in_place)
            p.recv = bytes_t(n * e, reduction_fill);
        }
        break;
      }
      case bench_op::broadcast:
        p.send = make(t, n, mine);
        if (!p.in_place)
          p.recv = make(t, n, sentinel);
        p.expected = make(t, n, [root](std::size_t j) { return value(root, j); });
        break;
      case bench_op::sendrecv: {
        p.in_place = false;
        p.send = make(t, n, mine);
        int partner = rank ^ 1;
        if (partner < world) {
          p.peer = partner;
          p.recv = make(t, n, sentinel);
          p.expected = make(t, n, [partner](std::size_t j) { return value(partner, j); });
        }
        break;
      }
      default:
        break;
    }
    return p;
  }
  std::size_t c = std::max<std::size_t>(1, size / static_cast<std::size_t>(world) / e);
  std::size_t n = c * static_cast<std::size_t>(world);
  p.count = c;
  p.total_count = n;
  p.bytes = n * e;
  auto gathered = [c](std::size_t j) { return gathered_value(c, j); };
  switch (op) {
    case bench_op::allgather:
      if (p.in_place) {
        // This rank's block holds its input; the others must be overwritten.
        p.send = make(t, n, [&](std::size_t j) {
          return j / c == static_cast<std::size_t>(rank) ? value(rank, j % c) : 0;
        });
      } else {
        p.send = make(t, c, mine);
        p.recv = make(t, n, sentinel);
      }
      p.expected = make(t, n, gathered);
      break;
    case bench_op::reduce_scatter:
      p.send = make(t, n, reduction_in);
      if (p.in_place)
        p.check_offset = static_cast<std::size_t>(rank) * c * e;
      else
        p.recv = bytes_t(c * e, reduction_fill);
      p.expected = make(t, c, [&](std::size_t k) { return reduction_out(rank * c + k); });
      break;
    case bench_op::alltoall:
      // Block j of rank r goes to rank j: there, block r of the result.
      p.send = make(t, n, mine);
      if (!p.in_place)
        p.recv = make(t, n, sentinel);
      p.expected = make(t, n, [&](std::size_t j) { return alltoall_value(rank, c, j); });
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
      p.expected = make(t, c, [&](std::size_t k) { return scatter_value(root, rank, c, k); });
      break;
    default:
      break;
  }
  return p;
}

/// The work of one op: one handle, or a send and a receive for sendrecv.
struct launched {
  mccl::work first;
  mccl::work second;
};

/// Starts one op. In place it works on `buf`; out of place it reads `send`
/// and writes `buf` (null where this rank receives nothing).
launched start(mccl::communicator& comm, const options& o, const plan& p, unsigned char* buf,
               const unsigned char* send) {
  const mccl::dtype t = o.type;
  std::size_t e = mccl::dtype_size(t);
  std::size_t mine = static_cast<std::size_t>(comm.rank()) * p.count * e;
  const void* src = p.in_place ? buf : send;
  switch (o.op) {
    case bench_op::allreduce: return {comm.allreduce(src, buf, p.count, t, o.red), {}};
    case bench_op::broadcast: return {comm.broadcast(src, buf, p.count, t, o.root), {}};
    case bench_op::reduce: return {comm.reduce(src, buf, p.count, t, o.red, o.root), {}};
    case bench_op::allgather:
      return {comm.allgather(p.in_place ? buf + mine : send, buf, p.count, t), {}};
    case bench_op::reduce_scatter:
      return {comm.reduce_scatter(src, p.in_place ? buf + mine : buf, p.count, t, o.red), {}};
    case bench_op::alltoall: return {comm.alltoall(src, buf, p.count, t), {}};
    case bench_op::gather: return {comm.gather(send, buf, p.count, t, o.root), {}};
    case bench_op::scatter: return {comm.scatter(send, buf, p.count, t, o.root), {}};
    case bench_op::barrier: return {comm.barrier(), {}};
    case bench_op::sendrecv: {
      if (p.peer < 0)
        return {};
      // Receive posted first, then the send; one exchange is both done.
      auto r = comm.recv(buf, p.count, t, p.peer);
      auto s = comm.send(send, p.count, t, p.peer);
      return {s, r};
    }
  }
  return {};
}

/// v rounded to a nanosecond when v is in microseconds (prints as 73.412).
double to_ns(double v) {
  return std::round(v * 1000.0) / 1000.0;
}

} // namespace

int main(int argc, char** argv) {
  auto opt = parse(argc, argv);
  std::FILE* json_out = nullptr;
  bool json_file = false;
  bool table = opt.json != "-";
  try {
    auto co = mccl::comm_options_from_env();
    // Rank 0 opens the file before the communicator exists, so a bad path
    // fails at once.
    if (co.rank == 0 && !opt.json.empty()) {
      if (opt.json == "-") {
        json_out = stdout;
      } else {
        json_out = std::fopen(opt.json.c_str(), "w");
        if (json_out == nullptr) {
          std::fprintf(stderr, "mccl-bench: cannot write --json %s: %s\n", opt.json.c_str(),
                       std::strerror(errno));
          return 2;
        }
        json_file = true;
      }
    }
    mccl::runtime rt;
    if (!opt.algo.empty())
      co.overrides.set("MCCL_ALGO", std::string(to_string(opt.op)) + "=" + opt.algo);
    auto setup_began = std::chrono::steady_clock::now();
    auto comm = rt.create_communicator(co);
    // Setting up, as this rank saw it: from the call to a communicator whose
    // links are ready; the table reports the slowest rank's.
    double setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_began).count();
    int rank = comm.rank();
    int world = comm.size();
    comm.allreduce(&setup_s, 1, mccl::redop::max).wait();
    if (rooted(opt.op) && opt.root >= world)
      throw mccl::error(mccl::errc::invalid_argument,
                        "-r " + std::to_string(opt.root) + " is not a rank of " + std::to_string(world));
    if (opt.op == bench_op::sendrecv && world < 2)
      throw mccl::error(mccl::errc::invalid_argument,
                        "-o sendrecv needs at least 2 ranks, this run has " + std::to_string(world));
    const auto& spec = comm.settings().algo;
    // What chose the algorithm, for the JSON "variant" key.
    std::string variant = !opt.algo.empty() ? opt.algo
                          : spec.empty()   ? std::string("table")
                                           : "MCCL_ALGO=" + spec.text;
    const char* dtype_text = opt.op == bench_op::barrier ? "none" : mccl::to_string(opt.type);
    const char* redop_text = reduces(opt.op) ? mccl::to_string(opt.red) : "none";
    bool data_op = opt.op != bench_op::barrier;
    if (rank == 0 && table) {
      std::string what = to_string(opt.op);
      if (data_op) {
        what += std::string(", dtype ") + dtype_text + ", redop " + redop_text;
        if (rooted(opt.op))
          what += ", root " + std::to_string(opt.root);
        what += in_place(opt) ? ", in place" : ", out of place";
        if (opt.op == bench_op::sendrecv) {
          what += ", pairs (0,1)";
          if (world > 3)
            what += world > 5 ? " (2,3) ..." : " (2,3)";
          if (world % 2 == 1)
            what += ", rank " + std::to_string(world - 1) + " idle";
        }
      }
      if (opt.seconds > 0) {
        char budget[64];
        std::snprintf(budget, sizeof budget, ", %g s per size", opt.seconds);
        what += budget;
      }
      if (opt.batch > 1)
        what += ", batches of " + std::to_string(opt.batch) + " ops "
                + (opt.inflight ? "issued together" : "one by one") + " (times per op)";
      std::string algo = !opt.algo.empty() ? "algorithm " + opt.algo + " forced (MCCL_ALGO=\"" + spec.text + "\")"
                         : spec.empty()   ? std::string("built-in algorithm table")
                                          : "MCCL_ALGO=\"" + spec.text + "\" from the environment";
      std::printf("# mccl-bench: %s, %d rank(s), %s\n", what.c_str(), world, algo.c_str());
      std::printf("# set up in %.3f s (the slowest rank)\n", setup_s);
      std::printf("# %12s %12s %10s %10s %12s %12s %6s  %s\n", "bytes", "count", "p50(us)",
                  "p99(us)", "algbw(GB/s)", "busbw(GB/s)", "check", "algorithm");
      std::fflush(stdout);
    }
    bool progress = rank == 0 && (opt.progress || isatty(STDERR_FILENO));
    bool all_ok = true;
    std::vector<std::string> fallbacks; // sizes where the forced algorithm did not run
    auto sizes = sweep_sizes(opt, world);
    for (std::size_t si = 0; si < sizes.size(); ++si) {
      plan p = make_plan(opt, sizes[si], rank, world);
      if (progress) {
        std::fprintf(stderr, "# running %zu bytes (%zu/%zu)\n", p.bytes, si + 1, sizes.size());
        std::fflush(stderr);
      }
      int iters = opt.iters > 0 ? opt.iters : default_iters(p.bytes);
      int warmup = opt.warmup >= 0 ? opt.warmup : std::max(2, iters / 10);
      // One buffer per op of the batch; each iteration starts them all from
      // the same inputs.
      std::vector<bytes_t> bufs(static_cast<std::size_t>(opt.batch),
                                bytes_t(p.in_place ? p.send.size() : p.recv.size()));
      const bytes_t& init = p.in_place ? p.send : p.recv;
      const unsigned char* send = p.send.empty() ? nullptr : p.send.data();
      std::vector<double> times;
      int bad = 0;
      std::string algorithm;
      int inline_runs = 0;    // iterations this rank ran on its own thread
      int op_thread_runs = 0; // ... on its communicator's op thread
      // Messages to op actors and thread wake-ups during the timed ops
      // (not the barrier before each iteration), on this rank.
      uint64_t actor_messages = 0, thread_wakeups = 0, link_turns = 0, link_chunks = 0;
      std::vector<launched> ls(bufs.size());
      // One iteration: the time from starting the ops to the completion of
      // the last on this rank, per op, in microseconds.
      auto once = [&]() -> double {
        // Every iteration starts from the same inputs, so a stale result
        // from the previous iteration cannot pass the check.
        if (!init.empty())
          for (auto& buf : bufs)
            std::memcpy(buf.data(), init.data(), init.size());
        comm.barrier().wait();
        auto before = mccl::get_actor_traffic();
        auto t0 = std::chrono::steady_clock::now();
        auto finish = [](launched& l) {
          if (l.first.valid())
            l.first.wait();
          if (l.second.valid())
            l.second.wait();
        };
        for (std::size_t k = 0; k < bufs.size(); ++k) {
          ls[k] = start(comm, opt, p, bufs[k].empty() ? nullptr : bufs[k].data(), send);
          if (!opt.inflight)
            finish(ls[k]);
        }
        for (auto& l : ls)
          finish(l);
        auto t1 = std::chrono::steady_clock::now();
        auto after = mccl::get_actor_traffic();
        actor_messages += after.actor_messages - before.actor_messages;
        thread_wakeups += after.thread_wakeups - before.thread_wakeups;
        link_turns += after.link_turns - before.link_turns;
        link_chunks += after.link_chunks - before.link_chunks;
        const auto& first = ls.front().first;
        if (first.valid()) {
          algorithm = first.metrics().algorithm;
          inline_runs += first.metrics().inline_run ? 1 : 0;
          op_thread_runs += first.metrics().op_thread ? 1 : 0;
        }
        if (opt.check && !p.expected.empty())
          for (auto& buf : bufs)
            if (std::memcmp(buf.data() + p.check_offset, p.expected.data(), p.expected.size()) != 0)
              ++bad;
        return std::chrono::duration<double, std::micro>(t1 - t0).count() / static_cast<double>(bufs.size());
      };
      for (int it = 0; it < warmup; ++it)
        once();
      inline_runs = op_thread_runs = 0;
      actor_messages = thread_wakeups = link_turns = link_chunks = 0;
      if (opt.seconds > 0) {
        // Rank 0 decides before each iteration whether the budget allows
        // another and tells every rank, so all run the same count.
        auto begin = std::chrono::steady_clock::now();
        for (int it = 0;; ++it) {
          int32_t go = 0;
          if (rank == 0) {
            double used = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
            go = it < min_timed_iters || (it < max_timed_iters && used < opt.seconds) ? 1 : 0;
          }
          comm.broadcast(&go, 1, mccl::dtype::int32, 0).wait();
          if (!go)
            break;
          times.push_back(once());
        }
      } else {
        for (int it = 0; it < iters; ++it)
          times.push_back(once());
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
        bool checked = opt.check && data_op;
        // Shares of rank 0's timed iterations that ran inline on the
        // caller's thread and on the op thread (the rest ran on mccl's
        // actors, e.g. because a peer ran ahead).
        auto pct = [&](int n) {
          return times.empty() ? 0 : static_cast<int>(100.0 * n / static_cast<double>(times.size()) + 0.5);
        };
        int inline_pct = pct(inline_runs), op_thread_pct = pct(op_thread_runs);
        std::string where;
        if (inline_pct > 0)
          where += "inline " + std::to_string(inline_pct) + "%";
        if (op_thread_pct > 0)
          where += (where.empty() ? "" : ", ") + std::string("op thread ") + std::to_string(op_thread_pct) + "%";
        if (table) {
          std::printf("  %12zu %12zu %10.1f %10.1f %12.3f %12.3f %6s  %s%s\n", p.bytes, p.total_count,
                      p50, p99, algbw, busbw, !checked ? "-" : bad ? "WRONG" : "ok",
                      algorithm.c_str(), where.empty() ? "" : (" (" + where + ")").c_str());
          std::fflush(stdout);
        }
        if (json_out != nullptr) {
          nlohmann::ordered_json j;
          j["library"] = "mccl";
          j["variant"] = variant;
          j["op"] = to_string(opt.op);
          j["dtype"] = dtype_text;
          j["redop"] = redop_text;
          j["ranks"] = world;
          j["bytes"] = p.bytes;
          j["count"] = p.total_count;
          j["p50_us"] = to_ns(p50);
          j["p99_us"] = to_ns(p99);
          j["algbw_gbs"] = algbw;
          j["busbw_gbs"] = busbw;
          j["check"] = !checked ? "skipped" : bad ? "WRONG" : "ok";
          j["algorithm"] = algorithm;
          j["inline_pct"] = inline_pct;
          j["op_thread_pct"] = op_thread_pct;
          // Per op on rank 0 (docs/ARCHITECTURE.md: no thread hop on an op's path).
          double ops_run = static_cast<double>(times.size() * bufs.size());
          j["actor_messages_per_op"] = ops_run > 0 ? static_cast<double>(actor_messages) / ops_run : 0.0;
          j["thread_wakeups_per_op"] = ops_run > 0 ? static_cast<double>(thread_wakeups) / ops_run : 0.0;
          j["link_turns_per_op"] = ops_run > 0 ? static_cast<double>(link_turns) / ops_run : 0.0;
          j["link_chunks_per_op"] = ops_run > 0 ? static_cast<double>(link_chunks) / ops_run : 0.0;
          j["batch"] = opt.batch;
          j["inflight"] = opt.inflight;
          std::fprintf(json_out, "%s\n", j.dump().c_str());
          std::fflush(json_out);
        }
        if (!opt.algo.empty() && algorithm != opt.algo)
          fallbacks.push_back(std::to_string(p.bytes));
      }
    }
    if (rank == 0 && !fallbacks.empty()) {
      std::string sizes_text;
      for (const auto& s : fallbacks)
        sizes_text += (sizes_text.empty() ? "" : ", ") + s;
      // With --json - stdout holds only JSON lines.
      std::FILE* note = table ? stdout : stderr;
      std::fprintf(note,
                   "# note: %s %s did not run at %s bytes (it does not fit %d rank(s)); the "
                   "built-in table chose instead (see the algorithm column)\n",
                   to_string(opt.op), opt.algo.c_str(), sizes_text.c_str(), world);
      std::fflush(note);
    }
    auto finalize_began = std::chrono::steady_clock::now();
    comm.finalize();
    if (rank == 0 && table) {
      std::printf("# finalized in %.3f s (rank 0)\n",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - finalize_began).count());
      std::fflush(stdout);
    }
    if (json_file && std::fclose(json_out) != 0) {
      std::fprintf(stderr, "mccl-bench: writing --json %s failed: %s\n", opt.json.c_str(),
                   std::strerror(errno));
      return 1;
    }
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
