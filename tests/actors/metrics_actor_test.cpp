// The metrics actor (actors/metrics_actor.hpp) under a real actor system
// with CAF's workers: full batches are folded by the actor without anyone
// asking; get_metrics() counts every op handed over before it, folded or
// not; a batch sent from a communicator's unit is folded when that unit
// is drained, by its driver, and batches left waiting on a unit nobody
// drains are folded by later ops, a few batches behind; every op is counted exactly once while
// the actor and readers fold side by side; after stop() nothing is lost; a batch that mixes more kinds
// and algorithms than the fold remembers at once counts each under its own.

#include "actors/driving_unit.hpp"
#include "actors/metrics_actor.hpp"

#include <mccl/metrics.hpp>

#include <caf/actor_system_config.hpp>
#include <caf/all.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using mccl::actors::metrics_feed;

namespace {

mccl::op_metrics metrics() {
  mccl::op_metrics m;
  m.op = "metrics_actor_test";
  m.algorithm = "test";
  m.bytes = 4;
  m.duration = std::chrono::microseconds(10);
  return m;
}

uint64_t counted() {
  auto m = mccl::get_metrics();
  auto i = m.ops.find("metrics_actor_test");
  return i == m.ops.end() ? 0 : i->second.ops;
}

/// Waits (at most 10 s) until the actor waits for mail, after it folded
/// what it was sent from no unit: then it runs where its next batch is
/// sent from.
bool actor_idle(const metrics_feed& feed) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!feed.actor_idle()) {
    if (std::chrono::steady_clock::now() > until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

/// Waits (at most 10 s) until `feed` holds nothing the actor has not folded.
bool drained_by_actor(const metrics_feed& feed, std::size_t left) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (feed.held() > left) {
    if (std::chrono::steady_clock::now() > until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

class MetricsActor : public ::testing::Test {
protected:
  void SetUp() override { mccl::reset_metrics(); }
  caf::actor_system_config cfg_;
  caf::actor_system sys_{cfg_};
};

TEST_F(MetricsActor, FullBatchesAreFoldedByTheActorAlone) {
  auto feed = metrics_feed::start(sys_);
  for (std::size_t i = 0; i < 2 * metrics_feed::batch_ops + 3; ++i)
    feed->add(metrics(), false, nullptr);
  // Nobody reads: only the actor can fold the two full batches. The 3 ops
  // of the batch being filled wait for a reader.
  EXPECT_TRUE(drained_by_actor(*feed, 3)) << feed->held() << " ops held";
  EXPECT_EQ(feed->held(), 3u);
  EXPECT_EQ(counted(), 2 * metrics_feed::batch_ops + 3); // the reader folds the 3
  EXPECT_EQ(feed->held(), 0u);
  feed->stop();
}

TEST_F(MetricsActor, ABatchSentFromADrivingUnitIsFoldedByItsDrainOnTheDrivingThread) {
  auto feed = metrics_feed::start(sys_);
  // The actor starts on a CAF worker; a batch from no unit runs there too.
  // Once it is folded the actor waits for mail, idle.
  for (std::size_t i = 0; i < metrics_feed::batch_ops; ++i)
    feed->add(metrics(), false, nullptr);
  ASSERT_TRUE(drained_by_actor(*feed, 0));
  ASSERT_TRUE(actor_idle(*feed)); // the worker's resume returned
  std::atomic<int> wakes{0};
  mccl::actors::driving_unit unit{sys_, [&] { ++wakes; }};
  {
    // This thread drives the unit (a communicator's leader): the batch's
    // message queues the idle actor on the unit, and nothing else runs it.
    mccl::actors::driving_unit::driver_scope driving{unit};
    for (std::size_t i = 0; i < metrics_feed::batch_ops; ++i)
      feed->add(metrics(), false, &unit);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(feed->held(), metrics_feed::batch_ops) << "folded by a thread other than the unit's driver";
    EXPECT_EQ(unit.drain(), 1u);
    EXPECT_EQ(feed->held(), 0u) << "the drain did not fold the batch";
  }
  EXPECT_EQ(wakes.load(), 0);
  EXPECT_EQ(unit.stats().foreign_pushes, 0u);
  // From a thread that does not drive it (an op completed after its
  // leader let go), the unit is woken, so its driver drains it soon.
  std::thread([&] {
    for (std::size_t i = 0; i < metrics_feed::batch_ops; ++i)
      feed->add(metrics(), false, &unit);
  }).join();
  EXPECT_EQ(wakes.load(), 1);
  EXPECT_EQ(feed->held(), metrics_feed::batch_ops);
  EXPECT_EQ(unit.drain(), 1u);
  EXPECT_EQ(feed->held(), 0u);
  EXPECT_EQ(counted(), 3 * metrics_feed::batch_ops);
  feed->stop();
}

TEST_F(MetricsActor, BatchesLeftWaitingOnAUnitNobodyDrainsAreFoldedByLaterOps) {
  auto feed = metrics_feed::start(sys_);
  for (std::size_t i = 0; i < metrics_feed::batch_ops; ++i) // the actor idles afterwards, as above
    feed->add(metrics(), false, nullptr);
  ASSERT_TRUE(drained_by_actor(*feed, 0));
  ASSERT_TRUE(actor_idle(*feed));
  // The actor waits on this unit, which nobody drains (a communicator that
  // never waits for its peers): at most max_waiting_batches full batches
  // are held; each later one folds the oldest.
  mccl::actors::driving_unit unit{sys_};
  constexpr std::size_t extra = 3;
  for (std::size_t i = 0; i < (metrics_feed::max_waiting_batches + extra) * metrics_feed::batch_ops; ++i) {
    feed->add(metrics(), false, &unit);
    // (and the batch being filled)
    ASSERT_LT(feed->held(), (metrics_feed::max_waiting_batches + 1) * metrics_feed::batch_ops) << "after " << i + 1 << " ops";
  }
  EXPECT_EQ(feed->held(), metrics_feed::max_waiting_batches * metrics_feed::batch_ops);
  // Once drained, the actor folds what is left and skips what was folded.
  unit.drain();
  EXPECT_EQ(feed->held(), 0u);
  EXPECT_EQ(counted(), (metrics_feed::max_waiting_batches + extra + 1) * metrics_feed::batch_ops);
  feed->stop();
}

TEST_F(MetricsActor, ReadersCountEveryOpHandedOverBeforeThem) {
  auto feed = metrics_feed::start(sys_);
  feed->add(metrics(), false, nullptr);
  feed->add(metrics(), true, nullptr);
  auto m = mccl::get_metrics();
  EXPECT_EQ(m.ops["metrics_actor_test"].ops, 2u);
  EXPECT_EQ(m.ops["metrics_actor_test"].errors, 1u);
  feed->add(metrics(), false, nullptr);
  mccl::reset_metrics(); // counts the op before resetting: none after it
  EXPECT_EQ(counted(), 0u);
  feed->stop();
}

TEST_F(MetricsActor, EveryOpIsCountedOnceWhileActorAndReadersFold) {
  auto feed = metrics_feed::start(sys_);
  constexpr int threads = 3;
  constexpr int per_thread = 5000;
  std::atomic<bool> adding{true};
  std::thread reader([&] {
    while (adding.load())
      (void)mccl::get_metrics();
  });
  std::vector<std::thread> adders;
  for (int t = 0; t < threads; ++t)
    adders.emplace_back([&] {
      for (int i = 0; i < per_thread; ++i)
        feed->add(metrics(), false, nullptr);
    });
  for (auto& t : adders)
    t.join();
  adding = false;
  reader.join();
  EXPECT_EQ(counted(), static_cast<uint64_t>(threads * per_thread));
  feed->stop();
}

TEST_F(MetricsActor, MixedKindsAndAlgorithmsInOneBatchAreEachCountedUnderTheirOwn) {
  auto feed = metrics_feed::start(sys_);
  // Six (kind, algorithm) pairs in turn, more than the fold keeps at hand,
  // and every seventh op failed: counted under its kind, under no algorithm.
  const char* kinds[] = {"metrics_mix_a", "metrics_mix_b", "metrics_mix_c"};
  const char* algorithms[] = {"one", "two"};
  constexpr int rounds = 100;
  int failed[3] = {0, 0, 0};
  int done[3][2] = {{0, 0}, {0, 0}, {0, 0}};
  int n = 0;
  for (int r = 0; r < rounds; ++r)
    for (int k = 0; k < 3; ++k)
      for (int a = 0; a < 2; ++a) {
        auto m = metrics();
        m.op = kinds[k];
        m.algorithm = algorithms[a];
        bool fails = ++n % 7 == 0;
        feed->add(m, fails, nullptr);
        if (fails)
          ++failed[k];
        else
          ++done[k][a];
      }
  auto m = mccl::get_metrics();
  for (int k = 0; k < 3; ++k) {
    const auto& kind = m.ops[kinds[k]];
    EXPECT_EQ(kind.ops, static_cast<uint64_t>(2 * rounds)) << kinds[k];
    EXPECT_EQ(kind.errors, static_cast<uint64_t>(failed[k])) << kinds[k];
    ASSERT_EQ(kind.algorithms.size(), 2u) << kinds[k];
    for (int a = 0; a < 2; ++a)
      EXPECT_EQ(kind.algorithms.at(algorithms[a]), static_cast<uint64_t>(done[k][a])) << kinds[k] << " " << algorithms[a];
  }
  feed->stop();
}

TEST_F(MetricsActor, OpsAfterStopAreStillCounted) {
  auto feed = metrics_feed::start(sys_);
  for (std::size_t i = 0; i < metrics_feed::batch_ops + 1; ++i)
    feed->add(metrics(), false, nullptr);
  feed->stop(); // folds all it holds; the actor ends
  EXPECT_EQ(feed->held(), 0u);
  for (std::size_t i = 0; i < metrics_feed::batch_ops + 1; ++i)
    feed->add(metrics(), false, nullptr); // no actor any more: a reader folds them
  EXPECT_EQ(counted(), 2 * (metrics_feed::batch_ops + 1));
}

} // namespace
