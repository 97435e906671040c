// Board ops on op actors (actors/op_actor.hpp, board_session), under a real
// actor system: the pool runs each board op on one of its actors, on the
// calling thread and within the call, and hosts the next op on the same
// actor; an actor whose board op throws fails the op naming why, dies with
// an error its monitor hears of, and leaves the pool, so the next op gets
// a new actor (which the supervisor is told of).

#include "actors/op_actor.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/all.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace mccl::actors;

namespace {

/// A board op that records where it ran, or throws an int (no
/// std::exception: nothing of the op's own catches it).
class recording_session final : public board_session {
public:
  explicit recording_session(bool throws = false) : throws_(throws) {}
  void run() override {
    ++runs;
    thread = std::this_thread::get_id();
    if (throws_)
      throw 42;
  }
  void fail(mccl::errc c, const std::string& why) override {
    code = c;
    failure = why;
  }

  int runs = 0;
  std::thread::id thread;
  mccl::errc code = mccl::errc::none;
  std::string failure;

private:
  bool throws_;
};

class BoardOpActors : public ::testing::Test {
protected:
  BoardOpActors() {
    cfg_.set("scheduler.max-threads", static_cast<size_t>(2));
    system_ = std::make_unique<caf::actor_system>(cfg_);
    monitor_ = std::make_unique<caf::scoped_actor>(*system_);
    unit_ = std::make_unique<driving_unit>(*system_);
    pool_ = std::make_unique<op_actors>(*unit_, [this](const op_handle& a) {
      supervised_.push_back(a);
      (*monitor_)->monitor(a);
    });
  }
  ~BoardOpActors() override {
    supervised_.clear(); // the handles kept here would keep the pool's actors alive
    pool_.reset();
    unit_.reset();
    monitor_.reset();
    system_->await_all_actors_done();
  }

  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> system_;
  std::unique_ptr<caf::scoped_actor> monitor_;
  std::unique_ptr<driving_unit> unit_;
  std::unique_ptr<op_actors> pool_;
  std::vector<op_handle> supervised_;
};

} // namespace

TEST_F(BoardOpActors, EachRunsOnTheCallingThreadWithinTheCallOnOneReusedActor) {
  recording_session first, second;
  pool_->run(first);
  EXPECT_EQ(first.runs, 1);
  EXPECT_EQ(first.thread, std::this_thread::get_id());
  pool_->run(second);
  EXPECT_EQ(second.runs, 1);
  EXPECT_EQ(second.thread, std::this_thread::get_id());
  EXPECT_EQ(first.code, mccl::errc::none);
  ASSERT_EQ(supervised_.size(), 1u) << "the second op should reuse the first op's actor";
  // The second op's start found its actor idle: handled in place, no mailbox.
  EXPECT_GE(unit_->stats().dispatches, 1u);
}

TEST_F(BoardOpActors, AnActorWhoseOpThrowsFailsItDiesAndIsReplaced) {
  recording_session healthy;
  pool_->run(healthy);
  ASSERT_EQ(supervised_.size(), 1u);
  recording_session faulty{true};
  pool_->run(faulty);
  EXPECT_EQ(faulty.runs, 1);
  EXPECT_EQ(faulty.code, mccl::errc::internal);
  EXPECT_NE(faulty.failure.find("its op actor failed: an exception that is not a std::exception"),
            std::string::npos)
    << faulty.failure;
  // Its monitor (the communicator's supervisor) hears of the death, with an error.
  bool down = false;
  (*monitor_)->receive(
    [&](const caf::down_msg& d) {
      down = true;
      EXPECT_EQ(d.source, caf::actor_cast<caf::actor_addr>(supervised_[0]));
      EXPECT_TRUE(d.reason) << "the actor should die with an error";
    },
    caf::after(std::chrono::seconds(10)) >> [] {});
  EXPECT_TRUE(down) << "no down message within 10 s";
  recording_session next;
  pool_->run(next);
  EXPECT_EQ(next.runs, 1);
  EXPECT_EQ(next.code, mccl::errc::none);
  EXPECT_EQ(supervised_.size(), 2u) << "the dead actor should have been replaced by a new one";
}
