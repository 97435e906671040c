// A finalized rank's supervisor, progress and link actors must be
// destroyed: the supervisor holds and is linked to the links and holds the
// progress actor; none of them may keep another (or the watchdog, or every
// link's staging buffer) alive after finalize. And supervision is the error
// model: a link actor that exits with an error aborts the communicator,
// naming the link, and the ops waiting fail with it.

#include <string>
#include <vector>

#include "sim_world.hpp" // last: includes the CAF test DSL

using namespace mccl;
using namespace mccl::sim_test;

namespace {

class ActorLifetimeSim : public sim_world_fixture<> {};

TEST_F(ActorLifetimeSim, FinalizedRanksFreeTheirActors) {
  auto& w = make_world(3, sim_config("allreduce=ring"));
  struct watched {
    std::string what;
    caf::weak_actor_ptr ptr;
  };
  std::vector<watched> actors;
  for (int r = 0; r < w.size(); ++r) {
    actors.push_back({"progress actor of rank " + std::to_string(r),
                      caf::actor_cast<caf::weak_actor_ptr>(w.progress(r))});
    actors.push_back({"supervisor of rank " + std::to_string(r),
                      caf::actor_cast<caf::weak_actor_ptr>(w.core(r).supervisor_actor())});
    for (int p = 0; p < w.size(); ++p)
      if (p != r)
        actors.push_back({"link actor of rank " + std::to_string(r) + " to rank " + std::to_string(p),
                          caf::actor_cast<caf::weak_actor_ptr>(w.link(r, p))});
  }
  // One op, so the actors did some work, then finalize every rank.
  std::vector<work_ptr> works;
  for (int r = 0; r < w.size(); ++r) {
    auto& b = w.alloc<float>(10000, 1.0f);
    works.push_back(w.allreduce(r, b.data(), b.data(), b.size(), dtype::float32));
  }
  auto policy = round_robin();
  ASSERT_TRUE(w.drive(works, policy));
  w.shutdown(); // drops every handle the harness holds
  // Timers still pending (heartbeat ticks, request timeouts) hold their
  // receivers; every actor has quit, so firing them re-arms nothing.
  sched.trigger_timeouts();
  sched.run();

  for (const auto& a : actors) {
    auto strong = caf::actor_cast<caf::strong_actor_ptr>(a.ptr);
    // The count includes `strong` itself.
    EXPECT_EQ(strong, nullptr) << a.what << " is still alive after finalize, held by "
                               << (strong ? strong->strong_refs.load() - 1 : 0)
                               << " strong reference(s) nobody can release";
  }
}

TEST_F(ActorLifetimeSim, ALinkActorThatFailsAbortsTheCommunicatorThroughItsSupervisor) {
  auto& w = make_world(3, sim_config("allreduce=ring"));
  // Rank 0's link to rank 2 fails (as an exception in a handler would end
  // it): the supervisor it is linked to hears the exit.
  caf::anon_send(caf::actor_cast<caf::actor>(w.link(0, 2)),
                 caf::exit_msg{caf::actor_addr{}, caf::make_error(caf::sec::runtime_error)});
  w.settle();
  ASSERT_TRUE(w.core(0).closed()) << "rank 0 did not abort after its link to rank 2 failed";
  auto why = w.core(0).eng().why_closed();
  EXPECT_NE(why.find("the link actor of rank 0 to rank 2 exited"), std::string::npos) << why;
  // The abort reaches the other ranks, and their ops fail with it.
  std::vector<work_ptr> works;
  for (int r = 1; r < w.size(); ++r) {
    auto& b = w.alloc<float>(16, 1.0f);
    works.push_back(w.allreduce(r, b.data(), b.data(), b.size(), dtype::float32));
  }
  auto policy = round_robin();
  w.drive(works, policy);
  for (std::size_t i = 0; i < works.size(); ++i) {
    ASSERT_TRUE(works[i]->done()) << "rank " << i + 1 << "'s allreduce did not end";
    auto failure = works[i]->failure();
    ASSERT_TRUE(failure.has_value()) << "rank " << i + 1 << "'s allreduce succeeded on an aborted world";
    EXPECT_NE(std::string(failure->what()).find("rank 0"), std::string::npos) << failure->what();
  }
  // A lost member: the communicator is revoked on every rank.
  for (int r = 0; r < w.size(); ++r)
    EXPECT_TRUE(w.core(r).revoked()) << "rank " << r;
}

TEST_F(ActorLifetimeSim, TheSupervisorKeepsTheMembershipAChangeDecided) {
  auto& w = make_world(3, sim_config());
  ASSERT_TRUE(w.settle());
  auto m = w.core(1).members();
  EXPECT_EQ(m.epoch, 0u);
  EXPECT_EQ(m.members, (std::vector<int>{0, 1, 2}));
  w.core(1).announce_members(4, {0, 2, 3});
  ASSERT_TRUE(w.settle());
  m = w.core(1).members();
  EXPECT_EQ(m.epoch, 4u);
  EXPECT_EQ(m.members, (std::vector<int>{0, 2, 3}));
  // The epoch it has already, or a list that is not one member per rank:
  // refused, nothing changes.
  w.core(1).announce_members(4, {9, 9, 9});
  w.core(1).announce_members(5, {1});
  ASSERT_TRUE(w.settle());
  m = w.core(1).members();
  EXPECT_EQ(m.epoch, 4u);
  EXPECT_EQ(m.members, (std::vector<int>{0, 2, 3}));
}

} // namespace
