// rendezvous_guard::finish: rank 0, whose process serves the store, stays
// until every rank has read what its setup needs from it.

#include "transport/store/rendezvous_guard.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using mccl::transport::rendezvous_guard;

rendezvous_guard guard_of(mccl::store& s, int rank, int world) {
  return rendezvous_guard(s, "mccl/0/", {rank, world, "", "pid " + std::to_string(rank), {}, true}, 5000ms);
}

TEST(RendezvousGuard, RankZeroFinishesOnlyAfterEveryRankHas) {
  mccl::memory_store s;
  auto r0 = guard_of(s, 0, 3);
  auto r1 = guard_of(s, 1, 3);
  auto r2 = guard_of(s, 2, 3);
  auto start = clock_type::now();
  r0.join(start + 5s);
  r1.join(start + 5s);
  r2.join(start + 5s);
  r1.finish(start + 5s); // returns at once: only rank 0 waits
  std::thread late([&] {
    std::this_thread::sleep_for(300ms);
    r2.finish(clock_type::now() + 5s);
  });
  r0.finish(start + 5s);
  auto waited = clock_type::now() - start;
  late.join();
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 3s);
}

TEST(RendezvousGuard, RankZeroStopsWaitingWhenAnotherRankFailed) {
  mccl::memory_store s;
  auto r0 = guard_of(s, 0, 2);
  auto r1 = guard_of(s, 1, 2);
  auto start = clock_type::now();
  r0.join(start + 5s);
  r1.join(start + 5s);
  (void)r1.explain(mccl::error(mccl::errc::connect_failed, "rank 1 cannot map the board"));
  try {
    r0.finish(start + 5s);
    FAIL() << "finish() returned though rank 1 failed";
  } catch (const mccl::error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 cannot map the board"), std::string::npos) << e.what();
  }
  EXPECT_LT(clock_type::now() - start, 3s);
}

TEST(RendezvousGuard, RankZeroWaitIsBoundedByTheDeadline) {
  mccl::memory_store s;
  auto r0 = guard_of(s, 0, 2);
  auto start = clock_type::now();
  r0.join(start + 5s);
  try {
    r0.finish(start + 200ms);
    FAIL() << "finish() returned though rank 1 never finished";
  } catch (const mccl::error& e) {
    EXPECT_EQ(e.code(), mccl::errc::rendezvous_failed);
    EXPECT_NE(std::string(e.what()).find("rank 1 to finish setting up"), std::string::npos) << e.what();
  }
  EXPECT_LT(clock_type::now() - start, 2s);
}

} // namespace
