// gloo-bench: the mccl-bench harness around Gloo, for side-by-side figures.
//
// Run it under mcclrun exactly like mccl-bench
// (tools/mcclrun -n 2 -- build/bench/gloo-bench -a ring_chunked), or start each
// rank yourself with RANK, WORLD_SIZE and MASTER_PORT set. It measures what
// mccl-bench measures, with the same conventions and output columns:
//
//  - sizes are nccl-tests' (the whole buffer; for allgather, reduce_scatter and
//    alltoall the gathered / full buffer of count * world elements);
//  - every iteration starts from the same deterministic inputs, all ranks meet
//    in a Gloo barrier, then the op is timed; an iteration's time is the
//    slowest rank's (one Gloo allreduce-max over the time vectors after the
//    loop); p50 / p99 over the timed iterations;
//  - busbw = algbw * 2(n-1)/n for allreduce, (n-1)/n for allgather,
//    reduce_scatter and alltoall, 1 for broadcast;
//  - every element of every iteration is compared with a locally computed
//    reference (--no-check skips it); reductions are sums.
//
// Gloo setup: rendezvous through gloo::rendezvous::FileStore in the directory
// $GLOO_BENCH_DIR (default /tmp/gloo-bench-<MASTER_PORT>, one machine only);
// rank 0 removes the store's files and the directory once every rank is
// connected. Transport: gloo::transport::tcp on 127.0.0.1 (loopback only),
// asynchronous mode (the device's event loop; not Gloo's sync/busy-poll mode).
// The context timeout (--timeout, default 60 s) bounds every Gloo wait; a
// watchdog ends the process after twice that plus 10 s without progress,
// so a stuck run never hangs. A Gloo error is printed and the rank exits 1.
//
// Algorithms (-a; the algorithm column and the JSON "variant" name them):
//   allreduce       ring_chunked (default) gloo::AllreduceRingChunked
//                   ring                   gloo::AllreduceRing
//                   halving_doubling       gloo::AllreduceHalvingDoubling
//                   default                gloo::allreduce(), Gloo's choice (ring)
//                   bcube                  gloo::allreduce() with Algorithm::BCUBE
//   broadcast       default                gloo::broadcast()
//                   one_to_all             gloo::BroadcastOneToAll
//   allgather       default                gloo::allgather()
//                   ring                   gloo::AllgatherRing
//   reduce_scatter  halving_doubling       gloo::ReduceScatterHalvingDoubling
//   alltoall        default                gloo::alltoall()
//   barrier         default                gloo::barrier()
//                   all_to_one, all_to_all gloo::BarrierAllToOne / AllToAll
// The algorithm classes (Gloo's original API) are built once per size and run
// every iteration, as they are meant to be used; the function API's options
// (and their unbound buffers) are built in every call, as a caller such as
// PyTorch's ProcessGroupGloo does. The algorithm classes take int counts and
// byte sizes, so their sizes stop below 2 GiB. Everything runs in place
// except alltoall and the AllgatherRing variant, whose input is a separate
// buffer; reduce_scatter leaves each rank's block at the start of its buffer
// (Gloo's convention), which is where it is checked.
//
// --json FILE (- for stdout) adds one JSON object per size (JSONL), written by
// rank 0 only; with "--json -" the table goes to stderr.

#include "bench_common.hpp"

#include <gloo/algorithm.h>
#include <gloo/allgather.h>
#include <gloo/allgather_ring.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/barrier_all_to_one.h>
#include <gloo/broadcast.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

// ---- options -----------------------------------------------------------------

using namespace bench;

/// The ops gloo-bench runs.
const std::vector<bench_op> supported_ops = {bench_op::allreduce, bench_op::broadcast,
                                             bench_op::allgather, bench_op::reduce_scatter,
                                             bench_op::alltoall,  bench_op::barrier};

enum class dtype { float32, float64, float16, int8, uint8, int32, int64 };

struct dtype_name {
  dtype type;
  const char* name;
};

