// mccl_recovery: rank program of tests/multiproc/recovery_test.py, one rank
// per process, configured by RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT.
//
//   mccl_recovery shrink COUNT VICTIM  allreduce in a loop until an op fails
//                                      (the harness SIGKILLs VICTIM), then
//                                      shrink without VICTIM and check 5
//                                      allreduces on the survivors
//   mccl_recovery desync               rank 0 issues allreduce, the others
//                                      broadcast: every rank must fail with
//                                      errc::desync
//   mccl_recovery soak OPS SEED        OPS random collectives (op, size,
//                                      1-4 in flight at once), every element
//                                      checked; prints RSS half way and
//                                      at the end
//
// Exit status: 0 passed, 1 a check failed, 2 usage.

#include <mccl/mccl.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>
#include <unistd.h>

namespace {

int run_shrink(mccl::communicator& comm, std::size_t count, int victim) {
  int r = comm.rank();
  std::vector<float> data(count, 1.0f);
  std::printf("rank %d: stress started\n", r);
  std::fflush(stdout);
  try {
    for (;;)
      comm.allreduce(data.data(), count).wait();
  } catch (const mccl::error& e) {
    std::printf("rank %d: op failed: %s\n", r, e.what());
    std::fflush(stdout);
  }
  auto small = comm.shrink({victim});
  int64_t expected = 0;
  for (int k = 0; k < comm.size(); ++k)
    if (k != victim)
      expected += k + 1;
  int bad = 0;
  for (int round = 0; round < 5; ++round) {
    std::vector<int64_t> v(count, r + 1);
    small.allreduce(v.data(), v.size()).wait();
    for (auto x : v)
      if (x != expected) {
        ++bad;
        std::fprintf(stderr, "rank %d: round %d after shrink: %lld, expected %lld\n", r, round,
                     static_cast<long long>(x), static_cast<long long>(expected));
        break;
      }
  }
  std::printf("rank %d: shrunk to rank %d of %d, %d bad allreduce(s) of 5\n", r, small.rank(),
              small.size(), bad);
  small.finalize();
  return bad ? 1 : 0;
}

int run_desync(mccl::communicator& comm) {
  std::vector<float> data(64, 1.0f);
  try {
    if (comm.rank() == 0)
      comm.allreduce(data.data(), data.size()).wait();
    else
      comm.broadcast(data.data(), data.size(), 0).wait();
  } catch (const mccl::error& e) {
    std::printf("rank %d: %s error: %s\n", comm.rank(), mccl::to_string(e.code()), e.what());
    return e.code() == mccl::errc::desync ? 0 : 1;
  }
  std::printf("rank %d: the mismatched op succeeded\n", comm.rank());
  return 1;
}

long rss_kib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/// One op of the soak with its buffers, kept until it is waited on.
struct soak_op {
  int kind = 0;
  int root = 0;
  std::size_t count = 0;
  uint32_t salt = 0;
  std::vector<int32_t> send, recv;
  mccl::work w;
};

int32_t value(int rank, std::size_t i, uint32_t salt) {
  return static_cast<int32_t>((rank * 31 + i * 7 + salt) % 1000);
}

const char* const soak_names[] = {"allreduce", "broadcast", "allgather", "reduce_scatter",
                                  "alltoall", "barrier"};

void start(mccl::communicator& comm, soak_op& op) {
  int r = comm.rank(), n = comm.size();
  std::size_t c = op.count;
  auto fill = [&](std::size_t len) {
    op.send.resize(len);
    for (std::size_t i = 0; i < len; ++i)
      op.send[i] = value(r, i, op.salt);
  };
  switch (op.kind) {
    case 0: fill(c); op.w = comm.allreduce(op.send.data(), c); break;
    case 1: fill(c); op.w = comm.broadcast(op.send.data(), c, op.root); break;
    case 2: fill(c); op.recv.resize(c * n); op.w = comm.allgather(op.send.data(), op.recv.data(), c, mccl::dtype::int32); break;
    case 3: fill(c * n); op.recv.resize(c); op.w = comm.reduce_scatter(op.send.data(), op.recv.data(), c, mccl::dtype::int32, mccl::redop::sum); break;
    case 4: fill(c * n); op.recv.resize(c * n); op.w = comm.alltoall(op.send.data(), op.recv.data(), c, mccl::dtype::int32); break;
    default: op.w = comm.barrier(); break;
  }
}

/// Number of wrong elements (reported once per op).
std::size_t check(mccl::communicator& comm, soak_op& op, long index) {
  int r = comm.rank(), n = comm.size();
  std::size_t c = op.count, bad = 0, first = 0;
  int64_t got = 0, want = 0;
  auto expect = [&](std::size_t i, int64_t g, int64_t w) {
    if (g != w && bad++ == 0) {
      first = i;
      got = g;
      want = w;
    }
  };
  auto sum_at = [&](std::size_t i) {
    int64_t s = 0;
    for (int k = 0; k < n; ++k)
      s += value(k, i, op.salt);
    return s;
  };
  switch (op.kind) {
    case 0: for (std::size_t i = 0; i < c; ++i) expect(i, op.send[i], sum_at(i)); break;
    case 1: for (std::size_t i = 0; i < c; ++i) expect(i, op.send[i], value(op.root, i, op.salt)); break;
    case 2:
      for (int k = 0; k < n; ++k)
        for (std::size_t i = 0; i < c; ++i) expect(k * c + i, op.recv[k * c + i], value(k, i, op.salt));
      break;
    case 3: for (std::size_t i = 0; i < c; ++i) expect(i, op.recv[i], sum_at(r * c + i)); break;
    case 4:
      for (int k = 0; k < n; ++k)
        for (std::size_t i = 0; i < c; ++i)
          expect(k * c + i, op.recv[k * c + i], value(k, r * c + i, op.salt));
      break;
    default: break;
  }
  if (bad)
    std::fprintf(stderr, "rank %d: soak op %ld (%s, count %zu): %zu wrong element(s), first %zu is %lld, expected %lld\n",
                 r, index, soak_names[op.kind], c, bad, first, static_cast<long long>(got),
                 static_cast<long long>(want));
  return bad;
}

int run_soak(mccl::communicator& comm, long ops, uint64_t seed) {
  // Every rank draws the same sequence, so all issue the same ops.
  std::mt19937_64 rng(seed);
  long done = 0, rss_half = 0;
  std::size_t wrong = 0, elements = 0;
  while (done < ops) {
    int batch = static_cast<int>(1 + rng() % 4);
    std::vector<std::unique_ptr<soak_op>> flight;
    for (int b = 0; b < batch && done + b < ops; ++b) {
      auto op = std::make_unique<soak_op>();
      op->kind = static_cast<int>(rng() % 6);
      // Mostly small ops (the inline and latency paths), now and then up to
      // 256K elements (chunked, pipelined); 0 included.
      int shift = static_cast<int>(rng() % 19);
      op->count = rng() % 8 == 0 ? (std::size_t{1} << shift) + rng() % 3 : rng() % 300;
      op->root = static_cast<int>(rng() % comm.size());
      op->salt = static_cast<uint32_t>(rng());
      start(comm, *op);
      flight.push_back(std::move(op));
    }
    for (auto& op : flight) {
      op->w.wait();
      wrong += check(comm, *op, done);
      elements += op->count;
      ++done;
      if (done == ops / 2)
        rss_half = rss_kib();
    }
    if (done == static_cast<long>(flight.size())) {
      // Tests cut the network after this: the first ops connected and ran.
      std::printf("rank %d: soak started\n", comm.rank());
      std::fflush(stdout);
    }
  }
  std::printf("rank %d: soak %ld ops, %zu elements, %zu wrong, rss after half %ld KiB, at the end %ld KiB\n",
              comm.rank(), done, elements, wrong, rss_half, rss_kib());
  return wrong ? 1 : 0;
}

} // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  auto arg = [&](int i, unsigned long long fallback) {
    return argc > i ? std::strtoull(argv[i], nullptr, 10) : fallback;
  };
  if (mode != "shrink" && mode != "desync" && mode != "soak") {
    std::fprintf(stderr, "usage: mccl_recovery shrink COUNT VICTIM | desync | soak OPS SEED\n");
    return 2;
  }
  try {
    mccl::runtime rt;
    auto comm = rt.communicator_from_env();
    int rc = 2;
    if (mode == "shrink") rc = run_shrink(comm, arg(2, 1 << 20), static_cast<int>(arg(3, 1)));
    else if (mode == "desync") rc = run_desync(comm);
    else rc = run_soak(comm, static_cast<long>(arg(2, 1000)), arg(3, 1));
    comm.finalize();
    std::fflush(stdout);
    return rc;
  } catch (const mccl::error& e) {
    std::fprintf(stderr, "mccl_recovery: %s\n", e.what());
    return 1;
  }
}
