// mpi-bench: the collectives of mccl-bench measured with MPI (the C API), for
// side-by-side comparison with mccl. Built against Open MPI when CMake finds
// MPI; run it through bench/run_mpi_bench.sh N VARIANT [args], which starts
// mpirun with the transport of VARIANT (tcp: loopback TCP, sm: shared memory).
//
// Options, data, check, sizes and output columns follow mccl-bench: per size
// it prints bytes, element count, p50/p99 time (per iteration the slowest
// rank's time, as nccl-tests does), algbw, busbw, whether every element of
// every iteration matched the reference, and the algorithm. A barrier precedes
// every timed iteration; every iteration starts from the same inputs.
//
// Sizes follow nccl-tests: the size is the whole buffer (for allgather,
// reduce_scatter, alltoall, gather and scatter the gathered / full buffer of
// count * world elements). busbw = algbw * 2(n-1)/n for allreduce, (n-1)/n
// for allgather, reduce_scatter, alltoall, gather and scatter, 1 for
// broadcast and reduce. Ops run in place (MPI_IN_PLACE) except gather and
// scatter; reduce_scatter is MPI_Reduce_scatter_block, whose in-place result
// is the first block of the buffer. Reductions are sums.
//
// The algorithm column says "tuned" (Open MPI's default coll component; "self"
// on one rank) unless coll MCA parameters were passed (mpirun --mca coll...,
// or OMPI_MCA_coll... in the environment): then it lists them, "mca:NAME=VALUE,...".
//
// --json FILE writes one JSON object per size (JSONL) from rank 0; with
// --json - the objects go to stdout and the table to stderr.

#include <mpi.h>

#include "bench_common.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

using namespace bench;

/// The ops mpi-bench runs.
const std::vector<bench_op> supported_ops = {
  bench_op::allreduce, bench_op::broadcast, bench_op::reduce,  bench_op::allgather,
  bench_op::reduce_scatter, bench_op::alltoall, bench_op::gather, bench_op::scatter,
  bench_op::barrier};

/// The op's name in Open MPI's coll_tuned_<name>_... MCA parameters.
const char* tuned_name(bench_op op) {
  switch (op) {
    case bench_op::broadcast: return "bcast";
    case bench_op::reduce_scatter: return "reduce_scatter_block";
    default: return to_string(op);
  }
}

enum class dtype { float32, float64, int32 };

struct dtype_name {
  dtype type;
  const char* name;
};

// The canonical names first (as mccl names them), then mccl-bench's aliases.
constexpr dtype_name dtype_names[] = {
  {dtype::float32, "float32"}, {dtype::float64, "float64"}, {dtype::int32, "int32"},
  {dtype::float32, "float"},   {dtype::float64, "double"},  {dtype::int32, "int"},
};

const char* to_string(dtype t) {
  for (const auto& n : dtype_names)
    if (n.type == t)
      return n.name;
  return "unknown";
}

std::size_t dtype_size(dtype t) { return t == dtype::float64 ? 8 : 4; }

MPI_Datatype mpi_type(dtype t) {
  switch (t) {
    case dtype::float32: return MPI_FLOAT;
    case dtype::float64: return MPI_DOUBLE;
    case dtype::int32: return MPI_INT32_T;
  }
  return MPI_DATATYPE_NULL;
}

struct options {
  std::size_t min_bytes = 4;
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t factor = 4;
  int iters = 0;  // 0: chosen per size
  int warmup = -1;
  bool check = true;
  bench_op op = bench_op::allreduce;
  dtype type = dtype::float32;
  int root = 0;
  std::string json;           // "" = none, "-" = stdout
  std::string variant = "default";
};

/// Thrown by the parser: every rank parses the same arguments, so every rank
/// throws the same and leaves MPI in step. exit_code 0 after --help.
struct usage_error {
  std::string why;
  int exit_code = 2;
};