// The canonical names first, then aliases (as mccl-bench reads them).
constexpr dtype_name dtype_names[] = {
  {dtype::float32, "float32"}, {dtype::float64, "float64"}, {dtype::float16, "float16"},
  {dtype::int8, "int8"},       {dtype::uint8, "uint8"},     {dtype::int32, "int32"},
  {dtype::int64, "int64"},     {dtype::float32, "float"},   {dtype::float64, "double"},
  {dtype::float16, "half"},    {dtype::int32, "int"},
};

const char* to_string(dtype t) {
  for (const auto& n : dtype_names)
    if (n.type == t)
      return n.name;
  return "unknown";
}

/// One -a choice: the op it belongs to, its name, what runs.
struct variant {
  bench_op op;
  const char* name;
  const char* gloo; ///< the Gloo class or function
  bool in_place;
  bool int_sized; ///< an algorithm class: int counts and byte sizes
};

// The first variant of each op is its default.
constexpr variant variants[] = {
  {bench_op::allreduce, "ring_chunked", "gloo::AllreduceRingChunked", true, true},
  {bench_op::allreduce, "ring", "gloo::AllreduceRing", true, true},
  {bench_op::allreduce, "halving_doubling", "gloo::AllreduceHalvingDoubling", true, true},
  {bench_op::allreduce, "default", "gloo::allreduce()", true, false},
  {bench_op::allreduce, "bcube", "gloo::allreduce() BCUBE", true, false},
  {bench_op::broadcast, "default", "gloo::broadcast()", true, false},
  {bench_op::broadcast, "one_to_all", "gloo::BroadcastOneToAll", true, true},
  {bench_op::allgather, "default", "gloo::allgather()", true, false},
  {bench_op::allgather, "ring", "gloo::AllgatherRing", false, true},
  {bench_op::reduce_scatter, "halving_doubling", "gloo::ReduceScatterHalvingDoubling", true, true},
  {bench_op::alltoall, "default", "gloo::alltoall()", false, false},
  {bench_op::barrier, "default", "gloo::barrier()", true, false},
  {bench_op::barrier, "all_to_one", "gloo::BarrierAllToOne", true, true},
  {bench_op::barrier, "all_to_all", "gloo::BarrierAllToAll", true, true},
};

struct options {
  std::size_t min_bytes = 4;
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t factor = 4;
  int iters = 0;  // 0: chosen per size
  int warmup = -1;
  bool check = true;
  bench_op op = bench_op::allreduce;
  dtype type = dtype::float32;
  const variant* algo = nullptr;
  int root = 0;
  std::string json; // "" = none, "-" = stdout
  int timeout_s = 60;
};

[[noreturn]] void usage(const char* why) {
  if (why)
    std::fprintf(stderr, "gloo-bench: %s\n", why);
  std::fprintf(stderr,
               "usage: gloo-bench [-o OP] [-a ALGO] [-d DTYPE] [-r ROOT] [-b MIN] [-e MAX]\n"
               "                  [-f FACTOR] [-n ITERS] [-w WARMUP] [--no-check] [--json FILE]\n"
               "                  [--timeout SECONDS]\n"
               "  -o, --op OP       allreduce (default), broadcast, allgather, reduce_scatter,\n"
               "                    alltoall, barrier\n"
               "  -a, --algo ALGO   the Gloo algorithm (default: the first listed)\n"
               "                    allreduce: ring_chunked, ring, halving_doubling,\n"
               "                               default (gloo::allreduce), bcube\n"
               "                    broadcast: default (gloo::broadcast), one_to_all\n"
               "                    allgather: default (gloo::allgather), ring\n"
               "                    reduce_scatter: halving_doubling\n"
               "                    alltoall: default (gloo::alltoall)\n"
               "                    barrier: default (gloo::barrier), all_to_one, all_to_all\n"
               "  -d, --dtype T     float32 (default), float64, float16, int8, uint8, int32, int64\n"
               "  -r, --root R      root of broadcast (default 0)\n"
               "  -b, -e, -f        sizes in bytes, with K/M/G suffixes (default -b 4 -e 64M -f 4);\n"
               "                    the size is the whole buffer (nccl-tests' convention)\n"
               "  -n, -w            timed and warm-up iterations per size (default: by size)\n"
               "  --no-check        skip the comparison with the locally computed reference\n"
               "  --json FILE       also write one JSON object per size to FILE (- = stdout,\n"
               "                    the table then goes to stderr); rank 0 writes it\n"
               "  --timeout S       Gloo context timeout in seconds (default 60); a rank with\n"
               "                    no progress for twice that plus 10 s exits 1\n"
               "  Ranks come from RANK, WORLD_SIZE, MASTER_PORT (as set by mcclrun); the\n"
               "  rendezvous is a Gloo FileStore in $GLOO_BENCH_DIR (default\n"
               "  /tmp/gloo-bench-<MASTER_PORT>), the transport TCP over 127.0.0.1.\n");
  std::exit(2);
}

