// Several ranks as threads of one process, over real loopback TCP, sharing
// one runtime and an in-memory rendezvous store. Covers the API contract
// (Work, errors, abort, timeout, finalize) with bounded waits everywhere.

#include <mccl/mccl.hpp>
#include "transport/rdma/rdma_probe.hpp"

#include "rank_threads.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <gtest/gtest.h>

#include "reducers/half.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

using mccl_test::run_ranks;

namespace {


mccl::config_overrides quick() {
  mccl::config_overrides o;
  o.set("MCCL_CONNECT_TIMEOUT_MS", 10000);
  return o;
}

} // namespace

// float16/bfloat16 through the one-shot and ring paths (rounding itself is
// covered by the reducer unit tests; these sums and means are exact).
TEST(InProcess, AllreduceSixteenBitFloats) {
  mccl::runtime rt;
  for (int world : {2, 3})
    for (std::size_t count : {std::size_t{7}, std::size_t{262147}})
      for (auto type : {mccl::dtype::float16, mccl::dtype::bfloat16}) {
        auto enc = [type](float x) {
          return type == mccl::dtype::float16 ? mccl::float_to_f16(x) : mccl::float_to_bf16(x);
        };
        run_ranks(rt, world, quick(), [&](mccl::communicator& comm) {
          std::vector<uint16_t> sum(count);
          for (std::size_t i = 0; i < count; ++i)
            sum[i] = enc(static_cast<float>((comm.rank() + 1) * static_cast<int>(i % 5)));
          auto mean = sum;
          comm.allreduce(sum.data(), count, type, mccl::redop::sum).wait();
          comm.allreduce(mean.data(), count, type, mccl::redop::avg).wait();
          const int ranks = world * (world + 1) / 2;
          for (std::size_t i = 0; i < count; ++i) {
            const auto total = static_cast<float>(ranks * static_cast<int>(i % 5));
            ASSERT_EQ(sum[i], enc(total)) << mccl::to_string(type) << " world " << world;
            ASSERT_EQ(mean[i], enc(total / static_cast<float>(world)))
                << mccl::to_string(type) << " world " << world;
          }
        });
      }
}

TEST(InProcess, AllreduceEveryWorldAndAlgorithm) {
  mccl::runtime rt;
  for (int world = 1; world <= 4; ++world)
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{262147}}) {
      run_ranks(rt, world, quick(), [&](mccl::communicator& comm) {
        std::vector<float> v(count);
        for (std::size_t i = 0; i < count; ++i)
          v[i] = static_cast<float>(comm.rank() + 1) * static_cast<float>(i % 5);
        comm.allreduce(v.data(), count).wait();
        float ranks = static_cast<float>(world * (world + 1) / 2);
        for (std::size_t i = 0; i < count; ++i)
          ASSERT_EQ(v[i], ranks * static_cast<float>(i % 5)) << "world " << world << " i " << i;
        std::vector<int32_t> in(count), out(count);
        for (std::size_t i = 0; i < count; ++i)
          in[i] = static_cast<int32_t>((comm.rank() * 31 + i) % 17);
        comm.allreduce(in.data(), out.data(), count, mccl::dtype::int32, mccl::redop::max).wait();
        for (std::size_t i = 0; i < count; ++i) {
          int32_t want = 0;
          for (int r = 0; r < world; ++r)
            want = std::max(want, static_cast<int32_t>((r * 31 + i) % 17));
          ASSERT_EQ(out[i], want);
        }
      });
    }
}

TEST(InProcess, BroadcastFromEveryRootAndBarrier) {
  mccl::runtime rt;
  run_ranks(rt, 3, quick(), [](mccl::communicator& comm) {
    for (int root = 0; root < comm.size(); ++root) {
      std::vector<double> v(100003, comm.rank() == root ? root + 0.5 : -1.0);
      comm.broadcast(v.data(), v.size(), root).wait();
      for (double x : v)
        ASSERT_EQ(x, root + 0.5);
      comm.barrier().wait();
    }
  });
}

TEST(InProcess, ManyOpsInFlight) {
  mccl::runtime rt;
  run_ranks(rt, 3, quick(), [](mccl::communicator& comm) {
    std::vector<std::vector<float>> bufs(16, std::vector<float>(5000));
    std::vector<mccl::work> works;
    for (std::size_t b = 0; b < bufs.size(); ++b) {
      std::fill(bufs[b].begin(), bufs[b].end(), static_cast<float>(b));
      works.push_back(comm.allreduce(bufs[b].data(), bufs[b].size()));
    }
    for (std::size_t b = 0; b < bufs.size(); ++b) {
      works[b].wait();
      EXPECT_TRUE(works[b].ok());
      EXPECT_EQ(bufs[b][4999], 3.0f * b);
    }
  });
}