void print_usage(const char* why) {
  if (why && *why)
    std::fprintf(stderr, "mpi-bench: %s\n", why);
  std::fprintf(stderr,
               "usage: mpi-bench [-o OP] [-d DTYPE] [-r ROOT] [-b MIN] [-e MAX] [-f FACTOR]\n"
               "                 [-n ITERS] [-w WARMUP] [--no-check] [--json FILE] [--variant NAME]\n"
               "  -o, --op OP       allreduce (default), broadcast, reduce, allgather,\n"
               "                    reduce_scatter, alltoall, gather, scatter, barrier\n"
               "  -d, --dtype T     float32 (default), float64, int32\n"
               "  -r, --root R      root of broadcast, reduce, gather and scatter (default 0)\n"
               "  -b, -e, -f        sizes in bytes, with K/M/G suffixes (default -b 4 -e 64M -f 4);\n"
               "                    the size is the whole buffer (nccl-tests' convention)\n"
               "  -n, -w            timed and warm-up iterations per size (default: by size)\n"
               "  --no-check        skip the comparison with the locally computed reference\n"
               "  --json FILE       also write one JSON object per size to FILE (JSONL; - for\n"
               "                    stdout, the table then goes to stderr)\n"
               "  --variant NAME    the \"variant\" of the JSON records (e.g. tcp, sm)\n"
               "  Start it with mpirun, e.g. bash bench/run_mpi_bench.sh 4 tcp -o allreduce.\n"
               "  Reductions are sums; ops run in place (gather and scatter out of place).\n");
}

std::size_t parse_size(const std::string& flag, const char* text) {
  auto v = parse_byte_size(text);
  if (!v || *v == 0)
    throw usage_error{flag + " expects a byte size such as 4, 64K or 16M, got \"" + text + "\""};
  return *v;
}

int parse_int(const std::string& flag, const char* text) {
  auto v = parse_count(text);
  if (!v)
    throw usage_error{flag + " expects a count, got \"" + text + "\""};
  return *v;
}

bench_op parse_op_arg(const std::string& text) {
  if (auto op = parse_op(text, supported_ops))
    return *op;
  throw usage_error{"-o expects one of " + op_list(supported_ops) + ", got \"" + text + "\""};
}

dtype parse_dtype(const std::string& text) {
  for (const auto& n : dtype_names)
    if (text == n.name)
      return n.type;
  if (text == "float16" || text == "half" || text == "bfloat16" || text == "bf16")
    throw usage_error{"-d " + text + ": MPI has no " + text
                      + " type (it is not in the MPI standard); use float32, float64 or int32"};
  throw usage_error{"-d expects float32, float64 or int32, got \"" + text + "\""};
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc)
        throw usage_error{a + " needs a value"};
      return argv[++i];
    };
    if (a == "-b") o.min_bytes = parse_size("-b", value());
    else if (a == "-e") o.max_bytes = parse_size("-e", value());
    else if (a == "-f") o.factor = static_cast<std::size_t>(parse_int("-f", value()));
    else if (a == "-n") o.iters = parse_int("-n", value());
    else if (a == "-w") o.warmup = parse_int("-w", value());
    else if (a == "-o" || a == "--op") o.op = parse_op_arg(value());
    else if (a == "-d" || a == "--dtype") o.type = parse_dtype(value());
    else if (a == "-r" || a == "--root") o.root = parse_int("-r", value());
    else if (a == "--no-check") o.check = false;
    else if (a == "--json") {
      o.json = value();
      if (o.json.empty())
        throw usage_error{"--json expects a file name or -"};
    }
    else if (a == "--variant") {
      o.variant = value();
      if (o.variant.empty())
        throw usage_error{"--variant expects a name"};
    }
    else if (a == "-h" || a == "--help") throw usage_error{"", 2};
    else throw usage_error{"unknown option " + a};
  }
  if (o.factor < 2)
    throw usage_error{"-f must be at least 2"};
  if (o.min_bytes > o.max_bytes)
    throw usage_error{"-b must not exceed -e"};
  return o;
}

// ---- the algorithm column --------------------------------------------------

