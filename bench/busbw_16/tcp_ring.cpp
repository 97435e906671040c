// A plain ring allreduce over loopback TCP with no library in the way: what
// the kernel's socket path gives N ranks of one host for large float sums.
// N forked processes, each pinned to CPU r % CPUs, one TCP connection to
// the right-hand neighbour; reduce-scatter then allgather in N-1 steps each,
// one thread per rank that sends and receives with non-blocking calls
// (as mccl's engine does) and reduces each received piece of 64 KiB as it
// lands. A process-shared barrier before every iteration; per iteration the
// slowest rank's time, as mccl-bench and mpi-bench measure.
//
//   g++ -O2 -o tcp_ring tcp_ring.cpp -pthread && ./tcp_ring 16 64 [ITERS]
//
// (N ranks, vector of MiB.) Prints the median time and busbw = bytes *
// 2(N-1)/N / time, and checks every element of the result.
#include "../bare_ranks.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using clk = std::chrono::steady_clock;
constexpr std::size_t piece_bytes = 64 << 10;

/// Sends `out` to the right while receiving `len_in` bytes from the left
/// into `in`; `landed(from, to)` runs on each received byte range that
/// completes a piece (or the end).
template <class Landed>
void exchange(int right, const char* out, std::size_t len_out, int left, char* in, std::size_t len_in,
              Landed landed) {
  std::size_t sent = 0, got = 0, handed = 0;
  while (sent < len_out || got < len_in) {
    if (sent < len_out) {
      auto k = send(right, out + sent, std::min(len_out - sent, 4 * piece_bytes), MSG_DONTWAIT);
      if (k > 0)
        sent += static_cast<std::size_t>(k);
    }
    if (got < len_in) {
      auto k = recv(left, in + got, std::min(len_in - got, 4 * piece_bytes), MSG_DONTWAIT);
      if (k > 0) {
        got += static_cast<std::size_t>(k);
      } else if (k == 0) {
        std::fprintf(stderr, "tcp_ring: a peer closed its connection\n");
        _exit(1);
      }
      std::size_t ready = got == len_in ? got : got / piece_bytes * piece_bytes;
      if (ready > handed) {
        landed(handed, ready);
        handed = ready;
      }
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 16;
  long mib = argc > 2 ? std::atol(argv[2]) : 64;
  int iters = argc > 3 ? std::atoi(argv[3]) : std::max(5, static_cast<int>(256 / std::max(1L, mib)));
  if (n < 2 || mib < 1 || iters < 2) {
    std::fprintf(stderr, "usage: tcp_ring N MIB [ITERS] (N >= 2, MIB >= 1, ITERS >= 2)\n");
    return 2;
  }
  const std::size_t count = static_cast<std::size_t>(mib) << 18; // floats
  const std::size_t block = count / n;                            // the last block takes the rest
  auto block_at = [&](int b) { return static_cast<std::size_t>(b) * block; };
  auto block_len = [&](int b) { return b == n - 1 ? count - block_at(b) : block; };
  std::vector<int> to_right(n), from_left(n);
  for (int r = 0; r < n; ++r)
    connected_pair(to_right[r], from_left[(r + 1) % n]);
  auto* shared = mmap(nullptr, sizeof(pthread_barrier_t) + sizeof(double) * n * iters, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  auto* barrier = static_cast<pthread_barrier_t*>(shared);
  auto* times = reinterpret_cast<double*>(barrier + 1);
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(barrier, &attr, n);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  for (int r = 0; r < n; ++r) {
    if (fork() != 0)
      continue;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(r % cpus, &set);
    sched_setaffinity(0, sizeof set, &set);
    std::vector<float> data(count), staging(block + n);
    for (int it = 0; it < iters; ++it) {
      std::fill(data.begin(), data.end(), static_cast<float>(r + 1));
      pthread_barrier_wait(barrier);
      auto t0 = clk::now();
      for (int s = 0; s < n - 1; ++s) { // reduce-scatter: block r - s goes right, r - s - 1 comes in
        int out = ((r - s) % n + n) % n, in = ((r - s - 1) % n + n) % n;
        float* acc = data.data() + block_at(in);
        exchange(to_right[r], reinterpret_cast<const char*>(data.data() + block_at(out)), block_len(out) * 4,
                 from_left[r], reinterpret_cast<char*>(staging.data()), block_len(in) * 4,
                 [&](std::size_t from, std::size_t to) {
                   for (std::size_t i = from / 4; i < to / 4; ++i)
                     acc[i] += staging[i];
                 });
      }
      for (int s = 0; s < n - 1; ++s) { // allgather: the reduced block r + 1 - s goes right
        int out = ((r + 1 - s) % n + n) % n, in = ((r - s) % n + n) % n;
        exchange(to_right[r], reinterpret_cast<const char*>(data.data() + block_at(out)), block_len(out) * 4,
                 from_left[r], reinterpret_cast<char*>(data.data() + block_at(in)), block_len(in) * 4,
                 [](std::size_t, std::size_t) {});
      }
      times[r * iters + it] = std::chrono::duration<double, std::micro>(clk::now() - t0).count();
      const float want = static_cast<float>(n * (n + 1) / 2);
      for (std::size_t i = 0; i < count; ++i)
        if (data[i] != want) {
          std::fprintf(stderr, "tcp_ring: rank %d element %zu is %g, expected %g\n", r, i, data[i], want);
          _exit(1);
        }
    }
    _exit(0);
  }
  if (!all_ranks_succeeded(n))
    return 1;
  auto slowest = sorted_slowest(times, n, iters, 1); // the first iteration warms up
  double p50 = slowest[(slowest.size() - 1) / 2];
  double bytes = static_cast<double>(count) * 4;
  std::printf("tcp_ring %d ranks, %ld MiB: p50 %.1f us, busbw %.3f GB/s, checked ok\n", n, mib, p50,
              bytes * 2 * (n - 1) / n / p50 / 1e3);
  return 0;
}
