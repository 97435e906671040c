#include "program_sim.hpp"

using namespace mccl::sched;
using namespace program_sim;

// ---- allreduce ---------------------------------------------------------------

TEST(program, rd_allreduce_for_every_world) {
  for (int w = 1; w <= max_world; ++w) {
    int steps = log2_exact(floor_pow2(w)) + fold_steps(w);
    collective c{w, payload::reduction, steps, all_of(1), all_of(1), fully_reduced(w)};
    ASSERT_TRUE(run([w](int r) { return rd_allreduce(r, w); }, c)) << "w=" << w;
  }
}

TEST(program, rabenseifner_allreduce_for_every_world) {
  for (int w = 1; w <= max_world; ++w) {
    int p = floor_pow2(w);
    int steps = 2 * log2_exact(p) + fold_steps(w);
    collective c{w, payload::reduction, steps, all_of(p), all_of(p), fully_reduced(w)};
    ASSERT_TRUE(run([w](int r) { return rabenseifner_allreduce(r, w); }, c)) << "w=" << w;
    // Halving and doubling move one contiguous range each way per step.
    for (int r = 0; r < p; ++r) {
      auto prog = rabenseifner_allreduce(r, w);
      int first = fold_steps(w) / 2;
      for (int s = first; s < first + 2 * log2_exact(p); ++s)
        ASSERT_EQ(prog.steps[s].xfers.size(), 2u) << "w=" << w << " r=" << r << " s=" << s;
    }
  }
}

// The simulator tracks at most 64 blocks: 2 * world of them here.
constexpr int max_bidir_world = 32;

TEST(program, bidir_ring_allreduce_for_every_world) {
  for (int w = 1; w <= max_bidir_world; ++w) {
    int steps = 2 * (w - 1);
    collective c{w, payload::reduction, steps, all_of(2 * w), all_of(2 * w), fully_reduced(w)};
    ASSERT_TRUE(run([w](int r) { return bidir_ring_allreduce(r, w); }, c)) << "w=" << w;
    // Every step sends one block each way round the ring.
    for (int r = 0; r < w; ++r) {
      auto prog = bidir_ring_allreduce(r, w);
      for (const auto& st : prog.steps) {
        int to_next = 0, to_prev = 0; // even blocks clockwise, odd ones back
        for (const auto& x : st.xfers)
          for (int b = x.first_block; x.kind == xfer_kind::send && b < x.first_block + x.block_count; ++b) {
            to_next += b % 2 == 0 && x.peer == (r + 1) % w;
            to_prev += b % 2 == 1 && x.peer == (r + w - 1) % w;
          }
        EXPECT_EQ(to_next, 1) << "w=" << w << " r=" << r;
        EXPECT_EQ(to_prev, 1) << "w=" << w << " r=" << r;
      }
    }
  }
}

// ---- allgather -------------------------------------------------------------------

namespace {

collective allgather(int w, int steps) {
  return {w, payload::data, steps, own_block(), all_of(w),
          [](int, int b) { return only(b); }};
}

} // namespace

TEST(program, ring_allgather_for_every_world) {
  for (int w = 1; w <= max_world; ++w) {
    ASSERT_TRUE(run([w](int r) { return ring_allgather(r, w); }, allgather(w, w - 1)))
      << "w=" << w;
    // The documented block schedule.
    for (int r = 0; r < w; ++r) {
      auto prog = ring_allgather(r, w);
      for (int s = 0; s < w - 1; ++s) {
        const auto& xs = prog.steps[s].xfers;
        ASSERT_EQ(xs.size(), 2u);
        EXPECT_EQ(xs[0].kind, xfer_kind::send);
        EXPECT_EQ(xs[0].peer, (r + 1) % w);
        EXPECT_EQ(xs[0].first_block, ((r - s) % w + w) % w);
        EXPECT_EQ(xs[1].kind, xfer_kind::recv_copy);
        EXPECT_EQ(xs[1].peer, (r + w - 1) % w);
        EXPECT_EQ(xs[1].first_block, ((r - s - 1) % w + w) % w);
      }
    }
  }
}

