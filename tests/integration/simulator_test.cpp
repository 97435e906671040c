// mccl-sim's core (tools/mccl_sim/sim_run.hpp): many ranks of the engine
// over the virtual-time network. The simulated time of each algorithm
// stays within 10 % of the α–β model (Thakur, Rabenseifner and Gropp) for
// a representative subset at 64 ranks, every element of every rank's
// result is right (scaled mode included), a killed rank is named by every
// survivor within the grace period, and the survivors then run correctly;
// three killed at 512 ranks, shrink, grow by three, every element checked.

#include "collectives/engine/engine.hpp"
#include "tools/mccl_sim/sim_run.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace mccl;
using mccl::sim::run_options;

namespace {

run_options options(int ranks, op_kind op, const std::string& algo, std::size_t bytes) {
  run_options o;
  o.ranks = ranks;
  o.op = op;
  o.algorithm = algo;
  o.bytes = bytes;
  return o;
}

void expect_correct(const sim::run_result& r) {
  EXPECT_EQ(r.mismatches, 0u) << r.first_mismatch;
  for (std::size_t i = 0; i < r.outcomes.size(); ++i)
    EXPECT_TRUE(r.outcomes[i].ok) << "rank " << i << ": " << r.outcomes[i].error;
}

struct case_t {
  op_kind op;
  const char* algo;
  std::size_t bytes;
};

class PredictionTest : public ::testing::TestWithParam<case_t> {};

TEST_P(PredictionTest, SimulatedTimeWithinTenPercentOfTheModel) {
  auto c = GetParam();
  auto r = sim::run(options(64, c.op, c.algo, c.bytes));
  expect_correct(r);
  EXPECT_EQ(r.algorithm, c.algo);
  ASSERT_TRUE(r.predicted.known) << "no model for " << c.algo;
  ASSERT_GT(r.predicted.seconds, 0);
  double ratio = r.seconds / r.predicted.seconds;
  EXPECT_GT(ratio, 0.9) << r.predicted.formula << ": simulated " << r.seconds << " s";
  EXPECT_LT(ratio, 1.1) << r.predicted.formula << ": simulated " << r.seconds << " s";
}

// 64 MiB runs scaled (each rank moves 1 MiB counted 64 times); 64 KiB and
// 4 B run at full size.
INSTANTIATE_TEST_SUITE_P(
  Sixty4Ranks, PredictionTest,
  ::testing::Values(case_t{op_kind::allreduce, "ring", 64u << 20}, case_t{op_kind::allreduce, "rd", 64u << 10},
                    case_t{op_kind::allreduce, "rd", 4}, case_t{op_kind::allreduce, "rabenseifner", 64u << 20},
                    case_t{op_kind::broadcast, "tree", 64u << 20}, case_t{op_kind::broadcast, "chain", 64u << 20},
                    case_t{op_kind::broadcast, "scatter_allgather", 64u << 20},
                    case_t{op_kind::allgather, "ring", 64u << 20}, case_t{op_kind::allgather, "rd", 64u << 20},
                    case_t{op_kind::reduce_scatter, "ring", 64u << 20},
                    case_t{op_kind::reduce_scatter, "rd", 64u << 10}, case_t{op_kind::reduce, "tree", 64u << 10}),
  [](const ::testing::TestParamInfo<case_t>& info) {
    return std::string(to_string(info.param.op)) + "_" + info.param.algo + "_" + std::to_string(info.param.bytes);
  });

// Scaled and unscaled runs of the same op take the same virtual time: the
// payload scale and the chunk shrink together.
TEST(Simulator, ScaledModeTakesTheTimeOfTheFullSize) {
  auto full = options(8, op_kind::allreduce, "ring", 16u << 20);
  full.max_rank_bytes = 16u << 20;
  auto scaled = full;
  scaled.max_rank_bytes = 64u << 10;
  auto a = sim::run(full), b = sim::run(scaled);
  expect_correct(a);
  expect_correct(b);
  EXPECT_EQ(a.scale, 1.0);
  EXPECT_EQ(b.scale, 256.0);
  EXPECT_NEAR(b.seconds / a.seconds, 1.0, 0.01);
}

// Ranks of one host share its NIC: a ring across hosts runs at the
// network's rate, and the model's per-host term says so.
TEST(Simulator, RanksPerHostShareTheNic) {
  auto o = options(32, op_kind::allreduce, "ring", 16u << 20);
  o.ranks_per_host = 4;
  auto r = sim::run(o);
  expect_correct(r);
  ASSERT_TRUE(r.predicted.known);
  EXPECT_NEAR(r.seconds / r.predicted.seconds, 1.0, 0.1) << r.predicted.formula;
}

// Ranks of one host share its memory: a 64 MiB allreduce on 64 ranks
// sends twice the bytes of 32, through a bus that by default is a quarter
// of the memory rate the curve gives for that many ranks (board_model.hpp),
// so it takes 2 * rate(32) / rate(64) as long, and the model's bus term
// says so; without the bus they would take the same time.
TEST(Simulator, RanksOfOneHostShareItsMemory) {
  auto time_of = [](int ranks, double bus) {
    auto o = options(ranks, op_kind::allreduce, "rabenseifner", 64u << 20);
    o.ranks_per_host = ranks;
    o.host_bus_bytes_per_s = bus;
    auto r = sim::run(o);
    expect_correct(r);
    EXPECT_TRUE(r.predicted.known);
    EXPECT_NEAR(r.seconds / r.predicted.seconds, 1.0, 0.1) << r.predicted.formula;
    return r.seconds;
  };
  auto curve = sim::measured_host_memory();
  ASSERT_LT(curve.rate(32), curve.rate(64)) << "the measured curve grows up to 64 ranks";
  EXPECT_NEAR(time_of(64, -1) / time_of(32, -1), 2 * curve.rate(32) / curve.rate(64), 0.1);
  EXPECT_NEAR(time_of(64, 40e9) / time_of(32, 40e9), 2.0, 0.1) << "a fixed bus";
  EXPECT_NEAR(time_of(64, 0) / time_of(32, 0), 1.0, 0.1);
}

// The table's choice for the full size, not for what each rank moves.
TEST(Simulator, TheTableChoosesForTheFullSize) {
  auto r = sim::run(options(64, op_kind::allreduce, "", 64u << 20));
  expect_correct(r);
  EXPECT_EQ(r.algorithm, "rabenseifner"); // power of two, above 256 KiB (registry.cpp)
  auto small = sim::run(options(64, op_kind::allreduce, "", 4));
  EXPECT_EQ(small.algorithm, "rd");
}

// With every rank on one host a job runs these ops on the host board,
// whose code mccl-sim does not run: it says so and models the board's time
// beside the engine's run, and says nothing where a job too takes the
// engine's algorithm.
TEST(Simulator, SaysWhereAJobWouldTakeTheHostBoardInstead) {
  auto on_hosts_of = [](int ranks_per_host, op_kind op, std::size_t bytes) {
    auto o = options(8, op, "", bytes);
    o.ranks_per_host = ranks_per_host;
    auto r = sim::run(o);
    expect_correct(r);
    return r;
  };
  auto large = on_hosts_of(8, op_kind::allreduce, 64u << 20);
  EXPECT_EQ(large.runtime_algorithm, "board_rs");
  EXPECT_NE(large.algorithm, "board_rs") << "the simulated run is the engine's";
  ASSERT_TRUE(large.board.has_value());
  EXPECT_EQ(large.board->algorithm, "board_rs");
  EXPECT_EQ(large.board->board_ops, 65u) << "64 pieces of a 1 MiB stage bank, plus one";
  EXPECT_GT(large.board->seconds, 0);
  EXPECT_EQ(on_hosts_of(8, op_kind::broadcast, 1u << 20).runtime_algorithm, "board_stage");
  EXPECT_EQ(on_hosts_of(8, op_kind::allreduce, 64).runtime_algorithm, "board");
  auto two_hosts = on_hosts_of(4, op_kind::allreduce, 64u << 20);
  EXPECT_EQ(two_hosts.runtime_algorithm, "") << "two hosts: the links";
  EXPECT_FALSE(two_hosts.board.has_value());
  auto named = options(8, op_kind::allreduce, "ring", 64u << 20);
  named.ranks_per_host = 8;
  EXPECT_EQ(sim::run(named).runtime_algorithm, "") << "an engine algorithm named: a job runs it too";
}

// One rank dies mid-allreduce: every other rank fails naming it, no later
// than the grace period after the death (plus the ABORT's trip), and the
// survivors, as a new world, allreduce correctly.
TEST(Simulator, AKilledRankIsNamedByEverySurvivorThenTheSurvivorsRunCorrectly) {
  auto o = options(64, op_kind::allreduce, "ring", 64u << 20);
  auto healthy = sim::run(o);
  expect_correct(healthy);
  o.kills = {{17, healthy.seconds / 2}};
  o.shrink = true;
  auto r = sim::run(o);
  const double bound = o.kills[0].at + std::chrono::duration<double>(loss_grace).count() + 10 * o.net.alpha;
  for (int i = 0; i < o.ranks; ++i) {
    if (i == 17)
      continue;
    const auto& x = r.outcomes[static_cast<std::size_t>(i)];
    EXPECT_FALSE(x.ok) << "rank " << i << " finished although rank 17 died";
    EXPECT_TRUE(sim::names_rank(x.error, 17)) << "rank " << i << ": " << x.error;
    EXPECT_GE(x.ended_at, o.kills[0].at) << "rank " << i;
    EXPECT_LE(x.ended_at, bound) << "rank " << i << ": " << x.error;
  }
  ASSERT_NE(r.after_shrink, nullptr);
  EXPECT_EQ(r.after_shrink->outcomes.size(), 63u);
  expect_correct(*r.after_shrink);
}

// The elastic round (kill 3, shrink, grow 3, check) at 512 ranks: three
// ranks die at three times during an allreduce; every survivor fails
// naming one of them; the 509 survivors shrink into a world in their old
// order and allreduce correctly; three newcomers grow it back to 512 after
// them, rank 0's broadcast gives them the state, and the grown world
// allreduces correctly. 512 ranks take 7 to 13 s on two cores (each world
// of p engines costs ~p^2 channels); 1024 ranks run the same with mccl-sim
// (docs/performance.md, "Faults at scale").
TEST(Simulator, ThreeKilledThenShrinkThenGrowByThree) {
  const int ranks = 512;
  auto o = options(ranks, op_kind::allreduce, "", 64u << 10);
  // Recursive doubling (the table's choice) takes log2(512) = 9 steps of
  // at least α each: deaths at 1, 2 and 3 α land in its first steps, while
  // every rank still needs the dead ranks' parts.
  const std::vector<int> victims = {3, 200, 488};
  for (std::size_t k = 0; k < victims.size(); ++k)
    o.kills.push_back({victims[k], o.net.alpha * static_cast<double>(k + 1)});
  o.shrink = true;
  o.grow = 3;
  auto r = sim::run(o);

  EXPECT_EQ(r.algorithm, "rd");
  ASSERT_EQ(r.outcomes.size(), static_cast<std::size_t>(ranks));
  // The grace period after the last death, plus the ABORT's trip: the rank
  // that aborts sends one ABORT frame (header and reason, under 512 bytes)
  // to each of the 511 others through its one port.
  const double abort_fan_out = ranks * 512.0 / o.net.bytes_per_s;
  const double bound = o.kills.back().at + std::chrono::duration<double>(loss_grace).count() + 10 * o.net.alpha
                       + abort_fan_out;
  for (int i = 0; i < ranks; ++i) {
    const auto& x = r.outcomes[static_cast<std::size_t>(i)];
    bool victim = std::find(victims.begin(), victims.end(), i) != victims.end();
    EXPECT_EQ(x.killed, victim) << "rank " << i;
    if (victim)
      continue;
    EXPECT_FALSE(x.ok) << "rank " << i << " finished although three ranks died during its op";
    bool named = std::any_of(victims.begin(), victims.end(), [&](int v) { return sim::names_rank(x.error, v); });
    EXPECT_TRUE(named) << "rank " << i << ": " << x.error;
    EXPECT_GE(x.ended_at, o.kills.front().at) << "rank " << i;
    EXPECT_LE(x.ended_at, bound) << "rank " << i << ": " << x.error;
  }
  EXPECT_TRUE(sim::survivors_named_a_dead_rank(o, r));

  // Shrink: the survivors in their old order.
  ASSERT_NE(r.after_shrink, nullptr);
  ASSERT_EQ(r.after_shrink->outcomes.size(), static_cast<std::size_t>(ranks - 3));
  ASSERT_EQ(r.after_shrink->origin.size(), static_cast<std::size_t>(ranks - 3));
  for (std::size_t n = 0; n < r.after_shrink->origin.size(); ++n) {
    int old = r.after_shrink->origin[n];
    EXPECT_EQ(std::find(victims.begin(), victims.end(), old), victims.end()) << "new rank " << n << " is dead rank " << old;
    if (n > 0) {
      EXPECT_LT(r.after_shrink->origin[n - 1], old) << "new rank " << n;
    }
  }
  expect_correct(*r.after_shrink);

  // Grow: old ranks keep theirs, the newcomers come after, get the state
  // from rank 0 and take part in the op.
  ASSERT_NE(r.after_grow, nullptr);
  ASSERT_EQ(r.after_grow->outcomes.size(), static_cast<std::size_t>(ranks));
  ASSERT_EQ(r.after_grow->origin.size(), static_cast<std::size_t>(ranks));
  for (int n = 0; n < ranks; ++n)
    EXPECT_EQ(r.after_grow->origin[static_cast<std::size_t>(n)], n < ranks - 3 ? n : -1) << "rank " << n;
  ASSERT_NE(r.after_grow->state_broadcast, nullptr);
  expect_correct(*r.after_grow->state_broadcast);
  EXPECT_EQ(r.after_grow->state_broadcast->count, r.after_grow->count);
  expect_correct(*r.after_grow);
}

// A death after every op ended still removes the rank from the next world.
TEST(Simulator, ADeathAfterTheOpEndedStillShrinksTheWorld) {
  auto o = options(8, op_kind::allreduce, "ring", 64u << 10);
  auto healthy = sim::run(o);
  expect_correct(healthy);
  o.kills = {{5, healthy.seconds * 2}};
  o.shrink = true;
  auto r = sim::run(o);
  expect_correct(r); // every rank, the victim included, finished first
  EXPECT_TRUE(r.outcomes[5].killed);
  ASSERT_NE(r.after_shrink, nullptr);
  EXPECT_EQ(r.after_shrink->origin, (std::vector<int>{0, 1, 2, 3, 4, 6, 7}));
  expect_correct(*r.after_shrink);
}

// A survivor's error names "rank 51", not "rank 517".
TEST(Simulator, NamesRankMatchesWholeRankNumbers) {
  EXPECT_TRUE(sim::names_rank("rank 517 aborted", 517));
  EXPECT_TRUE(sim::names_rank("lost the connection to rank 51", 51));
  EXPECT_FALSE(sim::names_rank("rank 517 aborted", 51));
  EXPECT_FALSE(sim::names_rank("ranks 5 and 6", 5));
}

TEST(Simulator, NonsenseIsRefusedNamingTheOption) {
  EXPECT_THROW(sim::run(options(0, op_kind::allreduce, "ring", 64)), std::invalid_argument);
  EXPECT_THROW(sim::run(options(3, op_kind::allgather, "ring", 16)), std::invalid_argument); // 4 floats into 3 blocks
  auto o = options(4, op_kind::allreduce, "ring", 64);
  o.kills = {{4, 0}};
  EXPECT_THROW(sim::run(o), std::invalid_argument);
  o.kills = {{1, 0}, {1, 1e-3}}; // the same rank twice
  EXPECT_THROW(sim::run(o), std::invalid_argument);
  o.kills = {{1, 0}};
  o.grow = 3; // grow without shrink
  EXPECT_THROW(sim::run(o), std::invalid_argument);
  o.kills.clear();
  o.grow = 0;
  o.shrink = true; // shrink without a death
  EXPECT_THROW(sim::run(o), std::invalid_argument);
  EXPECT_THROW(sim::parse_op("allreduc"), std::invalid_argument);
  EXPECT_THROW(sim::run(options(4, op_kind::allreduce, "no_such", 64)), mccl::error);
}

} // namespace
