// What starting a small op costs an algorithm, without the engine: make a
// built-in allreduce algorithm for one float (rank 3 of WORLD), start it
// (its first send goes to a collective_io that only counts), destroy it;
// p10 and p50 over ITERS rounds. Run in a Release build tree:
//
//   g++ -O2 -std=c++17 -I. -Iinclude -Ibuild/include bench/latency_16/start_bench.cpp \
//       -Lbuild -lmccl -Wl,-rpath,$PWD/build -o /tmp/start_bench
//   /tmp/start_bench 16 rd 100000
#include "collectives/extension/registry.hpp"

#include <mccl/collective.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

struct counting_io final : mccl::collective_io {
  long sends = 0;
  void send(int, uint32_t, uint32_t, const void*, std::size_t) override { ++sends; }
  void send_block(int, uint32_t, uint32_t, const void*, std::size_t, uint64_t) override { ++sends; }
  void finish() override {}
  void fail(mccl::errc, const std::string& why) override {
    std::fprintf(stderr, "start_bench: the algorithm failed: %s\n", why.c_str());
    std::exit(1);
  }
};

} // namespace

int main(int argc, char** argv) {
  int world = argc > 1 ? std::atoi(argv[1]) : 16;
  const char* name = argc > 2 ? argv[2] : "rd";
  int iters = argc > 3 ? std::atoi(argv[3]) : 100000;
  if (world < 4 || iters < 10) {
    std::fprintf(stderr, "usage: start_bench WORLD (>= 4) [ALGORITHM] [ITERS >= 10]\n");
    return 2;
  }
  mccl::register_builtin_algorithms();
  auto factory = mccl::find_algorithm(mccl::op_kind::allreduce, name);
  if (!factory) {
    std::fprintf(stderr, "start_bench: no allreduce algorithm \"%s\"\n", name);
    return 2;
  }
  float in = 1, out = 0;
  mccl::collective_args a;
  a.rank = 3;
  a.world = world;
  a.op.kind = mccl::op_kind::allreduce;
  a.op.send = &in;
  a.op.recv = &out;
  a.op.count = 1;
  counting_io io;
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto algorithm = factory(io, a);
    algorithm->start();
    algorithm.reset();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  std::printf("%s at %d ranks: make + start + destroy p10 %.3f us, p50 %.3f us (%ld sends)\n", name, world,
              us[us.size() / 10], us[us.size() / 2], io.sends);
}