/// "tuned" ("self" on one rank) unless coll MCA parameters were set; then
/// "mca:NAME=VALUE,..." of those that concern this op (coll_tuned_<other op>_*
/// parameters and *_verbose are left out). mpirun passes --mca NAME VALUE to the ranks as
/// OMPI_MCA_NAME in the environment.
std::string algorithm_label(bench_op op, int world) {
  const std::string prefix = "OMPI_MCA_";
  std::vector<std::string> set;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    if (kv.compare(0, prefix.size() + 4, prefix + "coll") != 0)
      continue;
    std::string nv = kv.substr(prefix.size());
    std::string name = nv.substr(0, nv.find('='));
    if (name.size() >= 8 && name.compare(name.size() - 8, 8, "_verbose") == 0)
      continue; // logging, not a choice of algorithm
    const std::string tuned = "coll_tuned_";
    if (name.compare(0, tuned.size(), tuned) == 0) {
      // coll_tuned_<op>_...: the longest op name that prefixes the rest says
      // which op it tunes; parameters of other ops are left out.
      static const char* const tuned_ops[] = {
        "allgather", "allgatherv", "allreduce", "alltoall", "alltoallv", "barrier", "bcast",
        "exscan", "gather", "reduce", "reduce_scatter", "reduce_scatter_block", "scan", "scatter"};
      std::string rest = name.substr(tuned.size());
      std::string tuned_op;
      for (const char* t : tuned_ops) {
        std::string with = std::string(t) + "_";
        if (rest.compare(0, with.size(), with) == 0 && std::strlen(t) > tuned_op.size())
          tuned_op = t;
      }
      if (!tuned_op.empty() && tuned_op != tuned_name(op))
        continue;
    }
    for (auto& c : nv) // keep the column one word
      if (c == ' ' || c == '\t')
        c = '_';
    set.push_back(nv);
  }
  if (set.empty())
    return world == 1 ? "self" : "tuned";
  std::sort(set.begin(), set.end());
  std::string out = "mca:";
  for (std::size_t i = 0; i < set.size(); ++i)
    out += (i ? "," : "") + set[i];
  return out;
}

// ---- deterministic data (bench_common.hpp's value(), as mccl-bench) ---------
// Buffers are compared byte for byte with the reference.

void put(dtype t, unsigned char* p, int64_t v) {
  switch (t) {
    case dtype::float32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, sizeof f);
      return;
    }
    case dtype::float64: {
      double d = static_cast<double>(v);
      std::memcpy(p, &d, sizeof d);
      return;
    }
    case dtype::int32: {
      auto x = static_cast<int32_t>(v);
      std::memcpy(p, &x, sizeof x);
      return;
    }
  }
}

using bytes_t = std::vector<unsigned char>;

template <class F>
bytes_t make(dtype t, std::size_t n, F f) {
  std::size_t e = dtype_size(t);
  bytes_t out(n * e);
  for (std::size_t j = 0; j < n; ++j)
    put(t, out.data() + j * e, f(j));
  return out;
}

/// One size of one op on this rank (see mccl-bench's plan).
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

