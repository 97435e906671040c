// Hosts are numbered from the ranks' published endpoints, alike on every
// rank, and the built-in table broadcasts along a chain only across hosts.
// MCCL_ALGO may name the host board's board_rs and board_stage, which the
// engine refuses.

#include "collectives/extension/registry.hpp"
#include <mccl/program.hpp>
#include <mccl/config.hpp>
#include <mccl/error.hpp>
#include <mccl/store.hpp>
#include "transport/tcp/tcp_mesh.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <tuple>
#include <vector>

namespace {

std::vector<int> hosts_of(const std::vector<std::string>& published) {
  mccl::memory_store store;
  for (std::size_t r = 0; r < published.size(); ++r)
    store.set("mccl/7/ep/" + std::to_string(r), published[r]);
  mccl::transport::mesh_options o;
  o.world = static_cast<int>(published.size());
  o.rendezvous = &store;
  o.key_prefix = "mccl/7/";
  o.connect_timeout = std::chrono::milliseconds(100);
  return mccl::sched::number_hosts(mccl::transport::host_addresses(o));
}

} // namespace

TEST(HostCount, RanksPublishingTheSameFirstAddressShareAHost) {
  using v = std::vector<int>;
  EXPECT_EQ(hosts_of({"127.0.0.1:4000", "127.0.0.1:4001", "127.0.0.1:4002"}), (v{0, 0, 0}));
  EXPECT_EQ(hosts_of({"10.77.0.2:4000", "10.77.0.1:4000,10.77.1.1:4000",
                      "10.77.0.1:4001,10.77.1.1:4001", "[fd00::3]:4000", "10.77.0.2:4001"}),
            (v{0, 1, 1, 2, 0}));
  EXPECT_EQ(hosts_of({"127.0.0.1:4000"}), v{0});
}

TEST(HostCount, AMissingEndpointIsAnErrorNotAGuess) {
  mccl::memory_store store;
  store.set("p/ep/0", "127.0.0.1:1");
  mccl::transport::mesh_options o;
  o.world = 2;
  o.rendezvous = &store;
  o.key_prefix = "p/";
  o.connect_timeout = std::chrono::milliseconds(50);
  EXPECT_THROW(mccl::transport::host_addresses(o), mccl::error);
}

TEST(DefaultAlgorithm, BroadcastTakesTheChainOnlyAcrossHostsAndForLargeOps) {
  mccl::config one_host;
  mccl::config three_hosts;
  three_hosts.hosts = 3;
  constexpr std::size_t MiB = 1 << 20;
  EXPECT_EQ(mccl::default_algorithm(mccl::op_kind::broadcast, 16 * MiB, 3, one_host), "tree");
  EXPECT_EQ(mccl::default_algorithm(mccl::op_kind::broadcast, 16 * MiB, 3, three_hosts), "chain");
  EXPECT_EQ(mccl::default_algorithm(mccl::op_kind::broadcast, MiB, 3, three_hosts), "chain");
  EXPECT_EQ(mccl::default_algorithm(mccl::op_kind::broadcast, 64 * 1024, 3, three_hosts), "tree");
  EXPECT_EQ(mccl::default_algorithm(mccl::op_kind::broadcast, 16 * MiB, 2, three_hosts), "tree");
  // Past k+2 ranks for k chunks the chain's pipeline is longer than the
  // scatter-allgather's two passes (64 MiB: 64 chunks of 1 MiB).
  mccl::config many_hosts;
  many_hosts.hosts = 256;
  EXPECT_EQ(mccl::default_algorithm(mccl::op_kind::broadcast, 64 * MiB, 64, many_hosts), "chain");
  EXPECT_EQ(mccl::default_algorithm(mccl::op_kind::broadcast, 64 * MiB, 256, many_hosts), "scatter_allgather");
  EXPECT_EQ(mccl::default_algorithm(mccl::op_kind::broadcast, 4 * MiB, 16, many_hosts), "scatter_allgather");
}

