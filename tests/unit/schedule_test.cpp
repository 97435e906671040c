#include <mccl/schedule.hpp>

#include <cstdint>
#include <queue>
#include <vector>

#include <gtest/gtest.h>

#include <mccl/error.hpp>
#include "contributions.hpp"

using namespace mccl::sched;

namespace {

using namespace sim;

} // namespace

TEST(schedule, ring_allreduce_simulated_for_every_world_and_rank) {
  for (int w = 1; w <= max_world; ++w) {
    std::vector<std::vector<ring_step>> plan(w);
    for (int r = 0; r < w; ++r) {
      plan[r] = ring_allreduce_schedule(r, w);
      ASSERT_EQ(plan[r].size(), static_cast<std::size_t>(2 * (w - 1))) << "w=" << w;
    }
    // held[r][b]: whose contributions rank r's copy of block b contains.
    std::vector<std::vector<contributions>> held(w, std::vector<contributions>(w));
    for (int r = 0; r < w; ++r)
      for (int b = 0; b < w; ++b)
        held[r][b] = contributions{1} << r;

    for (int s = 0; s < 2 * (w - 1); ++s) {
      // Every message of a step is taken from the state before the step.
      auto before = held;
      for (int r = 0; r < w; ++r) {
        const auto& st = plan[r][s];
        ASSERT_EQ(st.step, s);
        ASSERT_EQ(st.reduce, s < w - 1);
        ASSERT_EQ(st.send_to, (r + 1) % w);
        ASSERT_EQ(st.recv_from, (r + w - 1) % w);
        // The sender's send matches this rank's receive, block and kind.
        const auto& peer = plan[st.recv_from][s];
        ASSERT_EQ(peer.send_to, r) << "w=" << w << " s=" << s << " r=" << r;
        ASSERT_EQ(peer.send_block, st.recv_block) << "w=" << w << " s=" << s << " r=" << r;
        ASSERT_EQ(peer.reduce, st.reduce);
        ASSERT_GE(st.recv_block, 0);
        ASSERT_LT(st.recv_block, w);
        contributions incoming = before[st.recv_from][st.recv_block];
        if (st.reduce) {
          // A reduction must never count a contribution twice.
          ASSERT_EQ(incoming & before[r][st.recv_block], 0u)
            << "w=" << w << " s=" << s << " r=" << r;
          held[r][st.recv_block] = before[r][st.recv_block] | incoming;
        } else {
          ASSERT_EQ(incoming, everyone(w)) << "allgather forwards a partial block";
          held[r][st.recv_block] = incoming;
        }
      }
      if (s == w - 2) {
        for (int r = 0; r < w; ++r)
          ASSERT_EQ(held[r][(r + 1) % w], everyone(w))
            << "after reduce-scatter w=" << w << " r=" << r;
      }
    }
    for (int r = 0; r < w; ++r)
      for (int b = 0; b < w; ++b)
        ASSERT_EQ(held[r][b], everyone(w)) << "w=" << w << " r=" << r << " block " << b;
  }
}

TEST(schedule, block_range_is_exact_and_balanced) {
  for (std::size_t count : {0ul, 1ul, 7ul, 63ul, 64ul, 65ul, 262147ul})
    for (int parts = 1; parts <= max_world; ++parts) {
      std::size_t next = 0;
      for (int i = 0; i < parts; ++i) {
        auto b = block_range(count, parts, i);
        ASSERT_EQ(b.begin, next) << count << "/" << parts << " block " << i;
        std::size_t want = count / parts + (static_cast<std::size_t>(i) < count % parts ? 1 : 0);
        ASSERT_EQ(b.count, want) << count << "/" << parts << " block " << i;
        next += b.count;
      }
      ASSERT_EQ(next, count);
    }
}