plan make_plan(bench_op op, dtype t, std::size_t size, int rank, int world, int root) {
  plan p;
  std::size_t e = dtype_size(t);
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
  auto gathered = [c](std::size_t j) { return gathered_value(c, j); };
  switch (op) {
    case bench_op::allgather:
      // This rank's block holds its input; the others must be overwritten.
      p.send = make(t, n, [&](std::size_t j) {
        return j / c == static_cast<std::size_t>(rank) ? value(rank, j % c) : 0;
      });
      p.expected = make(t, n, gathered);
      break;
    case bench_op::reduce_scatter:
      // MPI_Reduce_scatter_block in place leaves this rank's block at the start.
      p.send = make(t, n, mine);
      p.check_offset = 0;
      p.expected = make(t, c, [&](std::size_t k) { return ranks_sum(world, rank * c + k); });
      break;
    case bench_op::alltoall:
      // Block j of rank r goes to rank j: there, block r of the result.
      p.send = make(t, n, mine);
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

/// Runs one op on `buf` (in place) or `send` -> `recv`; returns MPI's code.
int run_op(bench_op op, dtype t, const plan& p, unsigned char* buf, const unsigned char* send,
           unsigned char* recv, int rank, int root) {
  MPI_Datatype mt = mpi_type(t);
  int c = static_cast<int>(p.count);
  switch (op) {
    case bench_op::allreduce:
      return MPI_Allreduce(MPI_IN_PLACE, buf, c, mt, MPI_SUM, MPI_COMM_WORLD);
    case bench_op::broadcast: return MPI_Bcast(buf, c, mt, root, MPI_COMM_WORLD);
    case bench_op::reduce:
      return rank == root ? MPI_Reduce(MPI_IN_PLACE, buf, c, mt, MPI_SUM, root, MPI_COMM_WORLD)
                          : MPI_Reduce(buf, nullptr, c, mt, MPI_SUM, root, MPI_COMM_WORLD);
    case bench_op::allgather:
      return MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, c, mt, MPI_COMM_WORLD);
    case bench_op::reduce_scatter:
      return MPI_Reduce_scatter_block(MPI_IN_PLACE, buf, c, mt, MPI_SUM, MPI_COMM_WORLD);
    case bench_op::alltoall:
      return MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, c, mt, MPI_COMM_WORLD);
    case bench_op::gather: return MPI_Gather(send, c, mt, recv, c, mt, root, MPI_COMM_WORLD);
    case bench_op::scatter: return MPI_Scatter(send, c, mt, recv, c, mt, root, MPI_COMM_WORLD);
    case bench_op::barrier: return MPI_Barrier(MPI_COMM_WORLD);
    case bench_op::sendrecv: break; // not an mpi-bench op
  }
  return MPI_ERR_OTHER;
}

/// The first line of MPI_Get_library_version, e.g. "Open MPI v4.1.4, ...".
std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, static_cast<std::size_t>(std::max(0, len)));
  auto cut = s.find_first_of(",\n");
  return cut == std::string::npos ? s : s.substr(0, cut);
}