std::size_t parse_size(const char* flag, const char* text) {
  auto v = parse_byte_size(text);
  if (!v || *v == 0)
    usage((std::string(flag) + " expects a byte size such as 4, 64K or 16M, got \"" + text + "\"").c_str());
  return *v;
}

int parse_int(const char* flag, const char* text) {
  auto v = parse_count(text);
  if (!v)
    usage((std::string(flag) + " expects a count, got \"" + text + "\"").c_str());
  return *v;
}

bench_op parse_op_arg(const std::string& text) {
  if (auto op = parse_op(text, supported_ops))
    return *op;
  usage(("-o expects one of " + op_list(supported_ops) + ", got \"" + text + "\"").c_str());
}

dtype parse_dtype(const std::string& text) {
  for (const auto& n : dtype_names)
    if (text == n.name)
      return n.type;
  usage(("-d expects float32, float64, float16, int8, uint8, int32 or int64, got \"" + text + "\"")
          .c_str());
}

options parse(int argc, char** argv) {
  options o;
  std::string algo;
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
    else if (a == "-o" || a == "--op") o.op = parse_op_arg(value());
    else if (a == "-a" || a == "--algo") {
      algo = value();
      if (algo.empty())
        usage((a + " expects an algorithm name").c_str());
    }
    else if (a == "-d" || a == "--dtype") o.type = parse_dtype(value());
    else if (a == "-r" || a == "--root") o.root = parse_int("-r", value());
    else if (a == "--no-check") o.check = false;
    else if (a == "--json") {
      o.json = value();
      if (o.json.empty())
        usage("--json expects a file name or -");
    }
    else if (a == "--timeout") {
      o.timeout_s = parse_int("--timeout", value());
      if (o.timeout_s < 1)
        usage("--timeout must be at least 1 second");
    }
    else if (a == "-h" || a == "--help") usage(nullptr);
    else usage(("unknown option " + a).c_str());
  }
  if (o.factor < 2)
    usage("-f must be at least 2");
  if (o.min_bytes > o.max_bytes)
    usage("-b must not exceed -e");
  std::string known;
  for (const auto& v : variants) {
    if (v.op != o.op)
      continue;
    if (!o.algo && (algo.empty() || algo == v.name))
      o.algo = &v;
    known += (known.empty() ? "" : ", ") + std::string(v.name);
  }
  if (!o.algo)
    usage(("-a for " + std::string(to_string(o.op)) + " expects one of " + known + ", got \"" + algo
           + "\"").c_str());
  return o;
}

// ---- deterministic data (bench_common.hpp's value(), as mccl-bench) -------------
// Integer types wrap modulo 2^bits on both sides. Buffers are compared byte
// for byte with the reference.

