// Small collectives run to their end inside the call, on the calling
// thread (MCCL_INLINE_BYTES, actors/comm_core.hpp). These tests check when
// that happens, that ranks with different settings (one never drives an op
// in the call, its ops move through the progress actor or its wait())
// interoperate, that frames of neighbouring ops are never lost or mixed up
// whoever drives them, and that the waits end on abort, on a departed peer
// and on a desync.

#include "rank_threads.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using mccl_test::run_ranks;

namespace {

/// Larger ops on the op thread (its own tests: op_thread_test.cpp).
/// Allreduces stay on the links: the host board's stage would take the
/// larger ones (its background path: BoardRsAboveInlineBytes... below).
mccl::config_overrides with_op_thread() {
  mccl::config_overrides o;
  o.set("MCCL_CONNECT_TIMEOUT_MS", 10000);
  o.set("MCCL_SHM_STAGE_BYTES", 0);
  return o;
}

/// Larger ops driven by the progress actor when nobody waits for them.
mccl::config_overrides settings() {
  auto o = with_op_thread();
  o.set("MCCL_OP_THREAD_BYTES", 0);
  return o;
}

mccl::config_overrides actors_only() {
  auto o = settings();
  o.set("MCCL_INLINE_BYTES", 0);
  o.set("MCCL_OP_THREAD_BYTES", 0);
  return o;
}

/// Polls until `w` is done, without driving it (bounded).
bool done_without_waiting(const mccl::work& w) {
  for (int i = 0; i < 10000 && !w.test(); ++i)
    std::this_thread::sleep_for(1ms);
  return w.test();
}

/// An allreduce of `v` above MCCL_INLINE_BYTES, rank 1 arriving 50 ms
/// late: rank 0's call returns before the op ran, and a background driver
/// completes it while nobody waits. Returns it, waited for.
mccl::work issued_late_and_moved_meanwhile(mccl::communicator& comm, std::vector<float>& v) {
  if (comm.rank() == 1)
    std::this_thread::sleep_for(50ms); // rank 0's call must not wait for this
  auto w = comm.allreduce(v.data(), v.size());
  if (comm.rank() == 0) {
    EXPECT_FALSE(w.test()) << "the call ran the op although it is above MCCL_INLINE_BYTES";
  }
  EXPECT_TRUE(done_without_waiting(w)) << "nothing moved the op while nobody waited";
  w.wait();
  EXPECT_FALSE(w.metrics().inline_run);
  return w;
}

/// Every rank contributes (rank + 1) * (i + 1) + k at element k, so a frame
/// of another iteration or element would show.
std::vector<float> contribution(int rank, int iteration, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t k = 0; k < n; ++k)
    v[k] = static_cast<float>((rank + 1) * (iteration + 1) + static_cast<int>(k % 7));
  return v;
}

float expected_sum(int world, int iteration, std::size_t k) {
  float s = 0;
  for (int r = 0; r < world; ++r)
    s += static_cast<float>((r + 1) * (iteration + 1) + static_cast<int>(k % 7));
  return s;
}

} // namespace

TEST(CallerDriven, SmallOpsEndInTheCallLargerOnesReturnAtOnce) {
  mccl::runtime rt;
  auto o = settings();
  o.set("MCCL_INLINE_BYTES", "64K");
  run_ranks(rt, 2, o, [](mccl::communicator& comm) {
    std::vector<float> small(16, 1.0f), large(1 << 20, 1.0f);
    // Every small op is done when its call returns. Its last pass may be
    // the watchdog's tick that found the engine free (every quarter
    // heartbeat interval), so a few may say the actor completed them.
    int inline_runs = 0;
    for (int i = 0; i < 50; ++i) {
      std::fill(small.begin(), small.end(), 1.0f);
      auto w = comm.allreduce(small.data(), small.size());
      EXPECT_TRUE(w.test()) << "op " << i << " was not done when its call returned";
      inline_runs += w.metrics().inline_run ? 1 : 0;
      w.wait();
      ASSERT_EQ(small[3], 2.0f);
    }
    EXPECT_GE(inline_runs, 45);

    // Above MCCL_INLINE_BYTES (64K here) the call returns at once; with the
    // op thread off and nobody waiting, the progress actor moves it.
    auto big = issued_late_and_moved_meanwhile(comm, large);
    EXPECT_EQ(big.metrics().driver, mccl::driver_kind::actor);
    EXPECT_EQ(large[12345], 2.0f);

    // While a large op is in flight a small one is numbered after it and
    // moves with it (whoever drives the engine drives both).
    std::fill(small.begin(), small.end(), 2.0f);
    auto first = comm.allreduce(large.data(), large.size());
    auto second = comm.allreduce(small.data(), small.size());
    first.wait();
    second.wait();
    EXPECT_EQ(small[0], 4.0f);
    EXPECT_EQ(large[0], 4.0f);
    EXPECT_EQ(second.metrics().seq, first.metrics().seq + 1);
  });
}

