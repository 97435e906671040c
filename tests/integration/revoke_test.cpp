// revoke: one rank revokes a communicator while the others are inside (or
// issuing) allreduces. Every in-flight op fails on every rank within the
// bound, naming the rank that revoked; later ops fail at once with
// errc::revoked; shrink and split on the revoked communicator still give
// working communicators; and ops issued concurrently with the revoke either
// complete on every rank or fail on every rank (collectives/engine/engine_revoke.cpp
// has the rule). Ranks are threads of this process (rank_threads.hpp); the
// same tests run over shared memory and the host board (the default for
// ranks of one host) and, through CMake, over TCP alone.
#include "rank_threads.hpp"

#include <chrono>
#include <future>
#include <mutex>
#include <random>
#include <string>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

/// What a revoke must take at most to fail every in-flight op: a live peer
/// answers within a pass, so this is far below the agreement's own window
/// (MCCL_HEARTBEAT_MS x MCCL_HEARTBEAT_MISSES = 5 s here).
constexpr auto revoke_bound = 2s;

mccl::config_overrides settings() {
  mccl::config_overrides o;
  o.set("MCCL_TIMEOUT_MS", "20000"); // far beyond revoke_bound: a timeout never explains a failure
  o.set("MCCL_CONNECT_TIMEOUT_MS", "10000");
  o.set("MCCL_HEARTBEAT_MS", "1000");
  o.set("MCCL_HEARTBEAT_MISSES", "5");
  return o;
}

/// Waits for `w` at most `limit`; the error it ended with (none: success).
std::optional<mccl::error> outcome_of(mccl::work& w, std::chrono::milliseconds limit) {
  try {
    if (!w.wait_for(limit))
      return mccl::error(mccl::errc::timeout, "the test's own wait of " + std::to_string(limit.count())
                                                + " ms ended first");
  } catch (const mccl::error& e) {
    return e;
  }
  return std::nullopt;
}

/// Each survivor allreduces (its old rank + 1) on `c`: the sum is known.
void expect_sums(mccl::communicator& c, int old_rank, int64_t expected, const char* what) {
  for (int round = 0; round < 3; ++round) {
    std::vector<int64_t> v(round == 1 ? 300000 : 1000, old_rank + 1); // small and large
    c.allreduce(v.data(), v.size()).wait();
    for (auto x : v)
      ASSERT_EQ(x, expected) << what << ", old rank " << old_rank << ", round " << round;
  }
}

/// The clear error of an op issued on a revoked communicator.
void expect_refused(mccl::communicator& comm, int revoker, const std::string& reason) {
  std::vector<float> data(16, 1.0f);
  try {
    comm.allreduce(data.data(), data.size()).wait();
    ADD_FAILURE() << "rank " << comm.rank() << ": an allreduce on a revoked communicator succeeded";
  } catch (const mccl::error& e) {
    EXPECT_EQ(e.code(), mccl::errc::revoked) << e.what();
    std::string text = e.what();
    EXPECT_NE(text.find("allreduce"), std::string::npos) << text;
    EXPECT_NE(text.find("revoked by rank " + std::to_string(revoker)), std::string::npos) << text;
    EXPECT_NE(text.find(reason), std::string::npos) << text;
    EXPECT_NE(text.find("only shrink, split and finalize"), std::string::npos) << text;
  }
  EXPECT_THROW(comm.probe(0), mccl::error);
}

// ---- in-flight ops fail, later ones are refused, shrink and split work -----------

