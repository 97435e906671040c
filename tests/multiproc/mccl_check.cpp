// mccl_check: the rank program of the multi-process tests. Each mode runs
// collectives over the ranks given by RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT
// and checks every element against a reference each rank computes locally
// (every rank's input is a known function of its rank and index).
//
//   mccl_check allreduce COUNT...    sum/prod/min/max/avg, float32+float64,
//                                    in place and out of place
//   mccl_check broadcast COUNT...    from every root
//   mccl_check barrier               nobody leaves before everybody entered
//   mccl_check stress COUNT [MS]     allreduce in a loop until an op fails;
//                                    prints "op failed after N ms: <error>",
//                                    then stays MS ms (default 0) before it
//                                    finalizes (a peer it gave up on may
//                                    wake up meanwhile)
//   mccl_check striped COUNT...      allreduce, broadcast and ops as above, then
//                                    small allreduces that must run inline at
//                                    least once (for several sockets per peer)
//   mccl_check liveness SECONDS COUNT
//                                    allreduce COUNT floats back to back for
//                                    SECONDS, checking each result: no rank
//                                    may be declared dead meanwhile
//   mccl_check late-rank MS          rank 1 computes (sleeps) MS before each
//                                    allreduce (count 1, then 262147): a slow
//                                    but live rank must not be declared dead
//   mccl_check finalize-alone        rank 1 exits at once; rank 0 waits until
//                                    the link is gone, then finalizes
//
// Exit status: 0 all checks passed, 1 a check failed, 3 an op failed (stress).

#include <mccl/mccl.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

/// Input of rank r at index i: small integers (exact in float32 sums and
/// products), different per rank so that the reduction order matters.
template <class T>
T input(int r, std::size_t i, mccl::redop op) {
  if (op == mccl::redop::prod)
    return static_cast<T>(1 + (r + i) % 2); // products stay small: at most 2^world
  return static_cast<T>(static_cast<int>((r * 7 + i * 13) % 31) - 10);
}

template <class T>
T expected(int world, std::size_t i, mccl::redop op) {
  T acc = input<T>(0, i, op);
  for (int r = 1; r < world; ++r) {
    T x = input<T>(r, i, op);
    switch (op) {
      case mccl::redop::sum:
      case mccl::redop::avg: acc += x; break;
      case mccl::redop::prod: acc *= x; break;
      case mccl::redop::min: acc = std::min(acc, x); break;
      case mccl::redop::max: acc = std::max(acc, x); break;
      default: break;
    }
  }
  if (op == mccl::redop::avg)
    acc /= static_cast<T>(world);
  return acc;
}

int failures = 0;

template <class T>
void check_allreduce(mccl::communicator& comm, std::size_t count, mccl::redop op, bool in_place) {
  int rank = comm.rank(), world = comm.size();
  std::vector<T> send(count), recv(count, T(-99));
  for (std::size_t i = 0; i < count; ++i)
    send[i] = input<T>(rank, i, op);
  if (in_place)
    comm.allreduce(send.data(), count, mccl::dtype_of<T>(), op).wait();
  else
    comm.allreduce(send.data(), recv.data(), count, mccl::dtype_of<T>(), op).wait();
  const auto& out = in_place ? send : recv;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < count; ++i) {
    T want = expected<T>(world, i, op);
    // avg divides: allow one rounding step; everything else is exact.
    bool ok = op == mccl::redop::avg ? std::fabs(double(out[i]) - double(want)) <= 1e-6 * (1 + std::fabs(double(want)))
                                     : out[i] == want;
    if (!ok && bad++ < 3)
      std::fprintf(stderr, "rank %d: allreduce %s %s count %zu %s: element %zu is %g, expected %g\n",
                   rank, mccl::to_string(mccl::dtype_of<T>()), mccl::to_string(op), count,
                   in_place ? "in place" : "out of place", i, double(out[i]), double(want));
  }
  if (bad)
    ++failures;
}

