// Compiled step plans (collectives/programs/step_plan.hpp) are shared between ops
// only when everything they are made from is the same: the program, the
// blocks and each transfer's chunking.

#include "collectives/programs/step_plan.hpp"

#include <gtest/gtest.h>

#include <mccl/schedule.hpp>

using namespace mccl;

namespace {

collective_args allreduce_of(std::size_t count, int rank, int world) {
  collective_args a;
  a.rank = rank;
  a.world = world;
  a.op.kind = op_kind::allreduce;
  a.op.count = count;
  return a;
}

std::vector<sched::range> one_block(std::size_t count) {
  return {sched::range{0, count}};
}

} // namespace

TEST(StepPlan, TheSameProgramBlocksAndChunkingShareOnePlan) {
  auto a = allreduce_of(1, 5, 16);
  auto first = compile_step_plan(a, sched::rd_allreduce(5, 16), one_block(1));
  auto again = compile_step_plan(a, sched::rd_allreduce(5, 16), one_block(1));
  EXPECT_EQ(first.get(), again.get());
  ASSERT_EQ(first->items.size(), 8u) << "4 rounds of one send and one receive";
  // Round k's receive waits for round k's send (it overwrites what that
  // send reads) and round k+1's send waits for round k's receive.
  for (const auto& it : first->items)
    EXPECT_EQ(it.peer, 5 ^ (1 << it.step));
  EXPECT_EQ(first->items[0].pending, 0) << "the first send waits for nothing";
  auto dependents = [&](std::size_t i) {
    const auto& it = first->items[i];
    return std::vector<uint32_t>(first->dependents.begin() + it.dependents_begin,
                                 first->dependents.begin() + it.dependents_end);
  };
  for (uint32_t k = 0; k < 4; ++k) {
    auto send = 2 * k, recv = 2 * k + 1;
    ASSERT_TRUE(first->items[send].is_send);
    ASSERT_FALSE(first->items[recv].is_send);
    EXPECT_EQ(first->items[send].pending, k == 0 ? 0 : 1) << "step " << k;
    EXPECT_EQ(first->items[recv].pending, k == 0 ? 1 : 2) << "step " << k;
    EXPECT_EQ(dependents(send), std::vector<uint32_t>{recv}) << "step " << k;
    if (k < 3) {
      EXPECT_EQ(dependents(recv), (std::vector<uint32_t>{recv + 1, recv + 2})) << "step " << k;
    }
  }
  ASSERT_NE(step_plan::find(first->recvs, {3, 5 ^ 8, 0}), nullptr);
  EXPECT_EQ(step_plan::find(first->recvs, {3, 5 ^ 4, 0}), nullptr) << "no such transfer";
}

TEST(StepPlan, AnotherRankCountOrChunkingGetsItsOwnPlan) {
  auto a = allreduce_of(1, 5, 16);
  auto base = compile_step_plan(a, sched::rd_allreduce(5, 16), one_block(1));
  EXPECT_NE(base.get(), compile_step_plan(allreduce_of(1, 6, 16), sched::rd_allreduce(6, 16), one_block(1)).get());
  EXPECT_NE(base.get(), compile_step_plan(allreduce_of(7, 5, 16), sched::rd_allreduce(5, 16), one_block(7)).get());
  // Large enough to be cut into pipelining chunks: the chunk size is part
  // of what makes a plan.
  std::size_t count = std::size_t{16} << 20;
  auto big = allreduce_of(count, 5, 16);
  big.chunk_bytes = 1 << 20;
  auto smaller_chunks = big;
  smaller_chunks.chunk_bytes = 256 << 10;
  auto coarse = compile_step_plan(big, sched::rd_allreduce(5, 16), one_block(count));
  auto fine = compile_step_plan(smaller_chunks, sched::rd_allreduce(5, 16), one_block(count));
  EXPECT_NE(coarse.get(), fine.get());
  EXPECT_LT(coarse->items.size(), fine->items.size());
}