void revoke_while_others_reduce(int world, int revoker, std::size_t large_count) {
  mccl::runtime rt;
  const std::string reason = "test revokes the communicator";
  std::atomic<int64_t> revoked_at_ns{0};
  std::mutex m;
  std::vector<double> failed_after_ms;
  std::atomic<int> in_flight{0};
  mccl_test::run_ranks(rt, world, settings(), [&](mccl::communicator& comm) {
    int r = comm.rank();
    comm.barrier().wait();
    if (r == revoker) {
      // Revoke once every other rank has its ops in flight (they cannot end
      // without this rank, which never issues them).
      for (auto until = clock_type::now() + 10s; in_flight.load() < world - 1 && clock_type::now() < until;)
        std::this_thread::sleep_for(1ms);
      ASSERT_EQ(in_flight.load(), world - 1) << "the other ranks never issued their ops";
      std::this_thread::sleep_for(20ms); // let them get inside the ops
      revoked_at_ns = clock_type::now().time_since_epoch().count();
      comm.revoke(reason);
      EXPECT_TRUE(comm.revoked());
    } else {
      // A large allreduce (the engine, pipelined, driven in the background)
      // and a small one (run inside the call, inline or on the host board:
      // the call itself returns only once the revoke ended it) in flight at
      // once.
      std::vector<float> large(large_count, 1.0f);
      std::vector<float> small(4, 1.0f);
      std::vector<mccl::work> works;
      works.push_back(comm.allreduce(large.data(), large.size(), mccl::dtype::float32));
      ++in_flight;
      works.push_back(comm.allreduce(small.data(), small.size(), mccl::dtype::float32));
      for (auto& w : works) {
        auto e = outcome_of(w, 15s);
        auto now = clock_type::now().time_since_epoch().count();
        ASSERT_TRUE(e) << "rank " << r << ": an op the revoker never issued completed";
        EXPECT_EQ(e->code(), mccl::errc::revoked) << e->what();
        std::string text = e->what();
        EXPECT_NE(text.find("revoked by rank " + std::to_string(revoker)), std::string::npos) << text;
        EXPECT_NE(text.find(reason), std::string::npos) << text;
        auto t0 = revoked_at_ns.load();
        ASSERT_NE(t0, 0) << "rank " << r << ": failed before the revoke: " << text;
        std::lock_guard<std::mutex> g{m};
        failed_after_ms.push_back((now - t0) / 1e6);
      }
      // It learns of the revoke from the revoker's REVOKE frame.
      EXPECT_TRUE(comm.revoked());
    }
    expect_refused(comm, revoker, reason);

    // shrink: everyone but the last rank (the revoker stays).
    int excluded = world - 1 == revoker ? 0 : world - 1;
    if (r != excluded) {
      auto small = comm.shrink({excluded});
      ASSERT_TRUE(small.valid());
      EXPECT_EQ(small.size(), world - 1);
      int64_t expected = 0;
      for (int k = 0; k < world; ++k)
        if (k != excluded)
          expected += k + 1;
      expect_sums(small, r, expected, "shrunk");
      small.finalize();
    }
    // split: even and odd ranks.
    auto half = comm.split(r % 2, r);
    ASSERT_TRUE(half.valid());
    int64_t expected = 0;
    for (int k = r % 2; k < world; k += 2)
      expected += k + 1;
    expect_sums(half, r, expected, "split");
    half.finalize();
  });
  ASSERT_EQ(failed_after_ms.size(), static_cast<std::size_t>((world - 1) * 2));
  double worst = 0;
  for (auto ms : failed_after_ms)
    worst = std::max(worst, ms);
  std::printf("revoke propagation, world %d, large count %zu: every in-flight op failed within %.1f ms\n", world,
              large_count, worst);
  EXPECT_LT(worst, (std::chrono::duration<double, std::milli>(revoke_bound).count()));
}

// ---- ops issued concurrently with the revoke ---------------------------------------

/// What one rank saw of op i: not issued (the communicator was revoked
/// before), completed (with the right sum), or failed.
enum class seen : char { not_issued, completed, failed };