int run_allreduce(mccl::communicator& comm, const std::vector<std::size_t>& counts) {
  int cases = 0;
  for (auto count : counts)
    for (auto op : {mccl::redop::sum, mccl::redop::prod, mccl::redop::min, mccl::redop::max, mccl::redop::avg})
      for (bool in_place : {true, false}) {
        // The 16M-element case runs sum in float32 only: it is about size.
        if (count > (1u << 20) && (op != mccl::redop::sum || !in_place)) continue;
        check_allreduce<float>(comm, count, op, in_place);
        if (count <= (1u << 20))
          check_allreduce<double>(comm, count, op, in_place);
        ++cases;
      }
  std::printf("rank %d: allreduce: %d case(s), %d failure(s)\n", comm.rank(), cases, failures);
  return failures ? 1 : 0;
}

int run_broadcast(mccl::communicator& comm, const std::vector<std::size_t>& counts) {
  for (auto count : counts)
    for (int root = 0; root < comm.size(); ++root) {
      std::vector<int32_t> data(count);
      for (std::size_t i = 0; i < count; ++i)
        data[i] = comm.rank() == root ? static_cast<int32_t>(i * 3 + root) : -1;
      comm.broadcast(data.data(), count, root).wait();
      for (std::size_t i = 0; i < count; ++i)
        if (data[i] != static_cast<int32_t>(i * 3 + root)) {
          std::fprintf(stderr, "rank %d: broadcast count %zu root %d: element %zu is %d\n",
                       comm.rank(), count, root, i, data[i]);
          ++failures;
          break;
        }
    }
  std::printf("rank %d: broadcast: %d failure(s)\n", comm.rank(), failures);
  return failures ? 1 : 0;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int run_barrier(mccl::communicator& comm) {
  for (int round = 0; round < 5; ++round) {
    // Ranks arrive at different times; nobody may leave before the last arrived.
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * ((comm.rank() + round) % comm.size())));
    double entered = now_ms();
    comm.barrier().wait();
    double left = now_ms();
    double last_entry = entered;
    comm.allreduce(&last_entry, 1, mccl::redop::max).wait();
    if (left + 0.5 < last_entry) { // 0.5 ms slack for clock reads
      std::fprintf(stderr, "rank %d: left barrier round %d at %.3f before the last rank entered at %.3f\n",
                   comm.rank(), round, left, last_entry);
      ++failures;
    }
  }
  std::printf("rank %d: barrier: %d failure(s)\n", comm.rank(), failures);
  return failures ? 1 : 0;
}

int run_stress(mccl::communicator& comm, std::size_t count, std::size_t linger_ms) {
  std::vector<float> data(count, 1.0f);
  std::printf("rank %d: stress started\n", comm.rank());
  std::fflush(stdout);
  for (long it = 0;; ++it) {
    auto t0 = clock_type::now();
    try {
      comm.allreduce(data.data(), count).wait();
    } catch (const mccl::error& e) {
      auto ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
      std::printf("rank %d: op failed after %.0f ms: %s\n", comm.rank(), ms, e.what());
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::milliseconds(linger_ms));
      return 3;
    }
    std::fill(data.begin(), data.end(), 1.0f);
  }
}

int run_liveness(mccl::communicator& comm, std::size_t seconds, std::size_t count) {
  // Large ops back to back, no compute in between: whatever pairs the
  // algorithm leaves without data, every peer must keep hearing from every
  // other. Rank 0 decides when to stop (a broadcast), so all ranks issue
  // the same ops.
  std::vector<float> data(count);
  const int n = comm.size();
  const float want = static_cast<float>(n * (n + 1) / 2);
  auto t0 = clock_type::now();
  long ops = 0;
  for (;;) {
    int32_t go = std::chrono::duration<double>(clock_type::now() - t0).count() < static_cast<double>(seconds);
    try {
      comm.broadcast(&go, 1, mccl::dtype::int32, 0).wait();
      if (!go)
        break;
      std::fill(data.begin(), data.end(), static_cast<float>(comm.rank() + 1));
      comm.allreduce(data.data(), count).wait();
    } catch (const mccl::error& e) {
      auto s = std::chrono::duration<double>(clock_type::now() - t0).count();
      std::printf("rank %d: op failed after %.1f s and %ld allreduce(s): %s\n", comm.rank(), s, ops, e.what());
      std::fflush(stdout);
      return 3;
    }
    for (std::size_t i = 0; i < count; i += count / 7 + 1)
      if (data[i] != want) {
        std::printf("rank %d: allreduce %ld: element %zu is %g, expected %g\n", comm.rank(), ops, i,
                    static_cast<double>(data[i]), static_cast<double>(want));
        return 1;
      }
    ++ops;
  }
  auto s = std::chrono::duration<double>(clock_type::now() - t0).count();
  std::printf("rank %d: liveness: %ld allreduce(s) of %zu floats in %.1f s, every rank alive\n", comm.rank(),
              ops, count, s);
  return 0;
}

