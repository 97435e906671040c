// The kernel's floor for a small allreduce over loopback TCP, with no
// library in the way: N forked processes (each pinned to core r % 16), one
// TCP connection per pair with TCP_NODELAY, recursive doubling on a 4-byte
// int in 48-byte messages (about an mccl frame), a dissemination barrier
// before every iteration, and per iteration the time of the slowest rank,
// as mccl-bench and mpi-bench measure. How a rank waits (MODE):
//   recv        spin on recv(2) of the one socket it waits on (default)
//   poll        poll(2) all its sockets, then recv(2) the awaited one
//   epoll       epoll_wait(2) on all its sockets, then recv(2) the awaited one
//   recv_yield  recv, and sched_yield(2) after each read that found nothing
//   poll_yield  poll, and sched_yield(2) after each read that found nothing
//
//   g++ -O2 -o rd_floor rd_floor.cpp && ./rd_floor 16 5000 [MODE]
//
// Prints the p10/p50/p90 of the per-iteration times (µs), the first tenth
// of the iterations left out as warm-up.
#include "../bare_ranks.hpp"

#include <sched.h>
#include <poll.h>
#include <sys/epoll.h>
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
constexpr int message_bytes = 48;

void send_all(int fd, const char* m) {
  for (int off = 0; off < message_bytes;) {
    auto k = send(fd, m + off, message_bytes - off, MSG_DONTWAIT);
    if (k > 0)
      off += static_cast<int>(k);
  }
}

enum class wait_mode { recv, poll, epoll, recv_yield, poll_yield };

/// One rank's view of its sockets, for the modes that ask about all of them.
struct watcher {
  wait_mode mode = wait_mode::recv;
  std::vector<pollfd> all;
  int ep = -1;

  void before_read() {
    if (mode == wait_mode::poll || mode == wait_mode::poll_yield) {
      poll(all.data(), all.size(), 0);
    } else if (mode == wait_mode::epoll) {
      epoll_event ready[64];
      epoll_wait(ep, ready, 64, 0);
    }
  }
  void after_empty_read() const {
    if (mode == wait_mode::recv_yield || mode == wait_mode::poll_yield)
      sched_yield();
  }
};

void recv_all(watcher& w, int fd, char* m) {
  for (int got = 0; got < message_bytes;) {
    w.before_read();
    auto k = recv(fd, m + got, message_bytes - got, MSG_DONTWAIT);
    if (k > 0) {
      got += static_cast<int>(k);
    } else if (k == 0) {
      std::fprintf(stderr, "rd_floor: a peer closed its connection\n");
      _exit(1);
    } else {
      w.after_empty_read();
    }
  }
}

bool parse_mode(const char* text, wait_mode& out) {
  const std::pair<const char*, wait_mode> names[] = {{"recv", wait_mode::recv},
                                                     {"poll", wait_mode::poll},
                                                     {"epoll", wait_mode::epoll},
                                                     {"recv_yield", wait_mode::recv_yield},
                                                     {"poll_yield", wait_mode::poll_yield}};
  for (const auto& [name, mode] : names)
    if (std::strcmp(text, name) == 0) {
      out = mode;
      return true;
    }
  return false;
}

} // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 16;
  int iters = argc > 2 ? std::atoi(argv[2]) : 5000;
  const char* mode_name = argc > 3 ? argv[3] : "recv";
  wait_mode mode = wait_mode::recv;
  if (n < 2 || (n & (n - 1)) != 0 || iters < 10 || !parse_mode(mode_name, mode)) {
    std::fprintf(stderr, "usage: rd_floor N ITERS [recv|poll|epoll|recv_yield|poll_yield] "
                         "(N a power of two >= 2, ITERS >= 10)\n");
    return 2;
  }
  std::vector<std::vector<int>> fd(n, std::vector<int>(n, -1));
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      connected_pair(fd[i][j], fd[j][i]);
  auto* times = static_cast<double*>(mmap(nullptr, sizeof(double) * n * iters, PROT_READ | PROT_WRITE,
                                          MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  for (int r = 0; r < n; ++r) {
    if (fork() != 0)
      continue;
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(r % 16, &cpus);
    sched_setaffinity(0, sizeof cpus, &cpus);
    watcher w;
    w.mode = mode;
    w.ep = epoll_create1(0);
    for (int p = 0; p < n; ++p)
      if (p != r) {
        w.all.push_back(pollfd{fd[r][p], POLLIN, 0});
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd[r][p];
        epoll_ctl(w.ep, EPOLL_CTL_ADD, fd[r][p], &ev);
      }
    char out[message_bytes] = {}, in[message_bytes];
    for (int it = 0; it < iters; ++it) {
      for (int d = 1; d < n; d <<= 1) { // barrier
        send_all(fd[r][(r + d) % n], out);
        recv_all(w, fd[r][(r - d + n) % n], in);
      }
      auto t0 = clk::now();
      int sum = r;
      for (int d = 1; d < n; d <<= 1) {
        int theirs;
        std::memcpy(out, &sum, sizeof sum);
        send_all(fd[r][r ^ d], out);
        recv_all(w, fd[r][r ^ d], in);
        std::memcpy(&theirs, in, sizeof theirs);
        sum += theirs;
      }
      times[r * iters + it] = std::chrono::duration<double, std::micro>(clk::now() - t0).count();
      if (sum != n * (n - 1) / 2) {
        std::fprintf(stderr, "rd_floor: rank %d summed %d, expected %d\n", r, sum, n * (n - 1) / 2);
        _exit(1);
      }
    }
    _exit(0);
  }
  if (!all_ranks_succeeded(n))
    return 1;
  auto slowest = sorted_slowest(times, n, iters, iters / 10); // the first tenth warms up
  auto at = [&](double q) { return slowest[static_cast<std::size_t>(q * (slowest.size() - 1))]; };
  std::printf("rd_floor %d ranks, %s: p10 %.1f p50 %.1f p90 %.1f us\n", n, mode_name, at(0.1), at(0.5),
              at(0.9));
  return 0;
}