TEST(program, bidir_ring_allgather_for_every_world) {
  for (int w = 1; w <= max_bidir_world; ++w) {
    // Rank b's data is blocks 2b and 2b + 1.
    collective c{w, payload::data, w - 1,
                 [](int r) { return std::vector<int>{2 * r, 2 * r + 1}; }, all_of(2 * w),
                 [](int, int b) { return only(b / 2); }};
    ASSERT_TRUE(run([w](int r) { return bidir_ring_allgather(r, w); }, c)) << "w=" << w;
    for (int r = 0; r < w; ++r)
      for (const auto& st : bidir_ring_allgather(r, w).steps)
        ASSERT_EQ(st.xfers.size(), w == 2 ? 2u : 4u) << "w=" << w << " r=" << r;
  }
}

TEST(program, rd_allgather_for_every_world) {
  for (int w = 1; w <= max_world; ++w) {
    int steps = log2_exact(floor_pow2(w)) + fold_steps(w);
    ASSERT_LE(steps, ceil_log2(w) + 2);
    ASSERT_TRUE(run([w](int r) { return rd_allgather(r, w); }, allgather(w, steps)))
      << "w=" << w;
    // A core rank's holdings are its group's blocks plus their extras' ones:
    // at most two ranges each way.
    for (int r = 0; r < w; ++r) {
      auto prog = rd_allgather(r, w);
      for (const auto& st : prog.steps)
        ASSERT_LE(st.xfers.size(), 4u) << "w=" << w << " r=" << r;
    }
  }
}

// ---- reduce-scatter -------------------------------------------------------------

TEST(program, ring_reduce_scatter_for_every_world) {
  for (int w = 1; w <= max_world; ++w) {
    collective c{w, payload::reduction, w - 1, all_of(w), own_block(), fully_reduced(w)};
    ASSERT_TRUE(run([w](int r) { return ring_reduce_scatter(r, w); }, c)) << "w=" << w;
  }
}

TEST(program, rd_reduce_scatter_for_every_world) {
  for (int w = 1; w <= max_world; ++w) {
    int steps = log2_exact(floor_pow2(w)) + fold_steps(w);
    collective c{w, payload::reduction, steps, all_of(w), own_block(), fully_reduced(w)};
    ASSERT_TRUE(run([w](int r) { return rd_reduce_scatter(r, w); }, c)) << "w=" << w;
    // The whole vector travels as one transfer.
    for (int r = 0; r < w; ++r)
      for (const auto& st : rd_reduce_scatter(r, w).steps)
        for (const auto& x : st.xfers)
          ASSERT_EQ(x.block_count, w);
  }
}

TEST(program, halving_reduce_scatter_for_every_world) {
  for (int w = 1; w <= max_world; ++w) {
    int steps = log2_exact(floor_pow2(w)) + fold_steps(w);
    collective c{w, payload::reduction, steps, all_of(w), own_block(), fully_reduced(w)};
    ASSERT_TRUE(run([w](int r) { return halving_reduce_scatter(r, w); }, c)) << "w=" << w;
    // A core rank sends half of what it holds each step: its group's blocks
    // and their extras', at most two ranges; the whole vector only to fold.
    for (int r = 0; r < w; ++r) {
      auto prog = halving_reduce_scatter(r, w);
      for (const auto& st : prog.steps)
        ASSERT_LE(st.xfers.size(), 4u) << "w=" << w << " r=" << r;
    }
  }
}

// ---- broadcast / reduce -----------------------------------------------------------

TEST(program, scatter_allgather_broadcast_for_every_world_and_root) {
  for (int w = 1; w <= max_world; ++w)
    for (int root = 0; root < w; ++root) {
      collective c{w,
                   payload::data,
                   ceil_log2(w) + w - 1,
                   at_root(root, w),
                   all_of(w),
                   [root](int, int) { return only(root); }};
      ASSERT_TRUE(run([w, root](int r) { return scatter_allgather_broadcast(r, w, root); }, c))
        << "w=" << w << " root=" << root;
      // The scatter hands each rank exactly its subtree: a contiguous range
      // of root-relative ranks is at most two block ranges.
      for (int r = 0; r < w; ++r) {
        auto prog = scatter_allgather_broadcast(r, w, root);
        for (int s = 0; s < ceil_log2(w); ++s) {
          int recv = 0;
          for (const auto& x : prog.steps[s].xfers)
            recv += x.kind != xfer_kind::send;
          ASSERT_LE(recv, 2) << "w=" << w << " root=" << root << " r=" << r;
        }
      }
    }
}