template <class T>
T element(int64_t v) {
  if constexpr (std::is_same_v<T, gloo::float16>) {
    gloo::float16 h;
    h.x = half_bits(v);
    return h;
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    // Two's-complement wrap, as the Gloo sum on T does.
    using U = std::make_unsigned_t<T>;
    auto u = static_cast<U>(static_cast<uint64_t>(v));
    T t;
    std::memcpy(&t, &u, sizeof t);
    return t;
  }
}

template <class T, class F>
std::vector<T> make(std::size_t n, F f) {
  std::vector<T> out(n);
  for (std::size_t j = 0; j < n; ++j)
    out[j] = element<T>(f(j));
  return out;
}

/// One size of one op on this rank.
template <class T>
struct plan {
  std::size_t count = 0;       ///< elements per rank block (blocked ops) or in the buffer
  std::size_t bytes = 0;       ///< the reported size (nccl-tests' convention)
  std::size_t total_count = 0; ///< elements in the reported size
  std::vector<T> init;         ///< the result buffer's contents before each iteration
  std::vector<T> input;        ///< a separate input (out-of-place variants)
  std::size_t check_offset = 0; ///< elements into the result buffer
  std::vector<T> expected;      ///< empty: nothing to check on this rank
};

template <class T>
plan<T> make_plan(const variant& v, std::size_t size, int rank, int world, int root) {
  plan<T> p;
  std::size_t e = sizeof(T);
  auto mine = [rank](std::size_t j) { return value(rank, j); };
  if (v.op == bench_op::barrier)
    return p;
  if (!blocked(v.op)) {
    std::size_t n = std::max<std::size_t>(1, size / e);
    p.count = p.total_count = n;
    p.bytes = n * e;
    p.init = make<T>(n, mine);
    if (v.op == bench_op::allreduce)
      p.expected = make<T>(n, [world](std::size_t j) { return ranks_sum(world, j); });
    else
      p.expected = make<T>(n, [root](std::size_t j) { return value(root, j); });
    return p;
  }
  std::size_t c = std::max<std::size_t>(1, size / static_cast<std::size_t>(world) / e);
  std::size_t n = c * static_cast<std::size_t>(world);
  p.count = c;
  p.total_count = n;
  p.bytes = n * e;
  auto r = static_cast<std::size_t>(rank);
  switch (v.op) {
    case bench_op::allgather:
      if (v.in_place) {
        // This rank's block holds its input; the others must be overwritten.
        p.init = make<T>(n, [&](std::size_t j) { return j / c == r ? value(rank, j % c) : 0; });
      } else {
        p.input = make<T>(c, mine);
        p.init = make<T>(n, [](std::size_t) { return 0; });
      }
      p.expected = make<T>(n, [c](std::size_t j) { return gathered_value(c, j); });
      break;
    case bench_op::reduce_scatter:
      // Gloo leaves this rank's reduced block at the start of the buffer
      // (ReduceScatterHalvingDoubling's convention), not at its offset.
      p.init = make<T>(n, mine);
      p.check_offset = 0;
      p.expected = make<T>(c, [&](std::size_t k) { return ranks_sum(world, r * c + k); });
      break;
    case bench_op::alltoall:
      // Block j of rank r goes to rank j: there, block r of the result.
      p.input = make<T>(n, mine);
      p.init = make<T>(n, [](std::size_t) { return 0; });
      p.expected = make<T>(n, [&](std::size_t j) { return alltoall_value(r, c, j); });
      break;
    default:
      break;
  }
  return p;
}

// ---- Gloo -------------------------------------------------------------------------

using context_ptr = std::shared_ptr<gloo::Context>;

template <class T>
void sum_fn(void* c, const void* a, const void* b, std::size_t n) {
  gloo::sum<T>(c, a, b, n);
}

void barrier(const context_ptr& ctx) {
  gloo::BarrierOptions o(ctx);
  gloo::barrier(o);
}

