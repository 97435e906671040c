#pragma once
// For the benchmarks that measure the kernel without a library
// (latency_16/rd_floor.cpp, busbw_16/tcp_ring.cpp): ranks are forked
// processes over loopback TCP sockets made before the fork; each writes its
// per-iteration times into shared memory, and the parent reports, per
// iteration, the slowest rank's time (as mccl-bench and mpi-bench do).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

/// A connected pair of loopback TCP sockets with TCP_NODELAY.
inline void connected_pair(int& a, int& b) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in ad{};
  ad.sin_family = AF_INET;
  ad.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof ad;
  if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&ad), n) != 0 || listen(l, 4) != 0
      || getsockname(l, reinterpret_cast<sockaddr*>(&ad), &n) != 0) {
    std::perror("loopback pair: listen");
    std::exit(1);
  }
  a = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(a, reinterpret_cast<sockaddr*>(&ad), sizeof ad) != 0 || (b = accept(l, nullptr, nullptr)) < 0) {
    std::perror("loopback pair: connect");
    std::exit(1);
  }
  close(l);
  int one = 1;
  setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// Waits for the n forked ranks; false if any failed.
inline bool all_ranks_succeeded(int n) {
  int failed = 0;
  for (int r = 0; r < n; ++r) {
    int status = 0;
    wait(&status);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failed == 0;
}

/// times[r * iters + it]: rank r's time of iteration it. Returns the
/// slowest rank's time of each iteration from `first` on, sorted.
inline std::vector<double> sorted_slowest(const double* times, int n, int iters, int first) {
  std::vector<double> slowest;
  for (int it = first; it < iters; ++it) {
    double t = 0;
    for (int r = 0; r < n; ++r)
      t = std::max(t, times[r * iters + it]);
    slowest.push_back(t);
  }
  std::sort(slowest.begin(), slowest.end());
  return slowest;
}