TEST(program, tree_reduce_for_every_world_and_root) {
  for (int w = 1; w <= max_world; ++w)
    for (int root = 0; root < w; ++root) {
      collective c{w,
                   payload::reduction,
                   ceil_log2(w),
                   all_of(1),
                   at_root(root, 1),
                   fully_reduced(w)};
      ASSERT_TRUE(run([w, root](int r) { return tree_reduce(r, w, root); }, c))
        << "w=" << w << " root=" << root;
    }
}

TEST(program, ring_reduce_for_every_world_and_root) {
  for (int w = 1; w <= max_world; ++w)
    for (int root = 0; root < w; ++root) {
      collective c{w,
                   payload::reduction,
                   w == 1 ? 0 : w,
                   all_of(w),
                   at_root(root, w),
                   fully_reduced(w)};
      ASSERT_TRUE(run([w, root](int r) { return ring_reduce(r, w, root); }, c))
        << "w=" << w << " root=" << root;
      // The root receives the reduced blocks in rank order.
      if (w > 1) {
        program at = ring_reduce(root, w, root);
        const auto& last = at.steps.back().xfers;
        ASSERT_EQ(last.size(), static_cast<std::size_t>(w - 1));
        for (std::size_t i = 1; i < last.size(); ++i)
          ASSERT_LT(last[i - 1].peer, last[i].peer);
      }
    }
}

// ---- the simulator itself rejects broken programs ---------------------------------

namespace {

program hand_written(std::vector<std::vector<xfer>> steps, int blocks = 1) {
  program p;
  p.blocks = blocks;
  p.initial_blocks = all_blocks(blocks);
  p.result_blocks = all_blocks(blocks);
  for (auto& xs : steps)
    p.steps.push_back({std::move(xs)});
  return p;
}

} // namespace

TEST(program, simulator_rejects_broken_programs) {
  world_state state;
  auto S = xfer_kind::send;
  auto C = xfer_kind::recv_copy;
  auto R = xfer_kind::recv_reduce;
  // A correct exchange passes.
  EXPECT_TRUE(simulate({hand_written({{{S, 1, 0, 1}, {R, 1, 0, 1}}}),
                        hand_written({{{S, 0, 0, 1}, {R, 0, 0, 1}}})},
                       payload::reduction, state));
  // Reducing the same contribution twice.
  EXPECT_FALSE(simulate({hand_written({{{S, 1, 0, 1}}, {{R, 1, 0, 1}}}),
                         hand_written({{{R, 0, 0, 1}}, {{S, 0, 0, 1}}})},
                        payload::reduction, state));
  // Receive at the wrong step.
  EXPECT_FALSE(simulate({hand_written({{{S, 1, 0, 1}}, {}}), hand_written({{}, {{C, 0, 0, 1}}})},
                        payload::reduction, state));
  // Mismatched block range.
  EXPECT_FALSE(simulate({hand_written({{{S, 1, 0, 1}}}, 2), hand_written({{{C, 0, 1, 1}}}, 2)},
                        payload::reduction, state));
  // Unmerged adjacent ranges.
  EXPECT_FALSE(simulate({hand_written({{{S, 1, 0, 1}, {S, 1, 1, 1}}}, 2),
                         hand_written({{{C, 0, 0, 1}, {C, 0, 1, 1}}}, 2)},
                        payload::reduction, state));
  // Sending a block that holds nothing.
  program empty = hand_written({{{S, 1, 0, 1}}});
  empty.initial_blocks.clear();
  EXPECT_FALSE(simulate({empty, hand_written({{{C, 0, 0, 1}}})}, payload::reduction, state));
  // Self transfer.
  EXPECT_FALSE(simulate({hand_written({{{S, 0, 0, 1}, {C, 0, 0, 1}}}), hand_written({{}})},
                        payload::reduction, state));
  // Reduction in a data-movement program.
  EXPECT_FALSE(simulate({hand_written({{{S, 1, 0, 1}}}), hand_written({{{R, 0, 0, 1}}})},
                        payload::data, state));
}

// ---- arguments, describe, validate ---------------------------------------------------