/// Every rank calls this with the same message: prints it once, leaves MPI.
int fail(int rank, const std::string& why, int code) {
  if (rank == 0 && !why.empty())
    std::fprintf(stderr, "mpi-bench: %s\n", why.c_str());
  MPI_Finalize();
  return code;
}

} // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);

  options opt;
  try {
    opt = parse(argc, argv);
  } catch (const usage_error& u) {
    if (rank == 0)
      print_usage(u.why.c_str());
    MPI_Finalize();
    return u.exit_code;
  }
  if (rooted(opt.op) && opt.root >= world)
    return fail(rank, "-r " + std::to_string(opt.root) + " is not a rank of " + std::to_string(world), 2);
  {
    // MPI counts are ints: the largest size's per-call count must fit.
    std::size_t per_call = opt.max_bytes / dtype_size(opt.type);
    if (blocked(opt.op))
      per_call /= static_cast<std::size_t>(world);
    if (opt.op != bench_op::barrier && per_call > static_cast<std::size_t>(INT_MAX))
      return fail(rank, "-e " + std::to_string(opt.max_bytes) + " needs a count above INT_MAX", 2);
  }

  // Rank 0 writes the JSON records; every rank learns whether the file opened.
  std::FILE* json = nullptr;
  int json_ok = 1;
  std::string json_error;
  if (rank == 0 && !opt.json.empty()) {
    json = opt.json == "-" ? stdout : std::fopen(opt.json.c_str(), "w");
    json_ok = json != nullptr;
    if (!json)
      json_error = std::strerror(errno);
  }
  MPI_Bcast(&json_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!json_ok)
    return fail(rank, "--json: cannot open " + opt.json + ": " + json_error, 2);
  std::FILE* table = opt.json == "-" ? stderr : stdout;

  std::string algorithm = algorithm_label(opt.op, world);
  if (rank == 0) {
    std::string what = to_string(opt.op);
    if (opt.op != bench_op::barrier) {
      what += std::string(", ") + to_string(opt.type);
      if (reduces(opt.op))
        what += ", sum";
      if (rooted(opt.op))
        what += ", root " + std::to_string(opt.root);
      what += opt.op == bench_op::gather || opt.op == bench_op::scatter ? ", out of place" : ", in place";
    }
    std::string coll = algorithm.compare(0, 4, "mca:") == 0
                           ? "coll MCA parameters " + algorithm.substr(4)
                           : "default coll component (" + algorithm + ")";
    std::fprintf(table, "# mpi-bench: %s, %d rank(s), %s, %s, variant %s\n", what.c_str(), world,
                 library_version().c_str(), coll.c_str(), opt.variant.c_str());
    std::fprintf(table, "# %12s %12s %10s %10s %12s %12s %6s  %s\n", "bytes", "count", "p50(us)",
                 "p99(us)", "algbw(GB/s)", "busbw(GB/s)", "check", "algorithm");
    std::fflush(table);
  }

  bool all_ok = true;
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
    const bytes_t& init = p.in_place ? p.send : p.recv;
    std::vector<double> times;
    times.reserve(static_cast<std::size_t>(iters));
    int bad = 0;
    for (int it = 0; it < warmup + iters; ++it) {
      // Every iteration starts from the same inputs, so a stale result from
      // the previous iteration cannot pass the check.
      if (!init.empty())
        std::memcpy(buf.data(), init.data(), init.size());
      MPI_Barrier(MPI_COMM_WORLD);
      auto t0 = std::chrono::steady_clock::now();
      run_op(opt.op, opt.type, p, buf.empty() ? nullptr : buf.data(),
             p.send.empty() ? nullptr : p.send.data(), buf.empty() ? nullptr : buf.data(), rank,
             opt.root);
      auto t1 = std::chrono::steady_clock::now();
      if (it >= warmup)
        times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      if (opt.check && !p.expected.empty()
          && std::memcmp(buf.data() + p.check_offset, p.expected.data(), p.expected.size()) != 0)
        ++bad;
    }
    // The slowest rank defines each iteration's time; a rank that saw a wrong
    // element makes the size fail everywhere.
    MPI_Allreduce(MPI_IN_PLACE, times.data(), static_cast<int>(times.size()), MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bad)
      all_ok = false;
    if (rank == 0) {
      double p50 = percentile(times, 50), p99 = percentile(times, 99);
      double algbw = p50 > 0 ? static_cast<double>(p.bytes) / (p50 * 1e-6) / 1e9 : 0.0;
      double busbw = algbw * bus_factor(opt.op, world);
      bool skipped = !opt.check || opt.op == bench_op::barrier;
      std::fprintf(table, "  %12zu %12zu %10.1f %10.1f %12.3f %12.3f %6s  %s\n", p.bytes,
                   p.total_count, p50, p99, algbw, busbw, skipped ? "-" : bad ? "WRONG" : "ok",
                   algorithm.c_str());
      std::fflush(table);
      if (json) {
        std::fprintf(json,
                     "{\"library\":\"mpi\",\"variant\":%s,\"op\":\"%s\",\"dtype\":\"%s\","
                     "\"redop\":\"sum\",\"ranks\":%d,\"bytes\":%zu,\"count\":%zu,\"p50_us\":%.3f,"
                     "\"p99_us\":%.3f,\"algbw_gbs\":%.6f,\"busbw_gbs\":%.6f,\"check\":\"%s\","
                     "\"algorithm\":%s}\n",
                     json_string(opt.variant).c_str(), to_string(opt.op), to_string(opt.type), world,
                     p.bytes, p.total_count, p50, p99, algbw, busbw,
                     skipped ? "skipped" : bad ? "WRONG" : "ok", json_string(algorithm).c_str());
        std::fflush(json);
      }
    }
    if (last_size)
      break;
  }
  if (json && json != stdout)
    std::fclose(json);
  if (!all_ok && rank == 0)
    std::fprintf(stderr, "mpi-bench: some results were WRONG\n");
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
