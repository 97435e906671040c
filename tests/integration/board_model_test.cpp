// mccl-sim's model of a host's memory and board (tools/mccl_sim/board_model.hpp):
// the memory curve interpolates what bench/memory_bandwidth.cpp measured and
// refuses a curve it cannot read; the board's schedule moves the bytes its
// rules count (every rank's copies, in place as mccl-bench runs); the ranks
// that copy at once share the memory, so a saturated host takes longer with
// more ranks and one that scales does not; an op whose buffers fit the
// cores' caches moves its own bytes there; copies between cores overlap a
// rank's own traffic; a flag round is paid per board op.

#include "tools/mccl_sim/board_model.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

using namespace mccl;
using mccl::sim::board_model;
using mccl::sim::memory_curve;

namespace {

constexpr double n = 64.0 * (1 << 20); // 64 MiB

op_request op_of(op_kind kind, std::size_t count) {
  op_request op;
  op.kind = kind;
  op.type = dtype::float32;
  op.op = redop::sum;
  op.count = count;
  return op;
}

/// A 64 MiB op as mccl-sim sizes it: allgather's output, reduce_scatter's
/// input, split into blocks.
sim::board_estimate estimate(op_kind kind, int world, const std::string& algorithm, const board_model& m = {}) {
  auto count = static_cast<std::size_t>(n) / 4;
  bool blocks = kind == op_kind::allgather || kind == op_kind::reduce_scatter;
  return sim::estimate_board(op_of(kind, blocks ? count / static_cast<std::size_t>(world) : count), world,
                             algorithm, m);
}

TEST(MemoryCurve, InterpolatesBetweenItsPoints) {
  memory_curve c({{1, 10e9}, {16, 100e9}, {32, 120e9}});
  EXPECT_DOUBLE_EQ(c.rate(1), 10e9);
  EXPECT_DOUBLE_EQ(c.rate(24), 110e9);
  EXPECT_DOUBLE_EQ(c.rate(64), 120e9) << "past the last point: its rate";
  EXPECT_DOUBLE_EQ(memory_curve({{4, 40e9}}).rate(2), 20e9) << "below the first point: its rate per rank";
  EXPECT_EQ(memory_curve::parse("--host-memory", c.to_string()).to_string(), c.to_string());
}

TEST(MemoryCurve, RefusesWhatItCannotRead) {
  for (const char* bad : {"", "16", "16:", "0:10", "16:0", "16:10,8:20", "16:10x", "a:10"}) {
    try {
      memory_curve::parse("--host-memory", bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--host-memory"), std::string::npos) << e.what();
    }
  }
}

TEST(BoardModel, MovesTheBytesItsRulesCount) {
  const int p = 32;
  auto bcast = estimate(op_kind::broadcast, p, "board_stage");
  EXPECT_EQ(bcast.board_ops, 64u);
  EXPECT_DOUBLE_EQ(bcast.memory_bytes, 2 * p * n) << "the root stages, every other rank writes a fresh output";
  EXPECT_DOUBLE_EQ(bcast.peer_bytes, (p - 1) * n);
  EXPECT_DOUBLE_EQ(bcast.cache_bytes, 0) << "64 MiB buffers do not fit a core's caches";
  auto gather = estimate(op_kind::allgather, p, "board_stage");
  EXPECT_DOUBLE_EQ(gather.memory_bytes, 2 * p * n);
  EXPECT_DOUBLE_EQ(gather.peer_bytes, (p - 1) * n);
  auto scatter = estimate(op_kind::reduce_scatter, p, "board_stage");
  EXPECT_DOUBLE_EQ(scatter.memory_bytes, (2 * p + 1) * n) << "in place: the output overwrites what was read";
  EXPECT_DOUBLE_EQ(scatter.peer_bytes, p * n);
  auto sum = estimate(op_kind::allreduce, p, "board_rs");
  EXPECT_EQ(sum.board_ops, 65u);
  EXPECT_DOUBLE_EQ(sum.memory_bytes, (3 * p + 1) * n);
  EXPECT_DOUBLE_EQ(sum.peer_bytes, 2 * p * n);
  auto reduce = estimate(op_kind::reduce, p, "board_rs");
  EXPECT_DOUBLE_EQ(reduce.memory_bytes, (2 * p + 2) * n) << "only the root gathers";
  board_model apart;
  apart.in_place = false;
  EXPECT_DOUBLE_EQ(estimate(op_kind::allreduce, p, "board_rs", apart).memory_bytes, (4 * p + 1) * n)
    << "a fresh output is read before it is written";
  EXPECT_DOUBLE_EQ(estimate(op_kind::broadcast, p, "board_stage", apart).memory_bytes, (2 * p + 3) * n)
    << "the root copies its input into its output as well";
}

TEST(BoardModel, RanksShareTheMemory) {
  board_model scales, saturated; // the memory alone: no flag rounds, copies between cores without limit
  scales.memory = memory_curve({{1, 10e9}, {64, 640e9}});
  saturated.memory = memory_curve({{1, 10e9}, {2, 20e9}});
  for (auto* m : {&scales, &saturated}) {
    m->peer = memory_curve({{1, 1e15}});
    m->round_s_per_rank = 0;
  }
  for (auto kind : {op_kind::broadcast, op_kind::allgather, op_kind::reduce_scatter}) {
    auto ratio = [&](const board_model& m) {
      return estimate(kind, 64, "board_stage", m).seconds / estimate(kind, 32, "board_stage", m).seconds;
    };
    EXPECT_NEAR(ratio(scales), 1.0, 0.1) << to_string(kind);
    EXPECT_NEAR(ratio(saturated), 2.0, 0.15) << to_string(kind);
  }
  // Each rank moves 2n through the memory (its block in, the others' out),
  // at 10 GB/s when the memory scales.
  EXPECT_NEAR(estimate(op_kind::allgather, 8, "board_stage", scales).seconds, 2 * n / 10e9, 2 * n / 10e9 * 0.01);
}

TEST(BoardModel, AnOpThatFitsTheCachesMovesItsOwnBytesThere) {
  board_model m; // a slow memory, fast caches
  m.memory = memory_curve({{1, 1e9}});
  m.cache = memory_curve({{1, 100e9}});
  m.round_s_per_rank = 0;
  auto mib = sim::estimate_board(op_of(op_kind::broadcast, (1 << 20) / 4), 16, "board_stage", m);
  EXPECT_DOUBLE_EQ(mib.memory_bytes, 0);
  EXPECT_DOUBLE_EQ(mib.cache_bytes, 2 * 16 * double(1 << 20)) << "the root stages, every other rank writes";
  m.cache_bytes_per_rank = 2u << 20; // less than its buffer and the two banks
  auto spilled = sim::estimate_board(op_of(op_kind::broadcast, (1 << 20) / 4), 16, "board_stage", m);
  EXPECT_DOUBLE_EQ(spilled.cache_bytes, 0);
  EXPECT_DOUBLE_EQ(spilled.memory_bytes, mib.cache_bytes);
  EXPECT_GT(spilled.seconds, 50 * mib.seconds);
}

TEST(BoardModel, CopiesBetweenCoresOverlapTheOwnTraffic) {
  // An allgather's rank writes twice the bytes it reads from the peers'
  // banks: at equal rates its own traffic alone sets the time; copies
  // between cores ten times slower set it instead.
  board_model m;
  m.memory = memory_curve({{1, 10e9}, {64, 640e9}});
  m.round_s_per_rank = 0;
  auto time_with_peer = [&](double per_rank) {
    m.peer = memory_curve({{1, per_rank}, {64, 64 * per_rank}});
    return estimate(op_kind::allgather, 8, "board_stage", m).seconds;
  };
  double unlimited = time_with_peer(1e15);
  EXPECT_NEAR(time_with_peer(10e9), unlimited, unlimited * 1e-9);
  double slow = time_with_peer(1e9);
  EXPECT_NEAR(slow, 7 * n / 8 / 1e9, 7 * n / 8 / 1e9 * 0.05) << "each rank reads 7 blocks of n/8 at 1 GB/s";
}

TEST(BoardModel, PaysAFlagRoundPerBoardOp) {
  board_model m;
  m.round_s_per_rank = 1e-6;
  auto barrier = sim::estimate_board(op_of(op_kind::barrier, 0), 16, "board", m);
  EXPECT_EQ(barrier.board_ops, 1u);
  EXPECT_DOUBLE_EQ(barrier.seconds, 16e-6);
  auto with = estimate(op_kind::broadcast, 16, "board_stage", m).seconds;
  m.round_s_per_rank = 0;
  EXPECT_NEAR(with - estimate(op_kind::broadcast, 16, "board_stage", m).seconds, 64 * 16e-6, 1e-9);
}

TEST(BoardModel, RefusesWhatTheBoardDoesNotRun) {
  EXPECT_THROW(estimate(op_kind::broadcast, 8, "board_rs"), std::invalid_argument);
  EXPECT_THROW(estimate(op_kind::allreduce, 8, "board_stage"), std::invalid_argument);
  EXPECT_THROW(estimate(op_kind::allreduce, 8, "ring"), std::invalid_argument);
  EXPECT_THROW(estimate(op_kind::allreduce, 1, "board_rs"), std::invalid_argument);
}

} // namespace