TEST(DefaultAlgorithm, HostAwareOnesAcrossHostsWithSeveralRanksOnSomeAbove16K) {
  using mccl::op_kind;
  mccl::config one_host;
  mccl::config two_hosts;
  two_hosts.hosts = 2;
  constexpr std::size_t MiB = 1 << 20;
  for (auto kind : {op_kind::allreduce, op_kind::broadcast, op_kind::allgather,
                    op_kind::reduce_scatter}) {
    EXPECT_EQ(mccl::default_algorithm(kind, 64 * MiB, 4, two_hosts), "hier") << to_string(kind);
    EXPECT_NE(mccl::default_algorithm(kind, 64 * MiB, 4, one_host), "hier") << to_string(kind);
    EXPECT_NE(mccl::default_algorithm(kind, 64 * MiB, 2, two_hosts), "hier") << to_string(kind);
    EXPECT_NE(mccl::default_algorithm(kind, 16 * 1024, 4, two_hosts), "hier") << to_string(kind);
    EXPECT_EQ(mccl::default_algorithm(kind, 16 * 1024 + 1, 4, two_hosts), "hier") << to_string(kind);
  }
  EXPECT_NE(mccl::default_algorithm(op_kind::reduce, 64 * MiB, 4, two_hosts), "hier");
}

TEST(DefaultAlgorithm, SmallAllreducesTakeOneShotExceptFromSixteenKiBOnFourRanks) {
  mccl::config one_host;
  EXPECT_EQ(mccl::default_algorithm(mccl::op_kind::allreduce, 4, 4, one_host), "oneshot");
  EXPECT_EQ(mccl::default_algorithm(mccl::op_kind::allreduce, 16 * 1024 - 1, 4, one_host), "oneshot");
  EXPECT_EQ(mccl::default_algorithm(mccl::op_kind::allreduce, 16 * 1024, 4, one_host), "rd");
  EXPECT_EQ(mccl::default_algorithm(mccl::op_kind::allreduce, 64 * 1024, 4, one_host), "rd");
  EXPECT_EQ(mccl::default_algorithm(mccl::op_kind::allreduce, 64 * 1024, 3, one_host), "oneshot");
  EXPECT_EQ(mccl::default_algorithm(mccl::op_kind::allreduce, 64 * 1024, 2, one_host), "oneshot");
}

TEST(BoardOnlyAlgorithm, McclAlgoMayNameBoardRsAndTheEngineRefusesItByName) {
  mccl::register_builtin_algorithms();
  mccl::config cfg;
  cfg.algo = mccl::parse_algo_spec("allreduce=board_rs");
  EXPECT_NO_THROW(mccl::validate_algo_spec(cfg));
  // Reaching the engine means the communicator has no board: refused with
  // the reason, never replaced by the table's choice.
  mccl::op_request op;
  op.count = 1 << 16;
  std::string why;
  mccl::errc code = mccl::errc::none;
  auto [name, factory] = mccl::select_algorithm(op, 4, cfg, &why, &code);
  EXPECT_FALSE(factory);
  EXPECT_EQ(code, mccl::errc::invalid_config);
  EXPECT_NE(why.find("board_rs"), std::string::npos) << why;
  EXPECT_NE(why.find("host board"), std::string::npos) << why;
  // Allreduce and reduce have board_rs; broadcast, allgather and
  // reduce_scatter board_stage, refused alike off the board.
  cfg.algo = mccl::parse_algo_spec("broadcast=board_rs");
  EXPECT_THROW(mccl::validate_algo_spec(cfg), mccl::error);
  cfg.algo = mccl::parse_algo_spec("reduce=board_rs;broadcast=board_stage;allgather=board_stage;reduce_scatter=board_stage");
  EXPECT_NO_THROW(mccl::validate_algo_spec(cfg));
  op.kind = mccl::op_kind::allgather;
  std::tie(name, factory) = mccl::select_algorithm(op, 4, cfg, &why, &code);
  EXPECT_FALSE(factory);
  EXPECT_EQ(code, mccl::errc::invalid_config);
  EXPECT_NE(why.find("board_stage for this allgather"), std::string::npos) << why;
  cfg.algo = mccl::parse_algo_spec("alltoall=board_stage");
  EXPECT_THROW(mccl::validate_algo_spec(cfg), mccl::error);
}