/// Element-wise max over ranks, in place.
void allreduce_max(const context_ptr& ctx, std::vector<double>& v) {
  if (ctx->size == 1 || v.empty())
    return;
  gloo::AllreduceOptions o(ctx);
  o.setOutput(v.data(), v.size());
  o.setReduceFunction([](void* c, const void* a, const void* b, std::size_t n) {
    gloo::max<double>(c, a, b, n);
  });
  gloo::allreduce(o);
}

/// The op of one size: run() performs one iteration. Algorithm classes are
/// built here once; the function API builds its options in every call.
template <class T>
std::function<void()> make_runner(const context_ptr& ctx, const variant& v, plan<T>& p,
                                  std::vector<T>& buf, int root) {
  std::string name = v.name;
  T* out = buf.data();
  T* in = p.input.data();
  std::size_t count = p.count; // per block for blocked ops
  auto icount = static_cast<int>(count);
  auto keep = [](gloo::Algorithm* a) {
    std::shared_ptr<gloo::Algorithm> alg(a);
    return [alg] { alg->run(); };
  };
  switch (v.op) {
    case bench_op::allreduce:
      if (name == "ring_chunked")
        return keep(new gloo::AllreduceRingChunked<T>(ctx, {out}, icount));
      if (name == "ring")
        return keep(new gloo::AllreduceRing<T>(ctx, {out}, icount));
      if (name == "halving_doubling")
        return keep(new gloo::AllreduceHalvingDoubling<T>(ctx, {out}, icount));
      return [ctx, out, count, bcube = name == "bcube"] {
        gloo::AllreduceOptions o(ctx);
        if (bcube)
          o.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);
        o.setOutput(out, count);
        o.setReduceFunction(&sum_fn<T>);
        gloo::allreduce(o);
      };
    case bench_op::broadcast:
      if (name == "one_to_all")
        return keep(new gloo::BroadcastOneToAll<T>(ctx, {out}, count, root));
      return [ctx, out, count, root] {
        gloo::BroadcastOptions o(ctx);
        o.setOutput(out, count);
        o.setRoot(root);
        gloo::broadcast(o);
      };
    case bench_op::allgather:
      if (name == "ring")
        return keep(new gloo::AllgatherRing<T>(ctx, {in}, out, icount));
      return [ctx, out, count] {
        gloo::AllgatherOptions o(ctx);
        o.setOutput(out, count * static_cast<std::size_t>(ctx->size));
        gloo::allgather(o);
      };
    case bench_op::reduce_scatter:
      return keep(new gloo::ReduceScatterHalvingDoubling<T>(
        ctx, {out}, static_cast<int>(p.total_count), std::vector<int>(ctx->size, icount)));
    case bench_op::alltoall:
      return [ctx, in, out, total = p.total_count] {
        gloo::AlltoallOptions o(ctx);
        o.setInput(in, total);
        o.setOutput(out, total);
        gloo::alltoall(o);
      };
    case bench_op::barrier:
      if (name == "all_to_one")
        return keep(new gloo::BarrierAllToOne(ctx));
      if (name == "all_to_all")
        return keep(new gloo::BarrierAllToAll(ctx));
      return [ctx] { barrier(ctx); };
    default: // not gloo-bench ops (parse_op_arg refuses them)
      break;
  }
  return [] {};
}

// ---- rendezvous store directory -------------------------------------------------

/// A FileStore file name: the hash of a key, "." before it while being written.
bool store_file_name(const char* name) {
  if (*name == '.')
    ++name;
  if (*name == '\0')
    return false;
  for (; *name; ++name)
    if (*name < '0' || *name > '9')
      return false;
  return true;
}

