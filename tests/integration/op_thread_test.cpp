// The op thread (actors/op_thread.hpp): collectives above MCCL_INLINE_BYTES
// that nobody waits for move on a thread of the communicator. These tests
// check that the call returns at once, that a timed wait keeps its bound,
// that ops keep their issue order whoever drives them (the op thread, the
// caller, the progress actor), and that finalize ends an op that cannot
// complete.

#include "rank_threads.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using mccl_test::run_ranks;
using clock_type = std::chrono::steady_clock;

namespace {

mccl::config_overrides settings() {
  mccl::config_overrides o;
  o.set("MCCL_CONNECT_TIMEOUT_MS", 10000);
  // Allreduces over the links: the host board's stage runs its own (board
  // thread, caller_driven_test.cpp).
  o.set("MCCL_SHM_STAGE_BYTES", 0);
  return o;
}

/// Polls until `w` is done, without driving it (bounded).
bool done_without_waiting(const mccl::work& w) {
  for (int i = 0; i < 10000 && !w.test(); ++i)
    std::this_thread::sleep_for(1ms);
  return w.test();
}

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

/// rank r contributes r + 1 + (k % 5) + iteration at element k.
std::vector<float> contribution(int rank, int iteration, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t k = 0; k < n; ++k)
    v[k] = static_cast<float>(rank + 1 + static_cast<int>(k % 5) + iteration);
  return v;
}

float expected_sum(int world, int iteration, std::size_t k) {
  float s = 0;
  for (int r = 0; r < world; ++r)
    s += static_cast<float>(r + 1 + static_cast<int>(k % 5) + iteration);
  return s;
}

} // namespace

TEST(OpThread, LargeOpsReturnAtOnceAndRunOnTheOpThread) {
  mccl::runtime rt;
  run_ranks(rt, 2, settings(), [](mccl::communicator& comm) {
    auto v = contribution(comm.rank(), 0, 1 << 20); // 4 MiB: above MCCL_INLINE_BYTES
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(300ms); // rank 0's call must not wait for this
      comm.allreduce(v.data(), v.size()).wait();
    } else {
      auto t0 = clock_type::now();
      auto w = comm.allreduce(v.data(), v.size());
      EXPECT_LT(ms_since(t0), 150.0) << "the call waited for the peer";
      EXPECT_FALSE(w.test());
      // Nobody waits for it: the op thread moves it.
      ASSERT_TRUE(done_without_waiting(w));
      EXPECT_TRUE(w.metrics().op_thread);
      EXPECT_FALSE(w.metrics().inline_run);
      EXPECT_TRUE(w.wait_for(10s));
    }
    for (std::size_t k = 0; k < v.size(); k += 101)
      ASSERT_EQ(v[k], expected_sum(2, 0, k)) << "element " << k;
  });
}

TEST(OpThread, TimedWaitReturnsOnTimeWhileThePeerIsLate) {
  mccl::runtime rt;
  run_ranks(rt, 2, settings(), [](mccl::communicator& comm) {
    std::vector<float> v(1 << 19, 1.0f);
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(1200ms);
      comm.allreduce(v.data(), v.size()).wait();
    } else {
      auto w = comm.allreduce(v.data(), v.size());
      auto t0 = clock_type::now();
      EXPECT_FALSE(w.wait_for(200ms));
      auto waited = ms_since(t0);
      EXPECT_GE(waited, 190.0);
      EXPECT_LT(waited, 700.0) << "wait_for(200 ms) took " << waited << " ms";
      w.wait();
    }
    EXPECT_EQ(v[12345], 2.0f);
  });
}

TEST(OpThread, OpsKeepTheirIssueOrderAcrossEveryPath) {
  // Issued without waiting, sizes alternating between ops run in the call
  // and ops left to the op thread; point-to-point messages in between.
  // Waited in reverse order, so whoever leads moves them all.
  mccl::runtime rt;
  constexpr int world = 3;
  run_ranks(rt, world, settings(), [](mccl::communicator& comm) {
    int r = comm.rank();
    for (int round = 0; round < 5; ++round) {
      std::vector<std::vector<float>> data;
      std::vector<mccl::work> works;
      for (int i = 0; i < 8; ++i) {
        std::size_t n = i % 3 == 0 ? 16 : i % 3 == 1 ? 300001 : 70000;
        data.push_back(contribution(r, round * 10 + i, n));
      }
      std::vector<int32_t> token(4, r * 100 + round), got(4, -1);
      int next = (r + 1) % world, prev = (r + world - 1) % world;
      for (std::size_t i = 0; i < data.size(); ++i) {
        works.push_back(comm.allreduce(data[i].data(), data[i].size()));
        if (i == 3) {
          works.push_back(comm.send(token.data(), token.size(), next));
          works.push_back(comm.recv(got.data(), got.size(), prev));
        }
      }
      for (auto w = works.rbegin(); w != works.rend(); ++w)
        w->wait();
      uint64_t last_seq = 0;
      bool first = true;
      for (std::size_t i = 0; i < data.size(); ++i) {
        auto& w = works[i < 4 ? i : i + 2];
        if (!first) {
          EXPECT_EQ(w.metrics().seq, last_seq + 1) << "round " << round << " op " << i;
        }
        first = false;
        last_seq = w.metrics().seq;
        for (std::size_t k = 0; k < data[i].size(); k += 97)
          ASSERT_EQ(data[i][k], expected_sum(world, round * 10 + static_cast<int>(i), k))
            << "round " << round << " op " << i << " element " << k;
      }
      EXPECT_EQ(got[3], prev * 100 + round);
    }
  });
}