void concurrent_ops_agree(int world, int revoker, unsigned seed) {
  mccl::runtime rt;
  constexpr int max_ops = 400;
  constexpr int batch = 3; // ops in flight per rank at once
  std::vector<std::vector<seen>> outcome(world, std::vector<seen>(max_ops, seen::not_issued));
  std::mt19937 rng(seed);
  auto delay = std::chrono::microseconds(2000 + rng() % 30000);
  mccl_test::run_ranks(rt, world, settings(), [&](mccl::communicator& comm) {
    int r = comm.rank();
    auto& mine = outcome[r];
    comm.barrier().wait();
    std::thread revoking;
    if (r == revoker)
      revoking = std::thread([&] {
        std::this_thread::sleep_for(delay);
        comm.revoke("concurrent revoke test");
      });
    int64_t expected = int64_t{world} * (world + 1) / 2;
    bool stop = false;
    for (int i = 0; i < max_ops && !stop; i += batch) {
      std::vector<std::vector<int64_t>> data;
      std::vector<mccl::work> works;
      for (int k = i; k < std::min(max_ops, i + batch); ++k) {
        // Sizes alike on every rank: tiny (inline or board), mid and large (engine).
        std::size_t count = k % 3 == 0 ? 8 : (k % 3 == 1 ? 20000 : 200000);
        data.emplace_back(count, r + 1);
        try {
          works.push_back(comm.allreduce(data.back().data(), count));
        } catch (const mccl::error& e) {
          EXPECT_EQ(e.code(), mccl::errc::revoked) << e.what();
          stop = true;
          break;
        }
      }
      for (std::size_t j = 0; j < works.size(); ++j) {
        auto e = outcome_of(works[j], 15s);
        int k = i + static_cast<int>(j);
        if (!e) {
          mine[k] = seen::completed;
          for (auto x : data[j])
            if (x != expected) {
              ADD_FAILURE() << "rank " << r << ", op " << k << ": " << x << " != " << expected;
              break;
            }
        } else {
          EXPECT_EQ(e->code(), mccl::errc::revoked) << "rank " << r << ", op " << k << ": " << e->what();
          mine[k] = seen::failed;
          stop = true;
        }
      }
    }
    if (revoking.joinable())
      revoking.join();
    EXPECT_TRUE(stop) << "rank " << r << " issued all " << max_ops << " ops without seeing the revoke";
    expect_refused(comm, revoker, "concurrent revoke test");
  });
  // The rule: op i completed on one rank <=> it completed on every rank.
  int completed_everywhere = 0, failed_somewhere = 0, split = 0;
  for (int i = 0; i < max_ops; ++i) {
    int done = 0;
    for (int r = 0; r < world; ++r)
      done += outcome[r][i] == seen::completed;
    if (done == world)
      ++completed_everywhere;
    else if (done > 0) {
      ++split;
      std::string row;
      for (int r = 0; r < world; ++r)
        row += " " + std::to_string(static_cast<int>(outcome[r][i]));
      ADD_FAILURE() << "op " << i << " completed on " << done << " of " << world
                    << " ranks (0 not issued, 1 completed, 2 failed, by rank):" << row;
    }
    for (int r = 0; r < world; ++r)
      failed_somewhere += outcome[r][i] == seen::failed;
  }
  std::printf("world %d, seed %u, revoke after %lld us: %d ops completed on every rank, %d failures, %d ops "
              "completed on some ranks only\n",
              world, seed, static_cast<long long>(delay.count()), completed_everywhere, failed_somewhere, split);
}

} // namespace

TEST(Revoke, InFlightOpsFailOnEveryRankAndShrinkAndSplitStillWork) {
  revoke_while_others_reduce(4, 1, 4u << 20); // 16 MiB of float32 per rank
}

TEST(Revoke, RankZeroRevokesSixRanksInsideSmallAndLargeOps) { revoke_while_others_reduce(6, 0, 1u << 20); }

TEST(Revoke, ConcurrentOpsCompleteEverywhereOrFailEverywhere) {
  for (unsigned seed = 1; seed <= 16; ++seed)
    concurrent_ops_agree(seed % 2 ? 4 : 5, static_cast<int>(seed % 4), seed);
}

TEST(Revoke, RevokingTwiceAndFromTwoRanksIsHarmless) {
  mccl::runtime rt;
  mccl_test::run_ranks(rt, 4, settings(), [&](mccl::communicator& comm) {
    comm.barrier().wait();
    if (comm.rank() == 0 || comm.rank() == 3) {
      comm.revoke("twice, first");
      comm.revoke("twice, second");
    }
    // Everyone learns of it within the bound.
    auto until = clock_type::now() + revoke_bound;
    while (!comm.revoked() && clock_type::now() < until)
      std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(comm.revoked()) << "rank " << comm.rank() << " never heard of the revoke";
    std::vector<float> v(4, 1.0f);
    EXPECT_THROW(comm.allreduce(v.data(), v.size()).wait(), mccl::error);
    auto all = comm.shrink({});
    ASSERT_TRUE(all.valid());
    expect_sums(all, comm.rank(), 1 + 2 + 3 + 4, "shrunk without exclusions");
    all.finalize();
  });
}
