// How fast N processes copy what other cores have just written, as the
// ranks of the host board do: each process owns a bank of BYTES in one
// shared mapping; every round each writes its bank (from its own buffer),
// all wait at a barrier, then each copies another process's bank (a
// different one each round) into its own buffer, and all wait again. For
// 2 s; prints the rate of the two phases over all processes (bytes
// written into banks whose lines the other cores held, bytes read from
// banks another core wrote) and of both together: the rate of the host
// board's copies at 1 MiB, which mccl-sim's board model has no term for
// yet (docs/performance.md, "Ranks of one host"). Standalone:
//
//   g++ -O2 -o /tmp/peer_bandwidth bench/peer_bandwidth.cpp
//   for n in 2 16 32 64; do /tmp/peer_bandwidth $n 1048576; done
//
// For the slow mode of many ranks (docs/performance.md, "The slow mode at
// 64 ranks"; bench/slow_mode_probe.sh), two settings change how the
// processes wait and where they run: PEER_SPIN=plain (default: a bare
// load loop), pause (a PAUSE instruction each poll, as mccl's waits do;
// a hypervisor may take the vCPU away from a guest that pauses in a
// loop) or yield (sched_yield each poll); PEER_BIND=1 binds process i to
// CPU i. It also prints the processes' context switches: voluntary (they
// yielded) and involuntary (the guest's scheduler took the CPU away).
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace {

struct shared {
  std::atomic<int> arrived{0};
  std::atomic<int> generation{0};
  std::atomic<bool> stop{false};
  double write_seconds = 0, read_seconds = 0; // process 0's clock
  long rounds = 0;
};

enum class spin_kind { plain, pause, yield };

spin_kind spin_from_environment() {
  const char* v = std::getenv("PEER_SPIN");
  if (v == nullptr || std::strcmp(v, "plain") == 0)
    return spin_kind::plain;
  if (std::strcmp(v, "pause") == 0)
    return spin_kind::pause;
  if (std::strcmp(v, "yield") == 0)
    return spin_kind::yield;
  std::fprintf(stderr, "peer_bandwidth: PEER_SPIN=%s: expected plain, pause or yield\n", v);
  std::exit(2);
}

const spin_kind spin = spin_from_environment();

void poll_once() {
  if (spin == spin_kind::pause) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else if (spin == spin_kind::yield) {
    sched_yield();
  }
}

/// Every process waits until all `n` arrived (a reusable spin barrier);
/// after 10 s (a process died) it gives up and exits.
void barrier(shared& s, int n) {
  int g = s.generation.load(std::memory_order_acquire);
  if (s.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
    s.arrived.store(0, std::memory_order_relaxed);
    s.generation.store(g + 1, std::memory_order_release);
    return;
  }
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (unsigned spins = 0; s.generation.load(std::memory_order_acquire) == g; ++spins, poll_once())
    if (spins % 4096 == 0 && std::chrono::steady_clock::now() > give_up) {
      std::fprintf(stderr, "peer_bandwidth: a process did not reach the barrier within 10 s\n");
      _exit(1);
    }
}

} // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 0;
  long bytes = argc > 2 ? std::atol(argv[2]) : 1L << 20;
  if (n < 2 || bytes < 4096) {
    std::fprintf(stderr, "usage: peer_bandwidth PROCESSES (at least 2) [BYTES (at least 4096; default 1 MiB)]\n");
    return 2;
  }
  auto size = static_cast<std::size_t>(bytes);
  std::size_t total = 4096 + size * static_cast<std::size_t>(n);
  void* map = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    std::perror("peer_bandwidth: mmap of the banks");
    return 1;
  }
  auto* s = new (map) shared;
  auto* banks = static_cast<char*>(map) + 4096;
  const char* bind = std::getenv("PEER_BIND");
  bool bound = bind != nullptr && std::strcmp(bind, "1") == 0;
  for (int i = 0; i < n; ++i)
    if (::fork() == 0) {
      if (bound) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(i, &one);
        if (::sched_setaffinity(0, sizeof one, &one) != 0) {
          std::perror("peer_bandwidth: PEER_BIND=1: sched_setaffinity");
          _exit(1);
        }
      }
      std::vector<char> mine(size, static_cast<char>(i + 1));
      auto start = std::chrono::steady_clock::now();
      using clock = std::chrono::steady_clock;
      for (long round = 0;; ++round) {
        barrier(*s, n);
        if (s->stop.load())
          break;
        auto t0 = clock::now();
        std::memcpy(banks + size * static_cast<std::size_t>(i), mine.data(), size);
        barrier(*s, n);
        auto t1 = clock::now();
        int from = static_cast<int>((i + 1 + round % (n - 1)) % n); // never our own
        std::memcpy(mine.data(), banks + size * static_cast<std::size_t>(from), size);
        barrier(*s, n);
        if (i == 0) {
          auto t2 = clock::now();
          s->write_seconds += std::chrono::duration<double>(t1 - t0).count();
          s->read_seconds += std::chrono::duration<double>(t2 - t1).count();
          s->rounds = round + 1;
          if (t2 - start > std::chrono::seconds(2))
            s->stop.store(true);
        }
      }
      _exit(0);
    }
  int failed = 0;
  for (int status = 0; ::wait(&status) > 0;)
    failed += WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
  if (failed > 0 || s->rounds == 0) {
    std::fprintf(stderr, "peer_bandwidth: %d of %d processes failed, %ld rounds done\n", failed, n, s->rounds);
    return 1;
  }
  rusage children{};
  ::getrusage(RUSAGE_CHILDREN, &children);
  double moved = static_cast<double>(s->rounds) * static_cast<double>(n) * static_cast<double>(size);
  std::printf("%d process(es), %ld-byte banks: %.1f GB/s between cores (written into banks %.1f, read from peers' "
              "banks %.1f; %ld rounds; %ld voluntary and %ld involuntary context switches)\n",
              n, bytes, 2 * moved / (s->write_seconds + s->read_seconds) / 1e9, moved / s->write_seconds / 1e9,
              moved / s->read_seconds / 1e9, s->rounds, children.ru_nvcsw, children.ru_nivcsw);
  return 0;
}
