// How much memory bandwidth N processes get when each copies at once, as
// N ranks of one host do in a large collective: every process copies a
// buffer (64 MiB unless BYTES says otherwise) into another for 2 s; prints
// the rate of bytes moved (read plus written), in all and per process.
// mccl-sim's model of the host board takes its --host-memory curve from
// these figures. Standalone:
//
//   g++ -O2 -o /tmp/memory_bandwidth bench/memory_bandwidth.cpp
//   for n in 1 2 4 8 16; do /tmp/memory_bandwidth $n; done
//   /tmp/memory_bandwidth 16 1048576       # 1 MiB buffers: what the caches hold
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 0;
  long bytes = argc > 2 ? std::atol(argv[2]) : 64L << 20;
  if (n < 1 || bytes < 4096) {
    std::fprintf(stderr, "usage: memory_bandwidth PROCESSES [BYTES (at least 4096; default 64 MiB)]\n");
    return 2;
  }
  int results[2];
  if (::pipe(results) != 0) {
    std::perror("memory_bandwidth: pipe");
    return 1;
  }
  for (int i = 0; i < n; ++i)
    if (::fork() == 0) {
      std::vector<char> from(static_cast<std::size_t>(bytes), 1), to(static_cast<std::size_t>(bytes), 2);
      auto start = std::chrono::steady_clock::now();
      double moved = 0;
      while (std::chrono::steady_clock::now() - start < std::chrono::seconds(2)) {
        std::memcpy(to.data(), from.data(), from.size());
        moved += 2.0 * static_cast<double>(from.size());
      }
      double rate = moved / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      _exit(::write(results[1], &rate, sizeof rate) == sizeof rate ? 0 : 1);
    }
  ::close(results[1]); // a child that dies without its rate ends the read below
  double total = 0;
  for (int i = 0; i < n; ++i) {
    double rate = 0;
    if (::read(results[0], &rate, sizeof rate) != sizeof rate) {
      std::fprintf(stderr, "memory_bandwidth: %d of %d processes reported a rate; the others failed\n", i, n);
      return 1;
    }
    total += rate;
  }
  while (::wait(nullptr) > 0) {
  }
  std::printf("%d process(es), %ld-byte buffers: %.1f GB/s moved (read + written), %.1f per process\n", n, bytes,
              total / 1e9, total / n / 1e9);
  return 0;
}