TEST(schedule, chunks_cover_a_block_exactly) {
  EXPECT_EQ(chunk_count(0, 5), 0u);
  EXPECT_EQ(chunk_count(5, 5), 1u);
  EXPECT_EQ(chunk_count(6, 5), 2u);
  EXPECT_EQ(chunk_count(~std::size_t{0}, 2), ~std::size_t{0} / 2 + 1);
  for (std::size_t count : {0ul, 1ul, 7ul, 64ul, 65ul, 1000ul})
    for (std::size_t ce : {1ul, 2ul, 7ul, 64ul, 1000ul, 5000ul}) {
      range block{12345, count};
      std::size_t n = chunk_count(count, ce);
      std::size_t next = block.begin;
      for (std::size_t i = 0; i < n; ++i) {
        auto c = chunk_range(block, ce, i);
        ASSERT_EQ(c.begin, next);
        ASSERT_GT(c.count, 0u);
        ASSERT_EQ(c.count, i + 1 < n ? ce : count - (n - 1) * ce);
        next += c.count;
      }
      ASSERT_EQ(next, block.begin + count) << count << " by " << ce;
      EXPECT_THROW(chunk_range(block, ce, n), mccl::error);
    }
}

TEST(schedule, binomial_tree_for_every_world_and_root) {
  for (int w = 1; w <= max_world; ++w)
    for (int root = 0; root < w; ++root) {
      std::vector<tree_node> t(w);
      for (int r = 0; r < w; ++r)
        t[r] = binomial_tree(r, w, root);
      ASSERT_EQ(t[root].parent, -1);
      for (int r = 0; r < w; ++r) {
        if (r == root)
          continue;
        int p = t[r].parent;
        ASSERT_GE(p, 0);
        ASSERT_LT(p, w);
        int listed = 0;
        for (int c : t[p].children)
          listed += c == r;
        ASSERT_EQ(listed, 1) << "w=" << w << " root=" << root << " r=" << r;
      }
      for (int r = 0; r < w; ++r)
        for (int c : t[r].children)
          ASSERT_EQ(t[c].parent, r);
      // BFS from root: every rank once, depth bounded.
      std::vector<int> depth(w, -1);
      std::queue<int> q;
      depth[root] = 0;
      q.push(root);
      int reached = 0;
      int deepest = 0;
      std::vector<int> subtree(w, 1);
      std::vector<int> order;
      while (!q.empty()) {
        int r = q.front();
        q.pop();
        order.push_back(r);
        ++reached;
        deepest = std::max(deepest, depth[r]);
        for (int c : t[r].children) {
          ASSERT_EQ(depth[c], -1) << "rank reached twice";
          depth[c] = depth[r] + 1;
          q.push(c);
        }
      }
      ASSERT_EQ(reached, w) << "w=" << w << " root=" << root;
      ASSERT_LE(deepest, ceil_log2(w)) << "w=" << w << " root=" << root;
      // Children are listed largest subtree first.
      for (auto it = order.rbegin(); it != order.rend(); ++it)
        if (t[*it].parent >= 0)
          subtree[t[*it].parent] += subtree[*it];
      for (int r = 0; r < w; ++r)
        for (std::size_t i = 1; i < t[r].children.size(); ++i)
          ASSERT_GE(subtree[t[r].children[i - 1]], subtree[t[r].children[i]]);
    }
}

TEST(schedule, broadcast_chain_covers_every_rank_once) {
  for (int w = 1; w <= max_world; ++w)
    for (int root = 0; root < w; ++root) {
      std::vector<chain_node> c(w);
      for (int r = 0; r < w; ++r)
        c[r] = broadcast_chain(r, w, root);
      ASSERT_EQ(c[root].prev, -1);
      std::vector<bool> seen(w, false);
      int r = root;
      int hops = 0;
      int last = -1;
      while (r != -1) {
        ASSERT_FALSE(seen[r]) << "cycle at " << r;
        seen[r] = true;
        if (c[r].next != -1) {
          ASSERT_EQ(c[c[r].next].prev, r);
        }
        last = r;
        r = c[r].next;
        ++hops;
      }
      ASSERT_EQ(hops, w);
      ASSERT_EQ(last, (root + w - 1) % w);
    }
}

