// shrink: the survivors of a communicator build a new one without the ranks
// they name, in the same processes, and run correct collectives on it.
// Ranks are threads of this process (rank_threads.hpp); a rank "dies" by
// finalizing without warning the others. tests/multiproc/recovery_test.py
// does the same with a SIGKILLed process.
#include "rank_threads.hpp"

#include <mutex>
#include <set>

namespace {

using namespace std::chrono_literals;

mccl::config_overrides fast_failure() {
  mccl::config_overrides o;
  o.set("MCCL_TIMEOUT_MS", "5000");
  o.set("MCCL_CONNECT_TIMEOUT_MS", "10000");
  return o;
}

/// Each survivor allreduces (its old rank + 1) on the shrunk communicator.
void expect_working(mccl::communicator& small, int old_rank, const std::set<int>& survivors) {
  int64_t expected = 0;
  for (int r : survivors)
    expected += r + 1;
  for (int round = 0; round < 3; ++round) {
    std::vector<int64_t> v(1000, old_rank + 1);
    small.allreduce(v.data(), v.size()).wait();
    for (auto x : v)
      ASSERT_EQ(x, expected) << "old rank " << old_rank << ", round " << round;
  }
  small.barrier().wait();
}

void shrink_without(int world, int victim) {
  mccl::runtime rt;
  std::set<int> survivors;
  for (int r = 0; r < world; ++r)
    if (r != victim)
      survivors.insert(r);
  std::mutex m;
  std::vector<std::string> errors;
  mccl_test::run_ranks(rt, world, fast_failure(), [&](mccl::communicator& comm) {
    int r = comm.rank();
    if (r == victim) {
      comm.barrier().wait();
      return; // run_ranks finalizes it: gone without telling anyone why
    }
    // The old communicator fails: the victim left before this allreduce.
    // A survivor may already fail in the barrier: another survivor that
    // finished it sooner may learn of the departure and abort before this
    // one has read its last barrier message (the ABORT and that message
    // come over different connections). Either way the op names the victim.
    std::vector<float> data(4096, 1.0f);
    try {
      comm.barrier().wait();
      comm.allreduce(data.data(), data.size()).wait();
    } catch (const mccl::error& e) {
      // The departed member revoked the communicator before the op failed.
      EXPECT_TRUE(comm.revoked()) << "rank " << r << ": " << e.what();
      std::lock_guard<std::mutex> g{m};
      errors.push_back(e.what());
    }
    auto small = comm.shrink({victim});
    ASSERT_TRUE(small.valid());
    EXPECT_EQ(small.size(), world - 1);
    EXPECT_EQ(small.rank(), r < victim ? r : r - 1);
    expect_working(small, r, survivors);
    small.finalize();
  });
  EXPECT_EQ(errors.size(), survivors.size()) << "every survivor's op on the old communicator fails";
  for (const auto& e : errors)
    EXPECT_NE(e.find("rank " + std::to_string(victim)), std::string::npos) << e;
}

} // namespace

TEST(Shrink, SurvivorsOfFourContinueWithoutRankTwo) { shrink_without(4, 2); }

TEST(Shrink, SurvivorsContinueWithoutRankZeroWhenTheStoreIsTheirs) { shrink_without(3, 0); }

TEST(Shrink, TwiceInARow) {
  mccl::runtime rt;
  mccl_test::run_ranks(rt, 4, fast_failure(), [&](mccl::communicator& comm) {
    int r = comm.rank();
    if (r == 3)
      return;
    auto three = comm.shrink({3});
    if (r == 1)
      return three.finalize();
    auto two = three.shrink({1});
    EXPECT_EQ(two.size(), 2);
    expect_working(two, r, {0, 2});
    two.finalize();
    three.finalize();
  });
}

TEST(Shrink, BadExclusionsAreErrorsNamingTheRank) {
  mccl::runtime rt;
  mccl_test::run_ranks(rt, 2, fast_failure(), [&](mccl::communicator& comm) {
    try {
      comm.shrink({comm.rank()});
      ADD_FAILURE() << "excluding oneself was accepted";
    } catch (const mccl::error& e) {
      EXPECT_EQ(e.code(), mccl::errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("this rank is in the excluded set"), std::string::npos);
    }
    try {
      comm.shrink({5});
      ADD_FAILURE() << "excluding rank 5 of 2 was accepted";
    } catch (const mccl::error& e) {
      EXPECT_NE(std::string(e.what()).find("excluded rank 5 is outside"), std::string::npos);
    }
  });
}