TEST(InProcess, WorkApi) {
  mccl::runtime rt;
  // Every op asynchronous (a small op would otherwise run inline and be
  // done when the call returns).
  auto o = quick();
  o.set("MCCL_INLINE_BYTES", 0);
  run_ranks(rt, 2, o, [](mccl::communicator& comm) {
    float x = 1;
    if (comm.rank() == 1)
      std::this_thread::sleep_for(200ms); // rank 0's op must still be pending
    auto w = comm.allreduce(&x, 1);
    std::atomic<bool> called{false};
    w.on_complete([&] { called = true; });
    if (comm.rank() == 0) {
      EXPECT_FALSE(w.test());
      EXPECT_FALSE(w.wait_for(20ms));
    }
    EXPECT_TRUE(w.wait_for(10s));
    EXPECT_TRUE(w.test());
    EXPECT_TRUE(w.ok());
    EXPECT_FALSE(w.failure());
    EXPECT_EQ(x, 2.0f);
    for (int i = 0; i < 100 && !called; ++i)
      std::this_thread::sleep_for(1ms);
    EXPECT_TRUE(called);
  });
}

TEST(InProcess, TimeoutNamesOpStepAndPeerAndAbortsPeers) {
  mccl::runtime rt;
  auto o = quick();
  o.set("MCCL_TIMEOUT_MS", 300);
  run_ranks(rt, 2, o, [](mccl::communicator& comm) {
    float x = 1;
    if (comm.rank() == 1) {
      auto t0 = std::chrono::steady_clock::now();
      try {
        comm.allreduce(&x, 1).wait();
        ADD_FAILURE() << "allreduce without a partner succeeded";
      } catch (const mccl::error& e) {
        auto waited = std::chrono::steady_clock::now() - t0;
        EXPECT_EQ(e.code(), mccl::errc::timeout) << e.what();
        std::string m = e.what();
        EXPECT_NE(m.find("allreduce seq 0"), std::string::npos) << m;
        EXPECT_NE(m.find("waiting on rank"), std::string::npos) << m;
        EXPECT_NE(m.find("MCCL_TIMEOUT_MS=300"), std::string::npos) << m;
        EXPECT_LT(waited, 3s);
      }
    } else {
      // Rank 0 issues nothing; the ABORT from rank 1 must reach it.
      std::this_thread::sleep_for(1s);
      try {
        comm.barrier().wait();
        ADD_FAILURE() << "barrier after a peer's abort succeeded";
      } catch (const mccl::error& e) {
        // The origin's error code travels with its ABORT frame.
        EXPECT_EQ(e.code(), mccl::errc::timeout) << e.what();
        EXPECT_NE(std::string(e.what()).find("rank 1 aborted"), std::string::npos) << e.what();
      }
    }
  });
}

// set_timeout: later ops run under the new deadline (a 200 ms one fails an
// op whose partner is late, restoring 30 s lets a late partner through),
// split passes it on, and a value outside MCCL_TIMEOUT_MS's range is refused.
// Both the engine's ops (1 M floats) and small ones (the inline / board
// path) keep it.
TEST(InProcess, SetTimeoutChangesLaterOpsAndSplitInheritsIt) {
  mccl::runtime rt;
  auto o = quick();
  o.set("MCCL_TIMEOUT_MS", 30000);
  run_ranks(rt, 2, o, [](mccl::communicator& comm) {
    EXPECT_EQ(comm.timeout(), 30000ms);
    try {
      comm.set_timeout(0ms);
      ADD_FAILURE() << "set_timeout(0 ms) was accepted";
    } catch (const mccl::error& e) {
      EXPECT_EQ(e.code(), mccl::errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("0 ms is outside MCCL_TIMEOUT_MS's range"), std::string::npos)
        << e.what();
    }
    EXPECT_EQ(comm.timeout(), 30000ms);
    comm.set_timeout(200ms);
    EXPECT_EQ(comm.timeout(), 200ms);
    EXPECT_EQ(comm.settings().timeout, 30000ms); // the settings it was made with
    auto sub = comm.split(0, comm.rank());
    EXPECT_EQ(sub.timeout(), 200ms);

    // Restored: rank 1 joins 600 ms late, within the deadline.
    comm.set_timeout(30000ms);
    std::vector<float> big(1 << 20, 1.0f);
    if (comm.rank() == 1)
      std::this_thread::sleep_for(600ms);
    comm.allreduce(big.data(), big.size()).wait();
    EXPECT_EQ(big[0], 2.0f);

    // 200 ms again; rank 1 joins neither op below in time.
    comm.set_timeout(200ms);
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(2500ms); // connected, silent, until rank 0 has timed out twice
      return;
    }
    for (auto* c : {&sub, &comm}) {
      float one = 1;
      auto t0 = std::chrono::steady_clock::now();
      try {
        if (c == &sub)
          c->allreduce(&one, 1).wait();
        else
          c->allreduce(big.data(), big.size()).wait();
        ADD_FAILURE() << "an allreduce without its partner succeeded";
      } catch (const mccl::error& e) {
        auto waited = std::chrono::steady_clock::now() - t0;
        EXPECT_EQ(e.code(), mccl::errc::timeout) << e.what();
        EXPECT_NE(std::string(e.what()).find("MCCL_TIMEOUT_MS=200"), std::string::npos) << e.what();
        EXPECT_GE(waited, 150ms);
        EXPECT_LT(waited, 3s);
      }
    }
  });
}