int run_late_rank(mccl::communicator& comm, std::size_t ms) {
  for (std::size_t count : {std::size_t{1}, std::size_t{262147}}) {
    if (comm.rank() == 1)
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    check_allreduce<float>(comm, count, mccl::redop::sum, true);
  }
  std::printf("rank %d: late-rank: %d failure(s)\n", comm.rank(), failures);
  return failures ? 1 : 0;
}

int run_finalize_alone(mccl::communicator& comm) {
  comm.barrier().wait();
  if (comm.rank() != 0) {
    std::fflush(stdout);
    _exit(0); // vanish without finalize, as a crashed peer would
  }
  // Let the peer's exit reach us, then time finalize; the harness times the
  // whole exit from this line on.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::printf("rank 0: finalize starts\n");
  std::fflush(stdout);
  comm.finalize();
  return 0;
}

/// Every collective once per count, plus a point-to-point ring and a split,
/// across real processes; int64 sums, so every result is exact.
int run_ops(mccl::communicator& comm, const std::vector<std::size_t>& counts) {
  const int n = comm.size(), r = comm.rank();
  auto value = [](int rank, std::size_t i) { return static_cast<int64_t>(rank) * 1000003 + static_cast<int64_t>(i); };
  auto fail = [&](const char* op, std::size_t count, std::size_t i, int64_t got, int64_t want) {
    std::fprintf(stderr, "rank %d: %s count %zu: element %zu is %lld, expected %lld\n", r, op, count, i,
                 static_cast<long long>(got), static_cast<long long>(want));
    ++failures;
  };
  auto sum_of = [&](std::size_t i) {
    int64_t s = 0;
    for (int k = 0; k < n; ++k)
      s += value(k, i);
    return s;
  };
  for (auto count : counts) {
    std::vector<int64_t> mine(count), all(count * n), out(count * n), big(count * n);
    for (std::size_t i = 0; i < count; ++i)
      mine[i] = value(r, i);
    for (std::size_t i = 0; i < count * n; ++i)
      big[i] = value(r, i);
    comm.allgather(mine.data(), all.data(), count, mccl::dtype::int64).wait();
    for (int k = 0; k < n; ++k)
      for (std::size_t i = 0; i < count; ++i)
        if (all[k * count + i] != value(k, i)) { fail("allgather", count, i, all[k * count + i], value(k, i)); break; }
    std::vector<int64_t> part(count);
    comm.reduce_scatter(big.data(), part.data(), count, mccl::dtype::int64).wait();
    for (std::size_t i = 0; i < count; ++i)
      if (part[i] != sum_of(r * count + i)) { fail("reduce_scatter", count, i, part[i], sum_of(r * count + i)); break; }
    std::vector<int64_t> red(count, -1);
    comm.reduce(mine.data(), red.data(), count, mccl::dtype::int64, mccl::redop::sum, n - 1).wait();
    if (r == n - 1)
      for (std::size_t i = 0; i < count; ++i)
        if (red[i] != sum_of(i)) { fail("reduce", count, i, red[i], sum_of(i)); break; }
    comm.alltoall(big.data(), out.data(), count, mccl::dtype::int64).wait();
    for (int k = 0; k < n; ++k)
      for (std::size_t i = 0; i < count; ++i)
        if (out[k * count + i] != value(k, r * count + i)) { fail("alltoall", count, i, out[k * count + i], value(k, r * count + i)); break; }
    comm.gather(mine.data(), out.data(), count, mccl::dtype::int64, 0).wait();
    if (r == 0)
      for (int k = 0; k < n; ++k)
        for (std::size_t i = 0; i < count; ++i)
          if (out[k * count + i] != value(k, i)) { fail("gather", count, i, out[k * count + i], value(k, i)); break; }
    std::vector<int64_t> piece(count);
    comm.scatter(big.data(), piece.data(), count, mccl::dtype::int64, 0).wait();
    for (std::size_t i = 0; i < count; ++i)
      if (piece[i] != value(0, r * count + i)) { fail("scatter", count, i, piece[i], value(0, r * count + i)); break; }
    if (n > 1) { // a ring of tagged messages, receive posted first
      std::vector<int64_t> got(count, -1);
      auto rx = comm.recv(got.data(), count, (r + n - 1) % n, 7);
      auto tx = comm.send(mine.data(), count, (r + 1) % n, 7);
      tx.wait();
      rx.wait();
      for (std::size_t i = 0; i < count; ++i)
        if (got[i] != value((r + n - 1) % n, i)) { fail("send/recv", count, i, got[i], value((r + n - 1) % n, i)); break; }
    }
  }
  auto half = comm.split(r % 2, r);
  int64_t one = 1;
  half.allreduce(&one, 1).wait();
  if (one != half.size()) fail("split allreduce", 1, 0, one, half.size());
  half.finalize();
  std::printf("rank %d: ops: %d failure(s)\n", r, failures);
  return failures ? 1 : 0;
}