TEST(program, bad_arguments_throw) {
  using unrooted = program (*)(int, int);
  using rooted = program (*)(int, int, int);
  auto is_invalid_argument = [](auto&& call, const char* fn) {
    try {
      call();
    } catch (const mccl::error& e) {
      EXPECT_EQ(e.code(), mccl::errc::invalid_argument);
      EXPECT_NE(e.message().find(fn), std::string::npos) << e.message();
      return;
    }
    ADD_FAILURE() << fn << " did not throw";
  };
  struct named_unrooted {
    unrooted f;
    const char* name;
  };
  for (auto [f, name] : {named_unrooted{rd_allreduce, "rd_allreduce"},
                         named_unrooted{rabenseifner_allreduce, "rabenseifner_allreduce"},
                         named_unrooted{ring_allgather, "ring_allgather"},
                         named_unrooted{bidir_ring_allreduce, "bidir_ring_allreduce"},
                         named_unrooted{bidir_ring_allgather, "bidir_ring_allgather"},
                         named_unrooted{rd_allgather, "rd_allgather"},
                         named_unrooted{ring_reduce_scatter, "ring_reduce_scatter"},
                         named_unrooted{rd_reduce_scatter, "rd_reduce_scatter"},
                         named_unrooted{halving_reduce_scatter, "halving_reduce_scatter"}}) {
    is_invalid_argument([f = f] { f(0, 0); }, name);
    is_invalid_argument([f = f] { f(0, -3); }, name);
    is_invalid_argument([f = f] { f(-1, 4); }, name);
    is_invalid_argument([f = f] { f(4, 4); }, name);
  }
  struct named_rooted {
    rooted f;
    const char* name;
  };
  for (auto [f, name] : {named_rooted{scatter_allgather_broadcast, "scatter_allgather_broadcast"},
                         named_rooted{tree_reduce, "tree_reduce"},
                         named_rooted{ring_reduce, "ring_reduce"}}) {
    is_invalid_argument([f = f] { f(0, 0, 0); }, name);
    is_invalid_argument([f = f] { f(-1, 4, 0); }, name);
    is_invalid_argument([f = f] { f(4, 4, 0); }, name);
    is_invalid_argument([f = f] { f(0, 4, -1); }, name);
    is_invalid_argument([f = f] { f(0, 4, 4); }, name);
  }
}

TEST(program, world_of_one_has_no_steps) {
  for (auto p : {rd_allreduce(0, 1), rabenseifner_allreduce(0, 1), ring_allgather(0, 1),
                 rd_allgather(0, 1), ring_reduce_scatter(0, 1), rd_reduce_scatter(0, 1),
                 halving_reduce_scatter(0, 1),
                 scatter_allgather_broadcast(0, 1, 0), tree_reduce(0, 1, 0), ring_reduce(0, 1, 0)}) {
    EXPECT_TRUE(p.steps.empty());
    EXPECT_EQ(p.blocks, 1);
    EXPECT_EQ(p.initial_blocks, std::vector<int>{0});
    EXPECT_EQ(p.result_blocks, std::vector<int>{0});
  }
}

TEST(program, describe_counts_steps_blocks_and_transfers) {
  EXPECT_EQ(describe(program{}), "0 steps, 1 blocks, 0 transfers");
  // World 6 folds onto 4: rank 0 reduces rank 4's vector, exchanges twice,
  // returns the result: 4 steps, 1 + 2 * 2 + 1 transfers.
  EXPECT_EQ(describe(rd_allreduce(0, 6)), "4 steps, 1 blocks, 6 transfers");
}

TEST(program, validate_rejects_what_one_rank_can_see) {
  program ok = rd_allreduce(1, 4);
  EXPECT_NO_THROW(validate(ok, 1, 4));
  EXPECT_THROW(validate(ok, 4, 4), mccl::error);
  EXPECT_THROW(validate(ok, 0, 0), mccl::error);
  auto bad = ok;
  bad.steps[0].xfers[0].peer = 1; // itself
  EXPECT_THROW(validate(bad, 1, 4), mccl::error);
  bad = ok;
  bad.steps[0].xfers[0].peer = 9;
  EXPECT_THROW(validate(bad, 1, 4), mccl::error);
  bad = ok;
  bad.steps[0].xfers[0].block_count = 2; // past the end
  EXPECT_THROW(validate(bad, 1, 4), mccl::error);
  bad = ok;
  bad.steps[0].xfers[0].block_count = 0;
  EXPECT_THROW(validate(bad, 1, 4), mccl::error);
  bad = ok;
  bad.result_blocks = {1};
  EXPECT_THROW(validate(bad, 1, 4), mccl::error);
  bad = ok;
  bad.blocks = 0;
  EXPECT_THROW(validate(bad, 1, 4), mccl::error);
  bad = ok;
  bad.sends_first_until = -1;
  EXPECT_THROW(validate(bad, 1, 4), mccl::error);
}
