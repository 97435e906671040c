// A finalized rank's progress and link actors must be destroyed. The
// progress actor holds its links and every link holds its progress actor;
// link_actor::on_exit drops its side so the pair does not keep itself (and,
// through the progress actor, the watchdog and every link's 256 KiB staging
// buffer) alive after finalize.

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

} // namespace