/// Every collective, then small allreduces: with nothing else in flight at
/// least one of them must take the inline path (the caller's thread polls
/// the connections itself), whatever the connections are made of.
int run_striped(mccl::communicator& comm, const std::vector<std::size_t>& counts) {
  int rc = run_allreduce(comm, counts);
  rc |= run_broadcast(comm, counts);
  rc |= run_ops(comm, counts);
  if (comm.size() < 2)
    return rc;
  constexpr int rounds = 50;
  int inline_runs = 0;
  for (int i = 0; i < rounds; ++i) {
    std::vector<float> v(16, float(comm.rank()));
    auto work = comm.allreduce(v.data(), v.size(), mccl::dtype::float32, mccl::redop::sum);
    work.wait();
    inline_runs += work.metrics().inline_run;
    float want = float(comm.size() * (comm.size() - 1) / 2);
    if (v[0] != want || v[15] != want) {
      std::fprintf(stderr, "rank %d: small allreduce %d gave %g, expected %g\n", comm.rank(), i,
                   double(v[0]), double(want));
      rc = 1;
    }
  }
  std::printf("rank %d: inline: %d of %d small allreduces\n", comm.rank(), inline_runs, rounds);
  if (inline_runs == 0) {
    std::fprintf(stderr, "rank %d: no small allreduce ran inline\n", comm.rank());
    rc = 1;
  }
  return rc;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: mccl_check allreduce|broadcast|barrier|ops|stress|liveness|late-rank|finalize-alone [COUNT...]\n");
    return 2;
  }
  std::string mode = argv[1];
  std::vector<std::size_t> counts;
  for (int i = 2; i < argc; ++i)
    counts.push_back(std::strtoull(argv[i], nullptr, 10));
  try {
    mccl::runtime rt;
    auto comm = rt.communicator_from_env();
    int rc = 2;
    if (mode == "allreduce") rc = run_allreduce(comm, counts);
    else if (mode == "broadcast") rc = run_broadcast(comm, counts);
    else if (mode == "barrier") rc = run_barrier(comm);
    else if (mode == "ops") rc = run_ops(comm, counts);
    else if (mode == "striped") rc = run_striped(comm, counts);
    else if (mode == "stress")
      rc = run_stress(comm, counts.empty() ? (1u << 22) : counts[0], counts.size() > 1 ? counts[1] : 0);
    else if (mode == "finalize-alone") rc = run_finalize_alone(comm);
    else if (mode == "late-rank") rc = run_late_rank(comm, counts.empty() ? 3000 : counts[0]);
    else if (mode == "liveness")
      rc = run_liveness(comm, counts.empty() ? 60 : counts[0], counts.size() > 1 ? counts[1] : (1u << 22));
    else std::fprintf(stderr, "mccl_check: unknown mode %s\n", mode.c_str());
    comm.finalize();
    return rc;
  } catch (const mccl::error& e) {
    std::fprintf(stderr, "mccl_check: %s\n", e.what());
    return 1;
  }
}