TEST(CallerDriven, BoardRsAboveInlineBytesReturnsAtOnceAndTheBoardThreadMovesItInOrder) {
  mccl::runtime rt;
  auto o = with_op_thread();
  o.set("MCCL_INLINE_BYTES", "64K");
  o.set("MCCL_SHM_STAGE_BYTES", "1M");
  run_ranks(rt, 3, o, [](mccl::communicator& comm) {
    // 4 MiB: above MCCL_INLINE_BYTES, so the call returns before the op
    // ran; nobody waits, so the board thread runs it.
    std::vector<float> large(1 << 20, 1.0f), small(16, 1.0f);
    auto big = issued_late_and_moved_meanwhile(comm, large);
    EXPECT_EQ(big.metrics().algorithm, "board_rs");
    EXPECT_EQ(big.metrics().driver, mccl::driver_kind::op_thread) << "the board thread";
    EXPECT_EQ(large[12345], 3.0f);

    // Posted ops, then a small one in the call, then a wait: every rank
    // runs the board in the order it numbered the ops, whoever runs them
    // (the board thread, or the caller that waits or issues the next).
    for (int round = 0; round < 20; ++round) {
      std::fill(large.begin(), large.end(), static_cast<float>(comm.rank() + round));
      std::vector<float> second(large.size(), 1.0f);
      std::fill(small.begin(), small.end(), 2.0f);
      auto a = comm.allreduce(large.data(), large.size());
      auto b = comm.allreduce(second.data(), second.size());
      auto c = comm.allreduce(small.data(), small.size()); // in the call, after a and b
      // (a and b ran before it, here or on the board thread, which may
      // deliver their completions a moment later.)
      EXPECT_TRUE(c.test()) << "a small op ends in its call";
      b.wait();
      a.wait();
      ASSERT_EQ(large[777], static_cast<float>(0 + 1 + 2 + 3 * round));
      ASSERT_EQ(second[4321], 3.0f);
      ASSERT_EQ(small[5], 6.0f);
      EXPECT_EQ(b.metrics().seq, a.metrics().seq + 1);
      EXPECT_EQ(c.metrics().seq, b.metrics().seq + 1);
    }

    // A Work's callback may issue the next board op (as a DDP comm hook
    // chains them): whoever ran the first op let go of the board before
    // completing it.
    std::vector<float> chained(large.size(), 1.0f);
    std::fill(large.begin(), large.end(), 1.0f);
    std::mutex m;
    std::condition_variable cv;
    mccl::work next;
    auto first = comm.allreduce(large.data(), large.size());
    first.on_complete([&] {
      auto w = comm.allreduce(chained.data(), chained.size());
      std::lock_guard<std::mutex> guard{m};
      next = w;
      cv.notify_all();
    });
    first.wait();
    {
      std::unique_lock<std::mutex> lock{m};
      ASSERT_TRUE(cv.wait_for(lock, 30s, [&] { return next.valid(); })) << "the callback's op was never issued";
    }
    next.wait();
    EXPECT_EQ(chained[99], 3.0f);
    EXPECT_EQ(next.metrics().seq, first.metrics().seq + 1);
  });
}

TEST(CallerDriven, CanBeTurnedOff) {
  mccl::runtime rt;
  run_ranks(rt, 2, actors_only(), [](mccl::communicator& comm) {
    float x = 1;
    if (comm.rank() == 1)
      std::this_thread::sleep_for(50ms);
    auto w = comm.allreduce(&x, 1);
    if (comm.rank() == 0) {
      EXPECT_FALSE(w.test()) << "MCCL_INLINE_BYTES=0, yet the call ran the op";
    }
    ASSERT_TRUE(done_without_waiting(w));
    EXPECT_FALSE(w.metrics().inline_run);
    EXPECT_EQ(w.metrics().driver, mccl::driver_kind::actor);
    EXPECT_EQ(x, 2.0f);
  });
}