TEST(OpThread, WaitingCallerRunsItsOpsItself) {
  // Issue-then-wait: the waiting caller drives its op (and any posted
  // before it) unless the op thread already took it.
  mccl::runtime rt;
  run_ranks(rt, 2, settings(), [](mccl::communicator& comm) {
    int by_caller = 0, by_thread = 0;
    for (int i = 0; i < 60; ++i) {
      auto v = contribution(comm.rank(), i, 100000);
      auto w = comm.allreduce(v.data(), v.size());
      w.wait();
      by_caller += w.metrics().inline_run;
      by_thread += w.metrics().op_thread;
      ASSERT_EQ(v[99999], expected_sum(2, i, 99999)) << "iteration " << i;
    }
    // The op thread takes an op a caller leaves for 20 us; most ops the
    // caller runs.
    EXPECT_GT(by_caller, 30) << by_thread << " ran on the op thread";
  });
}

TEST(OpThread, AnOpLeftBehindAfterCallerDrivenOnesStillMoves) {
  // Callers that wait for every op at once stop the op thread being woken
  // per op; it looks for ops nobody drives less and less often (up to
  // every 8 ms). An op then issued and not waited for must still move, on
  // the op thread, and so must the ones after it.
  mccl::runtime rt;
  run_ranks(rt, 2, settings(), [](mccl::communicator& comm) {
    for (int i = 0; i < 40; ++i) {
      auto v = contribution(comm.rank(), i, 100000);
      comm.allreduce(v.data(), v.size()).wait();
    }
    std::this_thread::sleep_for(30ms); // a few of the thread's looks find nothing
    for (int i = 0; i < 3; ++i) {
      auto v = contribution(comm.rank(), 100 + i, 100000);
      auto t0 = clock_type::now();
      auto w = comm.allreduce(v.data(), v.size());
      ASSERT_TRUE(done_without_waiting(w)) << "op " << i << " nobody waits for never moved";
      EXPECT_LT(ms_since(t0), 2000.0) << "op " << i;
      EXPECT_TRUE(w.metrics().op_thread) << "op " << i;
      ASSERT_EQ(v[99999], expected_sum(2, 100 + i, 99999)) << "op " << i;
    }
  });
}

TEST(OpThread, CanBeTurnedOff) {
  mccl::runtime rt;
  auto o = settings();
  o.set("MCCL_OP_THREAD_BYTES", 0);
  run_ranks(rt, 2, o, [](mccl::communicator& comm) {
    std::vector<float> v(1 << 18, 1.0f);
    auto w = comm.allreduce(v.data(), v.size());
    // Nobody waits for it: without an op thread the progress actor moves it.
    ASSERT_TRUE(done_without_waiting(w));
    EXPECT_FALSE(w.metrics().op_thread);
    EXPECT_FALSE(w.metrics().inline_run);
    EXPECT_EQ(w.metrics().driver, mccl::driver_kind::actor);
    EXPECT_EQ(v[777], 2.0f);
  });
}

TEST(OpThread, FinalizeEndsAnOpThatCannotCompletePromptly) {
  mccl::runtime rt;
  auto o = settings();
  o.set("MCCL_TIMEOUT_MS", 30000);
  run_ranks(rt, 2, o, [](mccl::communicator& comm) {
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(1500ms); // never issues the op
      return;
    }
    std::vector<float> v(1 << 18, 1.0f), w2(1 << 18, 1.0f);
    auto running = comm.allreduce(v.data(), v.size());
    auto queued = comm.allreduce(w2.data(), w2.size());
    std::this_thread::sleep_for(100ms);
    auto t0 = clock_type::now();
    comm.finalize();
    EXPECT_LT(ms_since(t0), 1000.0) << "finalize waited for the op";
    ASSERT_TRUE(running.test());
    ASSERT_TRUE(queued.test());
    EXPECT_TRUE(running.failure());
    ASSERT_TRUE(queued.failure());
    EXPECT_EQ(queued.failure()->code(), mccl::errc::finalized) << queued.failure()->what();
  });
}
