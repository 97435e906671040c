// Point-to-point semantics, split, desync detection, custom collectives,
// algorithm selection and concurrency, with ranks as threads of this
// process over loopback TCP. Every wait is bounded by MCCL_TIMEOUT_MS.

#include <mccl/mccl.hpp>

#include "rank_threads.hpp"

#include "../../examples/grad_norm/grad_norm.hpp"
#include "../../examples/maxloc/maxloc.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

using mccl_test::run_ranks;

namespace {

mccl::config_overrides settings(int timeout_ms = 10000) {
  mccl::config_overrides o;
  o.set("MCCL_CONNECT_TIMEOUT_MS", 10000);
  o.set("MCCL_TIMEOUT_MS", timeout_ms);
  o.set("MCCL_LOG_LEVEL", "error");
  return o;
}


/// Runs `op` expecting it to fail; returns the error.
mccl::error failure_of(const std::function<void()>& op) {
  try {
    op();
  } catch (const mccl::error& e) {
    return e;
  }
  ADD_FAILURE() << "the op succeeded";
  return mccl::error(mccl::errc::none, "");
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

// ---- point to point -----------------------------------------------------------

TEST(PointToPoint, ReceivesPostedBeforeAndAfterTheSendsMatchByTagInOrder) {
  mccl::runtime rt;
  run_ranks(rt, 3, settings(), [](mccl::communicator& comm) {
    // Rank 0 sends rank 2 three messages on tag 5 and one on tag 9; rank 2
    // posts tag 9 first, one tag-5 receive before the sends and two after.
    if (comm.rank() == 0) {
      comm.barrier().wait();
      std::vector<int32_t> a{1, 2}, b{3, 4}, c{5, 6}, d{7, 8};
      std::vector<mccl::work> w{comm.send(a.data(), 2, 2, 5), comm.send(b.data(), 2, 2, 5),
                                comm.send(d.data(), 2, 2, 9), comm.send(c.data(), 2, 2, 5)};
      for (auto& x : w)
        x.wait();
    } else if (comm.rank() == 2) {
      std::vector<int32_t> first(2), second(2), third(2), nine(2);
      auto r9 = comm.recv(nine.data(), 2, 0, 9);
      auto r1 = comm.recv(first.data(), 2, 0, 5);
      comm.barrier().wait();
      std::this_thread::sleep_for(50ms); // let the later messages arrive unexpected
      auto r2 = comm.recv(second.data(), 2, 0, 5);
      auto r3 = comm.recv(third.data(), 2, 0, 5);
      for (auto* w : {&r9, &r1, &r2, &r3})
        w->wait();
      EXPECT_EQ(first, (std::vector<int32_t>{1, 2}));
      EXPECT_EQ(second, (std::vector<int32_t>{3, 4}));
      EXPECT_EQ(third, (std::vector<int32_t>{5, 6}));
      EXPECT_EQ(nine, (std::vector<int32_t>{7, 8}));
      EXPECT_EQ(r1.metrics().op, "recv");
    } else {
      comm.barrier().wait();
    }
  });
}

TEST(PointToPoint, ManyOutstandingInBothDirectionsWithCollectivesInBetween) {
  mccl::runtime rt;
  run_ranks(rt, 2, settings(), [](mccl::communicator& comm) {
    int peer = 1 - comm.rank();
    constexpr int n = 64;
    std::vector<std::vector<float>> out(n), in(n);
    std::vector<mccl::work> works;
    for (int i = 0; i < n; ++i) {
      out[i].assign(1000 + i, static_cast<float>(comm.rank() * 1000 + i));
      in[i].assign(1000 + i, -1);
      // Odd messages: receive first; even: send first.
      if (i % 2) {
        works.push_back(comm.recv(in[i].data(), in[i].size(), peer, static_cast<uint32_t>(i)));
        works.push_back(comm.send(out[i].data(), out[i].size(), peer, static_cast<uint32_t>(i)));
      } else {
        works.push_back(comm.send(out[i].data(), out[i].size(), peer, static_cast<uint32_t>(i)));
        works.push_back(comm.recv(in[i].data(), in[i].size(), peer, static_cast<uint32_t>(i)));
      }
      if (i % 16 == 0) {
        float x = 1;
        works.push_back(comm.allreduce(&x, 1));
        works.back().wait();
        EXPECT_EQ(x, 2.0f);
      }
    }
    for (auto& w : works)
      w.wait();
    for (int i = 0; i < n; ++i)
      EXPECT_EQ(in[i], std::vector<float>(1000 + i, static_cast<float>(peer * 1000 + i))) << i;
  });
}

TEST(PointToPoint, AReceiveOfTheWrongSizeNamesBothSizes) {
  mccl::runtime rt;
  run_ranks(rt, 2, settings(), [](mccl::communicator& comm) {
    std::vector<float> buf(10, 1.0f);
    if (comm.rank() == 0) {
      try {
        comm.send(buf.data(), 10, 1, 3).wait();
      } catch (const mccl::error&) {
        // The receiver's failure aborts the communicator; the send may or
        // may not have completed first.
      }
    } else {
      auto e = failure_of([&] { comm.recv(buf.data(), 4, 0, 3).wait(); });
      EXPECT_EQ(e.code(), mccl::errc::invalid_argument) << e.what();
      EXPECT_TRUE(contains(e.what(), "sends 40 bytes (10 x float32)")) << e.what();
      EXPECT_TRUE(contains(e.what(), "expects 16 bytes (4 x float32)")) << e.what();
      EXPECT_TRUE(contains(e.what(), "recv")) << e.what();
    }
  });
}

TEST(PointToPoint, ProbeNamesThePeersWithAnUnclaimedMessageOfTheTag) {
  mccl::runtime rt;
  run_ranks(rt, 3, settings(), [](mccl::communicator& comm) {
    // Ranks 1 and 2 send rank 0 one message each on tag 4; rank 2 also one
    // on tag 8. Rank 0 probes until both tag-4 messages are in, receives
    // them from the peers probe named, and finds tag 4 empty afterwards.
    if (comm.rank() == 0) {
      EXPECT_TRUE(comm.probe(4).empty());
      comm.barrier().wait();
      std::vector<int> ready;
      auto deadline = std::chrono::steady_clock::now() + 10s;
      while ((ready = comm.probe(4)).size() < 2 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(1ms);
      ASSERT_EQ(ready, (std::vector<int>{1, 2}));
      for (int peer : ready) {
        int32_t v = -1;
        comm.recv(&v, 1, peer, 4).wait();
        EXPECT_EQ(v, 10 * peer);
      }
      EXPECT_TRUE(comm.probe(4).empty());
      int32_t eight = -1;
      comm.recv(&eight, 1, 2, 8).wait();
      EXPECT_EQ(eight, 8);
    } else {
      int32_t v = 10 * comm.rank(), eight = 8;
      comm.barrier().wait();
      comm.send(&v, 1, 0, 4).wait();
      if (comm.rank() == 2)
        comm.send(&eight, 1, 0, 8).wait();
    }
    comm.barrier().wait();
  });
}

TEST(PointToPoint, BadPeersAreRejectedBeforeAnythingIsSent) {
  mccl::runtime rt;
  run_ranks(rt, 2, settings(), [](mccl::communicator& comm) {
    float x = 0;
    auto self = failure_of([&] { comm.send(&x, 1, comm.rank(), 0); });
    EXPECT_EQ(self.code(), mccl::errc::invalid_argument);
    EXPECT_TRUE(contains(self.what(), "this rank itself")) << self.what();
    auto out = failure_of([&] { comm.recv(&x, 1, 7, 0); });
    EXPECT_TRUE(contains(out.what(), "peer 7 is outside the communicator of 2 ranks")) << out.what();
    comm.barrier().wait();
  });
}

// ---- desync -------------------------------------------------------------------

namespace {

/// Rank 1 issues `odd` where every other rank issues `even`; every rank
/// must fail with errc::desync naming seq 1 and both ops.
void expect_desync(int world, const std::function<mccl::work(mccl::communicator&, std::vector<float>&)>& even,
                   const std::function<mccl::work(mccl::communicator&, std::vector<float>&)>& odd,
                   const std::string& even_text, const std::string& odd_text) {
  mccl::runtime rt;
  run_ranks(rt, world, settings(5000), [&](mccl::communicator& comm) {
    std::vector<float> buf(64 * world, 1.0f);
    auto t0 = std::chrono::steady_clock::now();
    // A rank still in the barrier when another one detects the mismatch
    // fails there, with the same error (the abort that ends it carries it).
    auto e = failure_of([&] {
      comm.barrier().wait(); // seq 0
      (comm.rank() == 1 ? odd : even)(comm, buf).wait();
    });
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s) << "desync took a timeout to notice";
    EXPECT_EQ(e.code(), mccl::errc::desync) << e.what();
    EXPECT_TRUE(contains(e.what(), "at seq 1")) << e.what();
    EXPECT_TRUE(contains(e.what(), even_text)) << e.what();
    EXPECT_TRUE(contains(e.what(), odd_text)) << e.what();
  });
}

} // namespace

TEST(Desync, DifferentOperations) {
  expect_desync(
    3, [](auto& c, auto& b) { return c.allreduce(b.data(), 64); },
    [](auto& c, auto& b) { return c.broadcast(b.data(), 64, mccl::dtype::float32, 0); },
    "allreduce(count 64, float32, sum)", "broadcast(count 64, float32, root 0)");
}

TEST(Desync, DifferentCounts) {
  expect_desync(
    2, [](auto& c, auto& b) { return c.allreduce(b.data(), 64); },
    [](auto& c, auto& b) { return c.allreduce(b.data(), 63); }, "allreduce(count 64, float32, sum)",
    "allreduce(count 63, float32, sum)");
}

TEST(Desync, DifferentDtypes) {
  expect_desync(
    2, [](auto& c, auto& b) { return c.allreduce(b.data(), 32, mccl::dtype::float32); },
    [](auto& c, auto& b) { return c.allreduce(b.data(), 32, mccl::dtype::int32); },
    "allreduce(count 32, float32, sum)", "allreduce(count 32, int32, sum)");
}

TEST(Desync, DifferentReductions) {
  expect_desync(
    4, [](auto& c, auto& b) { return c.allreduce(b.data(), 64, mccl::redop::sum); },
    [](auto& c, auto& b) { return c.allreduce(b.data(), 64, mccl::redop::max); },
    "allreduce(count 64, float32, sum)", "allreduce(count 64, float32, max)");
}

TEST(Desync, DifferentRoots) {
  expect_desync(
    2, [](auto& c, auto& b) { return c.broadcast(b.data(), 8, mccl::dtype::float32, 0); },
    [](auto& c, auto& b) { return c.broadcast(b.data(), 8, mccl::dtype::float32, 1); },
    "broadcast(count 8, float32, root 0)", "broadcast(count 8, float32, root 1)");
}

TEST(Desync, AnEmptyOpAgainstAFullOne) {
  // A count-0 op still meets its peers, so a rank that passed 0 is caught.
  expect_desync(
    2, [](auto& c, auto& b) { return c.allreduce(b.data(), 16); },
    [](auto& c, auto& b) { return c.allreduce(b.data(), 0); }, "allreduce(count 16, float32, sum)",
    "allreduce(count 0, float32, sum)");
}

// ---- split and several communicators ------------------------------------------------

TEST(Split, EvenAndOddRanksFormGroupsOrderedByKey) {
  mccl::runtime rt;
  run_ranks(rt, 5, settings(), [](mccl::communicator& comm) {
    int r = comm.rank();
    // Color by parity, key reverses the order.
    auto sub = comm.split(r % 2, -r);
    ASSERT_TRUE(sub.valid());
    int members = r % 2 ? 2 : 3;
    EXPECT_EQ(sub.size(), members);
    // Highest parent rank first: parent ranks 4,2,0 -> 0,1,2; 3,1 -> 0,1.
    int expected_rank = (members - 1) - r / 2;
    EXPECT_EQ(sub.rank(), expected_rank);
    float x = static_cast<float>(r);
    sub.allreduce(&x, 1).wait();
    EXPECT_EQ(x, r % 2 ? 1.0f + 3.0f : 0.0f + 2.0f + 4.0f);
    // The parent still works, also interleaved with the child.
    float y = 1;
    auto wp = comm.allreduce(&y, 1);
    float z = 1;
    auto wc = sub.allreduce(&z, 1);
    wp.wait();
    wc.wait();
    EXPECT_EQ(y, 5.0f);
    EXPECT_EQ(z, static_cast<float>(members));
    sub.finalize();
  });
}

TEST(Split, NegativeColorJoinsNoGroupAndSplitsNest) {
  mccl::runtime rt;
  run_ranks(rt, 4, settings(), [](mccl::communicator& comm) {
    auto sub = comm.split(comm.rank() == 3 ? -1 : 0, comm.rank());
    if (comm.rank() == 3) {
      EXPECT_FALSE(sub.valid());
      return;
    }
    ASSERT_EQ(sub.size(), 3);
    auto pair = sub.split(sub.rank() < 2 ? 0 : 1, 0); // nested: {0,1} and {2}
    EXPECT_EQ(pair.size(), sub.rank() < 2 ? 2 : 1);
    int32_t v = 1;
    pair.allreduce(&v, 1).wait();
    EXPECT_EQ(v, pair.size());
  });
}

TEST(Concurrency, OpsFromSeveralThreadsOnOneCommunicatorAreSafe) {
  // Threads issue concurrently; to keep every rank's order identical each
  // thread owns a disjoint kind of op: one does allreduces, the other
  // point-to-point traffic (which has no global order).
  mccl::runtime rt;
  run_ranks(rt, 2, settings(), [](mccl::communicator& comm) {
    std::atomic<int> errors{0};
    std::thread p2p([&] {
      int peer = 1 - comm.rank();
      for (int i = 0; i < 200; ++i) {
        int32_t out = comm.rank() * 1000 + i, in = -1;
        auto s = comm.send(&out, 1, peer, 1);
        auto r = comm.recv(&in, 1, peer, 1);
        s.wait();
        r.wait();
        if (in != peer * 1000 + i)
          ++errors;
      }
    });
    for (int i = 0; i < 200; ++i) {
      int64_t v = i;
      comm.allreduce(&v, 1).wait();
      if (v != 2 * i)
        ++errors;
    }
    p2p.join();
    EXPECT_EQ(errors.load(), 0);
  });
}

// ---- selection and metrics ----------------------------------------------------

TEST(Selection, MccAlgoPicksTheAlgorithmAndMetricsRecordIt) {
  mccl::runtime rt;
  auto o = settings();
  o.set("MCCL_ALGO", "allreduce=rd:0-1K,rabenseifner:1K-;allgather=ring");
  run_ranks(rt, 3, o, [](mccl::communicator& comm) {
    std::vector<float> small(16, 1.0f), large(4096, 1.0f), all(3 * 16);
    auto a = comm.allreduce(small.data(), small.size());
    auto b = comm.allreduce(large.data(), large.size());
    auto c = comm.allgather(small.data(), all.data(), small.size(), mccl::dtype::float32);
    a.wait();
    b.wait();
    c.wait();
    EXPECT_EQ(a.metrics().algorithm, "rd");
    EXPECT_EQ(a.metrics().op, "allreduce");
    EXPECT_EQ(a.metrics().bytes, 64u);
    EXPECT_EQ(b.metrics().algorithm, "rabenseifner");
    EXPECT_EQ(c.metrics().algorithm, "ring");
    EXPECT_EQ(c.metrics().bytes, 3u * 16 * 4);
    EXPECT_GT(b.metrics().duration.count(), 0);
    EXPECT_EQ(small[0], 3.0f);
    EXPECT_EQ(large[4095], 3.0f);
  });
}

TEST(Selection, AnUnknownAlgorithmNameIsAConfigurationError) {
  mccl::runtime rt;
  mccl::comm_options co;
  co.overrides.set("MCCL_ALGO", "allreduce=fastest");
  try {
    rt.create_communicator(co);
    ADD_FAILURE() << "accepted an unknown algorithm";
  } catch (const mccl::error& e) {
    EXPECT_EQ(e.code(), mccl::errc::invalid_config);
    EXPECT_TRUE(contains(e.what(), "allreduce has no algorithm \"fastest\"")) << e.what();
    EXPECT_TRUE(contains(e.what(), "rabenseifner")) << e.what();
  }
}

TEST(Selection, AnAlgorithmThatDoesNotFitTheWorldFallsBackToTheTable) {
  mccl::runtime rt;
  auto o = settings();
  o.set("MCCL_ALGO", "allreduce=direct"); // direct needs exactly 2 ranks
  run_ranks(rt, 3, o, [](mccl::communicator& comm) {
    std::vector<float> v(100000, 1.0f);
    auto w = comm.allreduce(v.data(), v.size());
    w.wait();
    EXPECT_NE(w.metrics().algorithm, "direct");
    EXPECT_EQ(v[99999], 3.0f);
  });
}

// ---- custom collectives -------------------------------------------------------

TEST(Custom, MaxlocFindsTheLargestValueAndItsRankOnEveryWorld) {
  mccl_examples::register_maxloc();
  for (int world : {1, 2, 3, 5}) {
    mccl::runtime rt;
    auto o = settings();
    o.set("MCCL_CHUNK_BYTES", 4096); // several frames per step
    run_ranks(rt, world, o, [world](mccl::communicator& comm) {
      const std::size_t n = 3000;
      std::vector<float> v(n);
      for (std::size_t i = 0; i < n; ++i) // element i peaks on rank i % world; ties elsewhere
        v[i] = static_cast<int>(i % world) == comm.rank() ? 100.0f + i : 1.0f;
      std::vector<mccl_examples::value_and_rank> out(n);
      auto w = comm.custom("maxloc", v.data(), out.data(), n, mccl::dtype::float32);
      w.wait();
      EXPECT_EQ(w.metrics().algorithm, "maxloc");
      for (std::size_t i = 0; i < n; ++i) {
        float want = world == 1 ? 100.0f + i : 100.0f + i;
        ASSERT_EQ(out[i].value, want) << "world " << world << " element " << i;
        ASSERT_EQ(out[i].rank, static_cast<int32_t>(i % world)) << "world " << world << " element " << i;
      }
    });
  }
}

TEST(Custom, GradNormSumsAndMeasuresInOneOp) {
  // Two collectives in one op: the sum of every rank's gradients (checked
  // against a built-in allreduce) and the L2 norm of that sum. Counts on
  // both sides of the phase's program choice, frames of 4 KiB.
  mccl_examples::register_grad_norm();
  for (int world : {1, 2, 3, 4}) {
    mccl::runtime rt;
    auto o = settings();
    o.set("MCCL_CHUNK_BYTES", 4096);
    run_ranks(rt, world, o, [world](mccl::communicator& comm) {
      for (std::size_t n : {std::size_t{1}, std::size_t{3000}, std::size_t{40000}}) {
        for (auto op : {mccl::redop::sum, mccl::redop::avg}) {
          std::vector<float> g(n);
          for (std::size_t i = 0; i < n; ++i)
            g[i] = static_cast<float>((i + 3 * static_cast<std::size_t>(comm.rank())) % 9) - 4.0f;
          std::vector<float> out(n + 1);
          comm.custom("grad_norm", g.data(), out.data(), n, mccl::dtype::float32, op).wait();
          comm.allreduce(g.data(), n, mccl::dtype::float32, op).wait();
          double squares = 0;
          for (std::size_t i = 0; i < n; ++i) {
            ASSERT_FLOAT_EQ(out[i], g[i]) << "world " << world << " count " << n << " element " << i;
            squares += static_cast<double>(g[i]) * g[i];
          }
          EXPECT_NEAR(out[n], std::sqrt(squares), 1e-5 * std::sqrt(squares) + 1e-6)
            << "world " << world << " count " << n;
        }
      }
    });
  }
}

TEST(Custom, AStepCollectiveReceivesIntoTheDestinationsItNames) {
  // An allgather as a step collective: every rank sends its block to every
  // other and asks, in start(), for theirs straight into its output (read
  // there by the link where it can), in frames of 4 KiB.
  struct gather_all final : mccl::step_collective {
    void start(mccl::step_io& io) override {
      const auto& op = io.args().op;
      auto bytes = op.count * sizeof(float);
      auto out = static_cast<uint8_t*>(op.recv);
      std::memcpy(out + io.rank() * bytes, op.send, bytes);
      for (int p = 0; p < io.world(); ++p) {
        if (p == io.rank())
          continue;
        io.send(p, 0, op.send, bytes, nullptr); // the input stays unchanged until the op ends
        io.receive(p, 0, bytes, out + p * bytes);
      }
      if (io.world() == 1)
        io.finish();
    }
    void on_message(mccl::step_io& io, const mccl::step_message&) override {
      if (++received_ == io.world() - 1)
        io.finish();
    }
    int received_ = 0;
  };
  mccl::register_step_collective("gather_all", [](const mccl::collective_args&) {
    return std::make_unique<gather_all>();
  });
  for (int world : {1, 3}) {
    mccl::runtime rt;
    auto o = settings();
    o.set("MCCL_CHUNK_BYTES", 4096);
    run_ranks(rt, world, o, [world](mccl::communicator& comm) {
      for (std::size_t n : {std::size_t{10}, std::size_t{100003}}) {
        std::vector<float> in(n), out(n * world);
        for (std::size_t i = 0; i < n; ++i)
          in[i] = static_cast<float>(comm.rank() * 1000000 + i);
        comm.custom("gather_all", in.data(), out.data(), n, mccl::dtype::float32).wait();
        for (int r = 0; r < world; ++r)
          for (std::size_t i = 0; i < n; ++i)
            ASSERT_EQ(out[r * n + i], static_cast<float>(r * 1000000 + i)) << "rank " << r << " element " << i;
      }
    });
  }
}

TEST(Custom, AStepCollectiveThatGetsAShorterMessageFailsNamingIt) {
  // Rank 1 asks for more bytes than rank 0 sends: its op fails, naming the
  // message, its length and the step.
  struct lopsided final : mccl::step_collective {
    void start(mccl::step_io& io) override {
      int peer = 1 - io.rank();
      io.send(peer, 0, std::vector<uint8_t>(100));
      io.receive(peer, 0, io.rank() == 1 ? 200 : 100);
    }
    void on_message(mccl::step_io& io, const mccl::step_message&) override { io.finish(); }
  };
  mccl::register_step_collective("lopsided", [](const mccl::collective_args&) {
    return std::make_unique<lopsided>();
  });
  mccl::runtime rt;
  run_ranks(rt, 2, settings(2000), [](mccl::communicator& comm) {
    float x = 0;
    auto op = [&] { comm.custom("lopsided", &x, &x, 1, mccl::dtype::float32).wait(); };
    if (comm.rank() == 0) { // got what it asked for: may succeed or see the abort
      try {
        op();
      } catch (const mccl::error&) {
      }
      return;
    }
    auto e = failure_of(op);
    EXPECT_EQ(e.code(), mccl::errc::protocol_error) << e.what();
    EXPECT_TRUE(contains(e.what(), "step 0 from rank 0 has 100 bytes, expected 200")) << e.what();
  });
}

TEST(Custom, AStepCollectiveThatTimesOutNamesTheMessageItWaitsFor) {
  // Rank 0 asks for a message of step 3 that rank 1 never sends: its op
  // times out naming the collective's own where() and that message.
  struct waits_forever final : mccl::step_collective {
    void start(mccl::step_io& io) override {
      if (io.rank() == 0)
        io.receive(1, 3, 8);
      else
        io.finish();
    }
    void on_message(mccl::step_io&, const mccl::step_message&) override {}
    std::string where() const override { return "phase two"; }
  };
  mccl::register_step_collective("waits_forever", [](const mccl::collective_args&) {
    return std::make_unique<waits_forever>();
  });
  mccl::runtime rt;
  run_ranks(rt, 2, settings(300), [](mccl::communicator& comm) {
    float x = 0;
    auto op = [&] { comm.custom("waits_forever", &x, &x, 1, mccl::dtype::float32).wait(); };
    if (comm.rank() == 1) { // done at once, or told of rank 0's abort
      try {
        op();
      } catch (const mccl::error&) {
      }
      return;
    }
    auto e = failure_of(op);
    EXPECT_EQ(e.code(), mccl::errc::timeout) << e.what();
    EXPECT_TRUE(contains(e.what(), "phase two, waiting for the message of step 3 from rank 1 (0 of 1 frames in)"))
      << e.what();
  });
}

TEST(Custom, AnUnregisteredNameIsRejectedWithTheRegisteredOnes) {
  mccl_examples::register_maxloc();
  mccl::runtime rt;
  auto comm = rt.create_communicator(mccl::comm_options{});
  float x = 0;
  auto e = failure_of([&] { comm.custom("minloc", &x, &x, 1, mccl::dtype::float32); });
  EXPECT_EQ(e.code(), mccl::errc::invalid_argument);
  EXPECT_TRUE(contains(e.what(), "no collective named \"minloc\"")) << e.what();
  EXPECT_TRUE(contains(e.what(), "maxloc")) << e.what();
}
