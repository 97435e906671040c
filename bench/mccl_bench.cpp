// mccl-bench: nccl-tests style benchmark of mccl collectives.
//
// Run it under mcclrun (tools/mcclrun -n 4 -- build/bench/mccl-bench) or start
// each rank yourself with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set.
// Per size it prints bytes, element count, p50/p99 time (per iteration the
// slowest rank's time, as nccl-tests does), algbw, busbw and whether every
// element of every iteration matched the reference.

#include <mccl/mccl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct options {
  std::size_t min_bytes = 4;
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t factor = 4;
  int iters = 0;  // 0: chosen per size
  int warmup = -1;
  bool check = true;
};

[[noreturn]] void usage(const char* why) {
  if (why)
    std::fprintf(stderr, "mccl-bench: %s\n", why);
  std::fprintf(stderr,
               "usage: mccl-bench [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [--no-check]\n"
               "  sizes in bytes, with K/M/G suffixes (default -b 4 -e 64M -f 4)\n"
               "  allreduce (float32, sum, in place) over the ranks given by RANK, WORLD_SIZE,\n"
               "  MASTER_ADDR, MASTER_PORT (as set by mcclrun or torchrun)\n");
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
    else if (a == "--no-check") o.check = false;
    else if (a == "-h" || a == "--help") usage(nullptr);
    else usage(("unknown option " + a).c_str());
  }
  if (o.factor < 2)
    usage("-f must be at least 2");
  if (o.min_bytes > o.max_bytes)
    usage("-b must not exceed -e");
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

/// Rank r contributes (r + 1) * (i % 7 + 1): small integers, so float32
/// sums are exact and the reference is computed without communication.
void fill(std::vector<float>& v, int rank) {
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1));
}

bool verify(const std::vector<float>& v, int world) {
  float ranks_sum = static_cast<float>(world * (world + 1) / 2);
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != ranks_sum * static_cast<float>(i % 7 + 1))
      return false;
  return true;
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
    auto comm = rt.communicator_from_env();
    int rank = comm.rank();
    int world = comm.size();
    if (rank == 0) {
      std::printf("# mccl-bench: allreduce, float32, sum, in place, %d rank(s)\n", world);
      std::printf("# %12s %12s %10s %10s %12s %12s %6s\n", "bytes", "count", "p50(us)",
                  "p99(us)", "algbw(GB/s)", "busbw(GB/s)", "check");
      std::fflush(stdout);
    }
    bool all_ok = true;
    for (std::size_t bytes = opt.min_bytes; bytes <= opt.max_bytes; bytes *= opt.factor) {
      std::size_t count = std::max<std::size_t>(1, bytes / sizeof(float));
      int iters = opt.iters > 0 ? opt.iters : default_iters(bytes);
      int warmup = opt.warmup >= 0 ? opt.warmup : std::max(2, iters / 10);
      std::vector<float> data(count), pristine(count);
      fill(pristine, rank);
      std::vector<double> times;
      int bad = 0;
      for (int it = 0; it < warmup + iters; ++it) {
        std::memcpy(data.data(), pristine.data(), count * sizeof(float));
        comm.barrier().wait();
        auto t0 = std::chrono::steady_clock::now();
        comm.allreduce(data.data(), count).wait();
        auto t1 = std::chrono::steady_clock::now();
        if (it >= warmup)
          times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        if (opt.check && !verify(data, world))
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
        double algbw = static_cast<double>(count * sizeof(float)) / (p50 * 1e-6) / 1e9;
        double busbw = algbw * (world > 1 ? 2.0 * (world - 1) / world : 0.0);
        std::printf("  %12zu %12zu %10.1f %10.1f %12.3f %12.3f %6s\n", count * sizeof(float),
                    count, p50, p99, algbw, busbw, !opt.check ? "-" : bad ? "WRONG" : "ok");
        std::fflush(stdout);
      }
      if (bytes > opt.max_bytes / opt.factor)
        break;
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