/// gloo::rendezvous::FileStore whose every wait is bounded by the context
/// timeout (FileStore::get waits up to Store::kDefaultTimeout, 30 s, whatever
/// the context says), and which can remove the keys this rank wrote.
class bench_store : public gloo::rendezvous::Store {
 public:
  bench_store(const std::string& dir, std::chrono::milliseconds timeout)
      : files_(dir), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    files_.set(key, data);
  }

  std::vector<char> get(const std::string& key) override {
    files_.wait({key}, timeout_);
    return files_.get(key);
  }

  void wait(const std::vector<std::string>& keys) override { files_.wait(keys, timeout_); }

  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    files_.wait(keys, std::min(timeout, timeout_));
  }

  /// After a failed rendezvous: a later run on the same directory must not
  /// find this rank's stale address.
  void remove_own_keys() {
    for (const auto& path : files_.getAllKeyFilePaths())
      ::unlink(path.c_str());
  }

 private:
  gloo::rendezvous::FileStore files_;
  std::chrono::milliseconds timeout_;
};

/// Removes the FileStore's files from dir, then dir itself if that left it empty.
void remove_store(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    while (auto* ent = ::readdir(d))
      if (store_file_name(ent->d_name))
        ::unlink((dir + "/" + ent->d_name).c_str());
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

// ---- watchdog ---------------------------------------------------------------------

std::atomic<int64_t> last_progress{0};
std::atomic<bool> watchdog_stop{false};
char watchdog_what[256] = "start-up";

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

void progress() { last_progress.store(now_ms(), std::memory_order_relaxed); }

/// Ends the process when no progress was reported for limit_ms: Gloo's own
/// timeouts bound every wait, this catches whatever they do not.
void watchdog(int rank, int64_t limit_ms) {
  while (!watchdog_stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    int64_t idle = now_ms() - last_progress.load(std::memory_order_relaxed);
    if (idle > limit_ms) {
      std::fprintf(stderr, "gloo-bench: rank %d: no progress for %lld s (%s); exiting\n", rank,
                   static_cast<long long>(idle / 1000), watchdog_what);
      std::fflush(stderr);
      std::_Exit(1);
    }
  }
}

// ---- the benchmark --------------------------------------------------------------

struct output {
  std::FILE* table = stdout;
  std::FILE* json = nullptr;
};

/// Runs every size; returns false when some result was WRONG.
template <class T>
bool run_all(const context_ptr& ctx, const options& opt, const output& out) {
  const variant& v = *opt.algo;
  int rank = ctx->rank, world = ctx->size;
  bool all_ok = true;
  std::size_t last_bytes = 0;
  for (std::size_t size = opt.min_bytes; size <= opt.max_bytes; size *= opt.factor) {
    bool last_size = size > opt.max_bytes / opt.factor || v.op == bench_op::barrier;
    if (v.int_sized && v.op != bench_op::barrier && size > static_cast<std::size_t>(INT32_MAX)) {
      if (rank == 0)
        std::fprintf(out.table, "# note: %s takes int counts and byte sizes: sizes above %d bytes "
                     "are skipped\n", v.gloo, INT32_MAX);
      break;
    }
    std::snprintf(watchdog_what, sizeof watchdog_what, "setting up %zu bytes", size);
    progress();
    plan<T> p = make_plan<T>(v, size, rank, world, opt.root);
    // Rounding to whole elements per rank can give a size already measured.
    if (v.op != bench_op::barrier && p.bytes == last_bytes) {
      if (last_size)
        break;
      continue;
    }
    last_bytes = p.bytes;
    int iters = opt.iters > 0 ? opt.iters : default_iters(p.bytes);
    int warmup = opt.warmup >= 0 ? opt.warmup : std::max(2, iters / 10);
    std::vector<T> buf(p.init.size());
    auto run = make_runner<T>(ctx, v, p, buf, opt.root);
    std::vector<double> times; // then the number of wrong iterations
    int bad = 0;
    for (int it = 0; it < warmup + iters; ++it) {
      std::snprintf(watchdog_what, sizeof watchdog_what, "%s %s, %zu bytes, iteration %d",
                    to_string(v.op), v.name, p.bytes, it);
      progress();
      // Every iteration starts from the same inputs, so a stale result
      // from the previous iteration cannot pass the check.
      std::copy(p.init.begin(), p.init.end(), buf.begin());
      barrier(ctx);
      auto t0 = std::chrono::steady_clock::now();
      run();
      auto t1 = std::chrono::steady_clock::now();
      progress();
      if (it >= warmup)
        times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      if (opt.check && !p.expected.empty()
          && std::memcmp(buf.data() + p.check_offset, p.expected.data(),
                         p.expected.size() * sizeof(T)) != 0)
        ++bad;
    }
    // The slowest rank defines each iteration's time; a rank that saw a
    // wrong element makes the size fail everywhere.
    std::snprintf(watchdog_what, sizeof watchdog_what, "collecting times of %zu bytes", p.bytes);
    times.push_back(bad);
    allreduce_max(ctx, times);
    bad = static_cast<int>(times.back());
    times.pop_back();
    if (bad)
      all_ok = false;
    if (rank == 0) {
      double p50 = percentile(times, 50), p99 = percentile(times, 99);
      double algbw = p50 > 0 ? static_cast<double>(p.bytes) / (p50 * 1e-6) / 1e9 : 0.0;
      double busbw = algbw * bus_factor(v.op, world);
      bool checked = opt.check && v.op != bench_op::barrier;
      std::fprintf(out.table, "  %12zu %12zu %10.1f %10.1f %12.3f %12.3f %6s  %s\n", p.bytes,
                   p.total_count, p50, p99, algbw, busbw, !checked ? "-" : bad ? "WRONG" : "ok",
                   v.name);
      std::fflush(out.table);
      if (out.json) {
        std::fprintf(out.json,
                     "{\"library\":\"gloo\",\"variant\":\"%s\",\"op\":\"%s\",\"dtype\":\"%s\","
                     "\"redop\":\"sum\",\"ranks\":%d,\"bytes\":%zu,\"count\":%zu,"
                     "\"p50_us\":%.3f,\"p99_us\":%.3f,\"algbw_gbs\":%.6g,\"busbw_gbs\":%.6g,"
                     "\"check\":\"%s\",\"algorithm\":\"%s\"}\n",
                     v.name, to_string(v.op), to_string(opt.type), world, p.bytes, p.total_count,
                     p50, p99, algbw, busbw, !checked ? "skipped" : bad ? "WRONG" : "ok", v.name);
        std::fflush(out.json);
      }
    }
    if (last_size)
      break;
  }
  return all_ok;
}

int env_int(const char* name, int fallback, int lo, int hi) {
  const char* s = std::getenv(name);
  if (!s || !*s)
    return fallback;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (*end != '\0' || v < lo || v > hi) {
    std::fprintf(stderr, "gloo-bench: %s=\"%s\" is not a number in %d..%d\n", name, s, lo, hi);
    std::exit(2);
  }
  return static_cast<int>(v);
}

} // namespace