TEST(InProcess, UserAbortReachesEveryRank) {
  mccl::runtime rt;
  run_ranks(rt, 3, quick(), [](mccl::communicator& comm) {
    std::vector<float> v(1000, 1.0f);
    if (comm.rank() == 0) {
      std::this_thread::sleep_for(100ms);
      comm.abort("test abort");
      return;
    }
    try {
      comm.allreduce(v.data(), v.size()).wait();
      ADD_FAILURE() << "allreduce succeeded although rank 0 aborted";
    } catch (const mccl::error& e) {
      EXPECT_EQ(e.code(), mccl::errc::aborted) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 0 called abort: test abort"), std::string::npos)
        << e.what();
    }
  });
}

TEST(InProcess, MismatchedCountsFailInsteadOfHanging) {
  mccl::runtime rt;
  auto o = quick();
  o.set("MCCL_TIMEOUT_MS", 5000);
  run_ranks(rt, 2, o, [](mccl::communicator& comm) {
    std::vector<float> v(comm.rank() == 0 ? 10 : 20, 1.0f);
    try {
      comm.allreduce(v.data(), v.size()).wait();
      ADD_FAILURE() << "mismatched allreduce succeeded";
    } catch (const mccl::error& e) {
      // Every rank fails with the sequence number and what each side issued.
      std::string m = e.what();
      EXPECT_EQ(e.code(), mccl::errc::desync) << m;
      EXPECT_NE(m.find("different collectives at seq 0"), std::string::npos) << m;
      EXPECT_NE(m.find("allreduce(count 10, float32, sum)"), std::string::npos) << m;
      EXPECT_NE(m.find("allreduce(count 20, float32, sum)"), std::string::npos) << m;
    }
  });
}

TEST(InProcess, ArgumentAndSettingErrorsNameTheCulprit) {
  mccl::runtime rt;
  run_ranks(rt, 2, quick(), [](mccl::communicator& comm) {
    float x = 0;
    try {
      comm.broadcast(&x, 1, 5);
      ADD_FAILURE() << "root 5 accepted";
    } catch (const mccl::error& e) {
      EXPECT_EQ(e.code(), mccl::errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("root 5"), std::string::npos) << e.what();
    }
    try {
      comm.allreduce(&x, 1, mccl::dtype::float32, mccl::redop::band);
      ADD_FAILURE() << "band on float32 accepted";
    } catch (const mccl::error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("band"), std::string::npos) << m;
      EXPECT_NE(m.find("float32"), std::string::npos) << m;
    }
    comm.finalize();
    comm.finalize(); // idempotent
    EXPECT_THROW(comm.barrier(), mccl::error);
  });
}

// This machine has no RDMA: MCCL_TRANSPORT=rdma probes, falls back to TCP
// and works; the probe says why.
TEST(InProcess, RdmaFallsBackToTcpWhereThereIsNone) {
  const auto& probe = mccl::transport::probe_rdma();
  ASSERT_FALSE(probe.device_ready) << "this test expects a machine without RDMA: " << probe.summary;
  EXPECT_FALSE(probe.summary.empty());
  auto missing = mccl::transport::probe_rdma_uncached("libibverbs-missing.so.1");
  EXPECT_FALSE(missing.device_ready);
  EXPECT_NE(missing.summary.find("libibverbs-missing.so.1 could not be loaded"), std::string::npos)
    << missing.summary;
  mccl::runtime rt;
  auto o = quick();
  o.set("MCCL_TRANSPORT", "rdma");
  run_ranks(rt, 2, o, [](mccl::communicator& comm) {
    EXPECT_EQ(comm.settings().transport, mccl::transport_kind::tcp);
    float v = static_cast<float>(comm.rank() + 1);
    comm.allreduce(&v, 1, mccl::dtype::float32).wait();
    EXPECT_EQ(v, 3.0f);
  });
}

TEST(InProcess, JoinsAnActorSystemTheHostAlreadyRuns) {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<size_t>(2));
  caf::actor_system sys{cfg};
  {
    mccl::runtime rt{sys};
    run_ranks(rt, 2, quick(), [](mccl::communicator& comm) {
      double v = comm.rank() + 1.0;
      comm.allreduce(&v, 1).wait();
      EXPECT_EQ(v, 3.0);
    });
  }
}

TEST(InProcess, ChunksSmallerThanTheLatencyPath) {
  // The one-shot path sends a whole op in one frame even when pipelining
  // chunks are smaller: receivers must accept frames up to the larger size.
  mccl::runtime rt;
  auto o = quick();
  o.set("MCCL_CHUNK_BYTES", "4K");
  o.set("MCCL_TRANSPORT_CRC", true);
  for (int world : {2, 3}) {
    run_ranks(rt, world, o, [&](mccl::communicator& comm) {
      for (std::size_t count : {std::size_t{10000}, std::size_t{300000}}) {
        std::vector<int64_t> v(count, comm.rank() + 1);
        comm.allreduce(v.data(), count).wait();
        for (auto x : v)
          ASSERT_EQ(x, world * (world + 1) / 2);
      }
    });
  }
}
