// mccl-sim's core (tools/mccl_sim/sim_run.hpp): many ranks of the engine
// over the virtual-time network. The simulated time of each algorithm
// stays within 10 % of the α–β model (Thakur, Rabenseifner and Gropp) for
// a representative subset at 64 ranks, every element of every rank's
// result is right (scaled mode included), a killed rank is named by every
// survivor within the grace period, and the survivors then run correctly.

#include "collectives/engine/engine.hpp"
#include "tools/mccl_sim/sim_run.hpp"

#include <gtest/gtest.h>

#include <string>

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

// The table's choice for the full size, not for what each rank moves.
TEST(Simulator, TheTableChoosesForTheFullSize) {
  auto r = sim::run(options(64, op_kind::allreduce, "", 64u << 20));
  expect_correct(r);
  EXPECT_EQ(r.algorithm, "rabenseifner"); // power of two, above 256 KiB (registry.cpp)
  auto small = sim::run(options(64, op_kind::allreduce, "", 4));
  EXPECT_EQ(small.algorithm, "rd");
}

// One rank dies mid-allreduce: every other rank fails naming it, no later
// than the grace period after the death (plus the ABORT's trip), and the
// survivors, as a new world, allreduce correctly.
TEST(Simulator, AKilledRankIsNamedByEverySurvivorThenTheSurvivorsRunCorrectly) {
  auto o = options(64, op_kind::allreduce, "ring", 64u << 20);
  auto healthy = sim::run(o);
  expect_correct(healthy);
  o.kill_rank = 17;
  o.kill_at = healthy.seconds / 2;
  o.shrink = true;
  auto r = sim::run(o);
  const double bound = o.kill_at + std::chrono::duration<double>(loss_grace).count() + 10 * o.net.alpha;
  for (int i = 0; i < o.ranks; ++i) {
    if (i == 17)
      continue;
    const auto& x = r.outcomes[static_cast<std::size_t>(i)];
    EXPECT_FALSE(x.ok) << "rank " << i << " finished although rank 17 died";
    EXPECT_NE(x.error.find("rank 17"), std::string::npos) << "rank " << i << ": " << x.error;
    EXPECT_GE(x.ended_at, o.kill_at) << "rank " << i;
    EXPECT_LE(x.ended_at, bound) << "rank " << i << ": " << x.error;
  }
  ASSERT_NE(r.after_shrink, nullptr);
  EXPECT_EQ(r.after_shrink->outcomes.size(), 63u);
  expect_correct(*r.after_shrink);
}

TEST(Simulator, NonsenseIsRefusedNamingTheOption) {
  EXPECT_THROW(sim::run(options(0, op_kind::allreduce, "ring", 64)), std::invalid_argument);
  EXPECT_THROW(sim::run(options(3, op_kind::allgather, "ring", 16)), std::invalid_argument); // 4 floats into 3 blocks
  auto o = options(4, op_kind::allreduce, "ring", 64);
  o.kill_rank = 4;
  EXPECT_THROW(sim::run(o), std::invalid_argument);
  EXPECT_THROW(sim::parse_op("allreduc"), std::invalid_argument);
  EXPECT_THROW(sim::run(options(4, op_kind::allreduce, "no_such", 64)), mccl::error);
}

} // namespace