TEST(schedule, dissemination_barrier_everyone_hears_everyone) {
  for (int w = 1; w <= max_world; ++w) {
    std::vector<std::vector<barrier_round>> plan(w);
    for (int r = 0; r < w; ++r) {
      plan[r] = dissemination_barrier(r, w);
      ASSERT_EQ(plan[r].size(), static_cast<std::size_t>(ceil_log2(w)));
    }
    // heard[r]: ranks whose arrival r knows of, transitively.
    std::vector<contributions> heard(w);
    for (int r = 0; r < w; ++r)
      heard[r] = contributions{1} << r;
    for (std::size_t k = 0; k < plan[0].size(); ++k) {
      auto before = heard;
      for (int r = 0; r < w; ++r) {
        const auto& rd = plan[r][k];
        ASSERT_EQ(rd.send_to, (r + (1 << k)) % w);
        ASSERT_EQ(plan[rd.recv_from][k].send_to, r) << "w=" << w << " round " << k;
        heard[r] |= before[rd.recv_from];
      }
    }
    for (int r = 0; r < w; ++r)
      ASSERT_EQ(heard[r], everyone(w)) << "w=" << w << " r=" << r;
  }
}

TEST(schedule, invalid_arguments_throw) {
  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const mccl::error& e) {
      return e.code();
    }
    return mccl::errc::none;
  };
  using mccl::errc;
  EXPECT_EQ(code_of([] { ring_allreduce_schedule(0, 0); }), errc::invalid_argument);
  EXPECT_EQ(code_of([] { ring_allreduce_schedule(-1, 4); }), errc::invalid_argument);
  EXPECT_EQ(code_of([] { ring_allreduce_schedule(4, 4); }), errc::invalid_argument);
  EXPECT_EQ(code_of([] { binomial_tree(0, 4, 4); }), errc::invalid_argument);
  EXPECT_EQ(code_of([] { binomial_tree(5, 4, 0); }), errc::invalid_argument);
  EXPECT_EQ(code_of([] { binomial_tree(0, -3, 0); }), errc::invalid_argument);
  EXPECT_EQ(code_of([] { broadcast_chain(0, 4, -1); }), errc::invalid_argument);
  EXPECT_EQ(code_of([] { broadcast_chain(0, 0, 0); }), errc::invalid_argument);
  EXPECT_EQ(code_of([] { dissemination_barrier(3, 3); }), errc::invalid_argument);
  EXPECT_EQ(code_of([] { block_range(10, 0, 0); }), errc::invalid_argument);
  EXPECT_EQ(code_of([] { block_range(10, 3, 3); }), errc::invalid_argument);
  EXPECT_EQ(code_of([] { chunk_count(10, 0); }), errc::invalid_argument);
  EXPECT_EQ(code_of([] { chunk_range({0, 10}, 0, 0); }), errc::invalid_argument);

  try {
    binomial_tree(0, 4, 9);
    ADD_FAILURE() << "no throw";
  } catch (const mccl::error& e) {
    EXPECT_NE(e.message().find("root 9"), std::string::npos) << e.what();
  }
  try {
    block_range(10, 0, 0);
    ADD_FAILURE() << "no throw";
  } catch (const mccl::error& e) {
    EXPECT_NE(e.message().find("parts"), std::string::npos) << e.what();
  }
}

TEST(schedule, world_of_one) {
  EXPECT_TRUE(ring_allreduce_schedule(0, 1).empty());
  EXPECT_TRUE(dissemination_barrier(0, 1).empty());
  auto t = binomial_tree(0, 1, 0);
  EXPECT_EQ(t.parent, -1);
  EXPECT_TRUE(t.children.empty());
  auto c = broadcast_chain(0, 1, 0);
  EXPECT_EQ(c.prev, -1);
  EXPECT_EQ(c.next, -1);
}