int main(int argc, char** argv) {
  options opt = parse(argc, argv);
  bool launched = std::getenv("RANK") || std::getenv("WORLD_SIZE");
  int world = env_int("WORLD_SIZE", 1, 1, 1 << 16);
  int rank = env_int("RANK", 0, 0, world - 1);
  int port = env_int("MASTER_PORT", 0, 0, 65535);
  if (launched && world > 1 && port == 0) {
    std::fprintf(stderr, "gloo-bench: MASTER_PORT is not set (start the ranks with mcclrun)\n");
    return 2;
  }
  if (opt.op == bench_op::broadcast && opt.root >= world) {
    std::fprintf(stderr, "gloo-bench: -r %d is not a rank of %d\n", opt.root, world);
    return 2;
  }
  std::string dir;
  if (const char* d = std::getenv("GLOO_BENCH_DIR"); d && *d)
    dir = d;
  else
    dir = "/tmp/gloo-bench-" + std::to_string(port != 0 ? port : static_cast<int>(::getpid()));

  output out;
  std::FILE* json_file = nullptr;
  if (rank == 0 && !opt.json.empty()) {
    if (opt.json == "-") {
      out.json = stdout;
      out.table = stderr;
    } else {
      json_file = std::fopen(opt.json.c_str(), "w");
      if (!json_file) {
        std::fprintf(stderr, "gloo-bench: cannot write %s: %s\n", opt.json.c_str(), std::strerror(errno));
        return 2;
      }
      out.json = json_file;
    }
  }

  auto timeout = std::chrono::seconds(opt.timeout_s);
  progress();
  std::thread dog(watchdog, rank, 2 * static_cast<int64_t>(opt.timeout_s) * 1000 + 10000);
  bool store_removed = false;
  int rc = 0;
  // Held outside the try block so that an error exit does not tear them down.
  std::shared_ptr<gloo::transport::Device> dev;
  context_ptr ctx;
  try {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      throw std::runtime_error("cannot create the rendezvous directory " + dir + ": " + std::strerror(errno));
    std::snprintf(watchdog_what, sizeof watchdog_what, "rendezvous in %s", dir.c_str());
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    dev = gloo::transport::tcp::CreateDevice(attr);
    auto rctx = std::make_shared<gloo::rendezvous::Context>(rank, world);
    rctx->setTimeout(timeout);
    {
      bench_store store(dir, timeout);
      try {
        rctx->connectFullMesh(store, dev);
      } catch (...) {
        store.remove_own_keys();
        throw;
      }
    }
    ctx = rctx;
    // Every rank is connected: the store is no longer needed.
    barrier(ctx);
    if (rank == 0) {
      remove_store(dir);
      store_removed = true;
    }
    if (rank == 0) {
      const variant& v = *opt.algo;
      std::string what = to_string(v.op);
      if (v.op != bench_op::barrier) {
        what += std::string(", ") + to_string(opt.type);
        if (reduces(v.op))
          what += ", sum";
        if (v.op == bench_op::broadcast)
          what += ", root " + std::to_string(opt.root);
        what += v.in_place ? ", in place" : ", out of place";
      }
      std::fprintf(out.table, "# gloo-bench: %s, %d rank(s), algorithm %s (%s), Gloo %d.%d.%d, tcp 127.0.0.1\n",
                   what.c_str(), world, v.name, v.gloo, GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
                   GLOO_VERSION_PATCH);
      std::fprintf(out.table, "# %12s %12s %10s %10s %12s %12s %6s  %s\n", "bytes", "count", "p50(us)",
                   "p99(us)", "algbw(GB/s)", "busbw(GB/s)", "check", "algorithm");
      std::fflush(out.table);
    }
    bool ok = true;
    switch (opt.type) {
      case dtype::float32: ok = run_all<float>(ctx, opt, out); break;
      case dtype::float64: ok = run_all<double>(ctx, opt, out); break;
      case dtype::float16: ok = run_all<gloo::float16>(ctx, opt, out); break;
      case dtype::int8: ok = run_all<int8_t>(ctx, opt, out); break;
      case dtype::uint8: ok = run_all<uint8_t>(ctx, opt, out); break;
      case dtype::int32: ok = run_all<int32_t>(ctx, opt, out); break;
      case dtype::int64: ok = run_all<int64_t>(ctx, opt, out); break;
    }
    std::snprintf(watchdog_what, sizeof watchdog_what, "final barrier");
    progress();
    barrier(ctx);
    if (!ok) {
      if (rank == 0)
        std::fprintf(stderr, "gloo-bench: some results were WRONG\n");
      rc = 1;
    }
  } catch (const std::exception& e) {
    // gloo::Exception (IoException on a timeout or a lost peer) and
    // gloo::EnforceNotMet both end up here.
    std::fprintf(stderr, "gloo-bench: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    if (rank == 0 && !store_removed)
      remove_store(dir);
    // Leave at once: tearing down a context whose peers are gone can block.
    std::fflush(stdout);
    std::_Exit(1);
  }
  watchdog_stop = true;
  dog.join();
  if (json_file)
    std::fclose(json_file);
  return rc;
}
