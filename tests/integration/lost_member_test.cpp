// A lost member revokes the communicator (actors/supervisor_actor.hpp):
// the engine finds the lost peer, the peer's link actor exits with that
// finding, and the supervisor revokes the communicator; every rank's op in
// flight fails naming the peer, every rank's communicator is revoked by
// the time its wait() throws, and the survivors shrink without calling
// revoke() first. Ranks are threads over loopback TCP; a fault scenario
// (comm_options::faults) closes the connection between ranks 0 and 2.

#include <mccl/mccl.hpp>

#include "actors/comm_core.hpp"
#include "api/communicator/communicator_impl.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

std::atomic<uint32_t> next_comm_id{9101};

struct rank_outcome {
  std::string error;       ///< what the failed op said
  bool revoked_at_throw = false;
  double failed_after_ms = 0; ///< from the op's issue to wait() throwing
  bool shrunk_ok = false;
  mccl::actors::comm_core::membership shrunk; ///< as the shrunk one's supervisor keeps it
};

} // namespace

TEST(LostMember, AClosedLinkRevokesEveryRankAndTheSurvivorsShrinkWithoutRevoke) {
  auto scenario = std::make_shared<mccl::transport::fault_scenario>(mccl::transport::parse_fault_scenario(
    R"({"seed": 1, "faults": [{"kind": "close", "link": "2->0", "seq": 2}]})", "lost_member_test"));
  mccl::runtime rt;
  mccl::config_overrides o;
  o.set("MCCL_TRANSPORT", "tcp");
  o.set("MCCL_TIMEOUT_MS", 10000);
  o.set("MCCL_CONNECT_TIMEOUT_MS", 10000);
  constexpr int world = 3;
  constexpr int victim = 2;
  auto lost_links_before = mccl::get_metrics().lost_links;
  auto store = std::make_shared<mccl::memory_store>();
  uint32_t id = next_comm_id++;
  std::vector<rank_outcome> out(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        mccl::comm_options co;
        co.rank = r;
        co.world_size = world;
        co.store = store;
        co.comm_id = id;
        co.overrides = o;
        co.faults = scenario;
        auto comm = rt.create_communicator(co);
        auto& me = out[static_cast<std::size_t>(r)];
        for (int op = 0; op < 6 && me.error.empty(); ++op) {
          std::vector<float> data(4096, 1.0f);
          auto issued = clock_type::now();
          try {
            comm.allreduce(data.data(), data.size()).wait();
          } catch (const mccl::error& e) {
            // Read before anything else: revoked as the op fails.
            me.revoked_at_throw = comm.revoked();
            me.failed_after_ms = std::chrono::duration<double, std::milli>(clock_type::now() - issued).count();
            me.error = e.what();
          }
        }
        if (r != victim) {
          // No revoke() first: the lost member revoked it already.
          auto small = comm.shrink({victim});
          std::vector<float> v(1000, static_cast<float>(r + 1));
          small.allreduce(v.data(), v.size()).wait();
          me.shrunk_ok = small.size() == world - 1 && v[0] == 3.0f && v[999] == 3.0f;
          me.shrunk = mccl::detail::communicator_factory::impl_of(small)->core->members();
          small.finalize();
        }
        comm.finalize();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < world; ++r) {
    const auto& me = out[static_cast<std::size_t>(r)];
    ASSERT_FALSE(me.error.empty()) << "rank " << r << ": no op failed";
    EXPECT_TRUE(me.revoked_at_throw) << "rank " << r << ": not revoked when wait() threw: " << me.error;
    EXPECT_NE(me.error.find("lost rank"), std::string::npos) << "rank " << r << ": " << me.error;
    EXPECT_LT(me.failed_after_ms, 1000.0) << "rank " << r << ": " << me.error;
    std::printf("rank %d failed after %.1f ms: %s\n", r, me.failed_after_ms, me.error.c_str());
    if (r != victim) {
      EXPECT_TRUE(me.shrunk_ok) << "rank " << r << ": the shrunk communicator did not sum right";
      // The shrink told the new communicator's supervisor its membership.
      EXPECT_EQ(me.shrunk.epoch, 1u) << "rank " << r;
      EXPECT_EQ(me.shrunk.members, (std::vector<int>{0, 1})) << "rank " << r;
    }
  }
  // The closed link's ends name each other.
  EXPECT_NE(out[0].error.find("rank 2"), std::string::npos) << out[0].error;
  EXPECT_NE(out[2].error.find("rank 0"), std::string::npos) << out[2].error;
  // The supervisor of at least one end saw its link actor exit.
  EXPECT_GE(mccl::get_metrics().lost_links - lost_links_before, 1u);
}