TEST(CallerDriven, InteroperatesWithPeersThatNeverRunOpsInTheCall) {
  // Rank 1 runs no op inside the call (its waits and its progress actor
  // move them); ranks 0 and 2 run small ones in the call.
  // Every op kind, alternating with large ops, many times over.
  mccl::runtime rt;
  constexpr int world = 3;
  run_ranks(rt, world, [](int r) { return r == 1 ? actors_only() : settings(); },
            [](mccl::communicator& comm) {
              int r = comm.rank();
              bool inline_seen = false;
              for (int i = 0; i < 60; ++i) {
                std::size_t n = i % 5 == 4 ? 100000 : 1 + static_cast<std::size_t>(i % 9) * 37;
                auto v = contribution(r, i, n);
                auto w = comm.allreduce(v.data(), n);
                w.wait();
                inline_seen |= w.metrics().inline_run;
                for (std::size_t k = 0; k < n; k += 13)
                  ASSERT_EQ(v[k], expected_sum(world, i, k)) << "iteration " << i << " element " << k;

                int root = i % world;
                std::vector<int32_t> b(8, r == root ? i * 10 + root : -1);
                comm.broadcast(b.data(), b.size(), mccl::dtype::int32, root).wait();
                ASSERT_EQ(b[7], i * 10 + root) << "iteration " << i;

                std::vector<int32_t> mine(3, r * 1000 + i), all(3 * world, -1);
                comm.allgather(mine.data(), all.data(), 3, mccl::dtype::int32).wait();
                for (int p = 0; p < world; ++p)
                  ASSERT_EQ(all[static_cast<std::size_t>(p) * 3 + 2], p * 1000 + i) << "iteration " << i;

                if (i % 10 == 0)
                  comm.barrier().wait();
              }
              if (r != 1) {
                EXPECT_TRUE(inline_seen);
              }
            });
}

TEST(CallerDriven, LargeOpsReadTheirPayloadsStraightToWhereTheyGo) {
  // Frames of 32 KiB and more are read straight into the caller's buffer
  // (broadcast, allgather: receive in place) or into pooled memory
  // (allreduce), not through the connection's receive buffer. Odd sizes, so
  // a frame rarely ends where a read does; rank 2's progress actor moves
  // what its waits do not.
  mccl::runtime rt;
  constexpr int world = 3;
  run_ranks(rt, world, [](int r) { return r == 2 ? actors_only() : with_op_thread(); },
            [](mccl::communicator& comm) {
              int r = comm.rank();
              int inline_runs = 0;
              for (int i = 0; i < 6; ++i) {
                std::size_t n = 700001 + static_cast<std::size_t>(i) * 99991;
                auto v = contribution(r, i, n);
                auto w = comm.allreduce(v.data(), n);
                w.wait();
                inline_runs += w.metrics().inline_run || w.metrics().op_thread;
                for (std::size_t k = 0; k < n; ++k)
                  ASSERT_EQ(v[k], expected_sum(world, i, k)) << "iteration " << i << " element " << k;

                int root = i % world;
                std::vector<uint8_t> b(3 * 1048576 + 5 + static_cast<std::size_t>(i));
                for (std::size_t k = 0; k < b.size(); ++k)
                  b[k] = r == root ? static_cast<uint8_t>(k * 31 + static_cast<std::size_t>(i)) : 0;
                comm.broadcast(b.data(), b.size(), mccl::dtype::uint8, root).wait();
                for (std::size_t k = 0; k < b.size(); ++k)
                  ASSERT_EQ(b[k], static_cast<uint8_t>(k * 31 + static_cast<std::size_t>(i)))
                    << "iteration " << i << " byte " << k;

                std::size_t m = 200003;
                std::vector<int32_t> mine(m), all(m * world, -1);
                for (std::size_t k = 0; k < m; ++k)
                  mine[k] = r * 1000000 + static_cast<int32_t>(k) + i;
                comm.allgather(mine.data(), all.data(), m, mccl::dtype::int32).wait();
                for (int p = 0; p < world; ++p)
                  for (std::size_t k = 0; k < m; ++k)
                    ASSERT_EQ(all[static_cast<std::size_t>(p) * m + k], p * 1000000 + static_cast<int32_t>(k) + i)
                      << "iteration " << i << " rank " << p << " element " << k;
              }
              if (r != 2) {
                EXPECT_GT(inline_runs, 0);
              }
            });
}

TEST(CallerDriven, LargeFramesOfTheNextOpWaitForIt) {
  // A rank that runs ahead sends the next (large) op's frames while its
  // peer still reads the current one: those frames wait for their op, and
  // each op gets exactly its own bytes.
  mccl::runtime rt;
  run_ranks(rt, 2, with_op_thread(), [](mccl::communicator& comm) {
    int r = comm.rank();
    for (int i = 0; i < 40; ++i) {
      auto a = contribution(r, i, 100000 + static_cast<std::size_t>(i));
      auto b = contribution(r, i + 1000, 300007);
      auto wa = comm.allreduce(a.data(), a.size());
      auto wb = comm.allreduce(b.data(), b.size());
      wa.wait();
      wb.wait();
      for (std::size_t k = 0; k < a.size(); k += 7)
        ASSERT_EQ(a[k], expected_sum(2, i, k)) << "iteration " << i << " element " << k;
      for (std::size_t k = 0; k < b.size(); k += 7)
        ASSERT_EQ(b[k], expected_sum(2, i + 1000, k)) << "iteration " << i << " element " << k;
    }
  });
}

TEST(CallerDriven, AsyncAndInlineOpsAlternateWithoutMixingFrames) {
  // Some iterations issue two ops back to back without waiting, others one
  // small op (run in the call): a rank that runs ahead leaves frames of the
  // next op in the other's connection.
  mccl::runtime rt;
  run_ranks(rt, 2, settings(), [](mccl::communicator& comm) {
    int r = comm.rank();
    for (int i = 0; i < 200; ++i) {
      auto a = contribution(r, i, 5);
      if (i % 3 == 0) {
        auto b = contribution(r, i + 1000, 3000);
        auto wa = comm.allreduce(a.data(), a.size());
        auto wb = comm.allreduce(b.data(), b.size());
        wa.wait();
        wb.wait();
        ASSERT_EQ(b[2999], expected_sum(2, i + 1000, 2999)) << "iteration " << i;
      } else {
        comm.allreduce(a.data(), a.size()).wait();
      }
      ASSERT_EQ(a[4], expected_sum(2, i, 4)) << "iteration " << i;
    }
  });
}

TEST(CallerDriven, DesyncAcrossPathsFailsOnEveryRank) {
  mccl::runtime rt;
  run_ranks(rt, 2, [](int r) { return r == 1 ? actors_only() : settings(); },
            [](mccl::communicator& comm) {
              std::vector<float> v(4, 1.0f);
              try {
                if (comm.rank() == 0)
                  comm.allreduce(v.data(), v.size()).wait();
                else
                  comm.broadcast(v.data(), v.size(), mccl::dtype::float32, 1).wait();
                ADD_FAILURE() << "rank " << comm.rank() << ": mismatched ops succeeded";
              } catch (const mccl::error& e) {
                EXPECT_EQ(e.code(), mccl::errc::desync) << e.what();
                EXPECT_NE(std::string(e.what()).find("issued different collectives"), std::string::npos)
                  << e.what();
              }
            });
}

TEST(CallerDriven, AbortFromAnotherThreadEndsTheWait) {
  mccl::runtime rt;
  auto o = settings();
  o.set("MCCL_TIMEOUT_MS", 30000);
  run_ranks(rt, 2, o, [](mccl::communicator& comm) {
    if (comm.rank() == 0) {
      std::this_thread::sleep_for(1500ms); // issues nothing meanwhile
      return;
    }
    std::thread aborter([comm]() mutable {
      std::this_thread::sleep_for(200ms);
      comm.abort("stopped by the test");
    });
    auto t0 = std::chrono::steady_clock::now();
    float x = 1;
    try {
      comm.allreduce(&x, 1).wait();
      ADD_FAILURE() << "allreduce without a partner succeeded";
    } catch (const mccl::error& e) {
      EXPECT_EQ(e.code(), mccl::errc::aborted) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
    aborter.join();
  });
}

TEST(CallerDriven, PeerThatFinalizesWithoutTheOpFailsItPromptly) {
  mccl::runtime rt;
  auto o = settings();
  o.set("MCCL_TIMEOUT_MS", 30000);
  run_ranks(rt, 2, o, [](mccl::communicator& comm) {
    float x = 1;
    comm.allreduce(&x, 1).wait(); // both take part in seq 0
    if (comm.rank() == 0)
      return; // finalizes after one op
    auto t0 = std::chrono::steady_clock::now();
    try {
      comm.allreduce(&x, 1).wait();
      ADD_FAILURE() << "allreduce after the peer finalized succeeded";
    } catch (const mccl::error& e) {
      EXPECT_EQ(e.code(), mccl::errc::peer_lost) << e.what();
      EXPECT_NE(std::string(e.what()).find("finalized"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  });
}
