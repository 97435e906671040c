// The host-aware step programs, run symbolically for every rank of many host
// layouts (even, uneven, interleaved, one host, one rank per host): the
// results are right, the step counts are the documented ones, and only the
// inter-host phase crosses hosts, carrying no more than a ring must.

#include "program_sim.hpp"

#include <map>
#include <random>

using namespace mccl::sched;
using namespace program_sim;

namespace {

struct layout_facts {
  int hosts = 0;
  int stripes = 0; // fewest ranks on a host
  int most = 0;    // most ranks on a host
  int fold = 0;    // steps in which extras fold in
};

layout_facts facts(const std::vector<int>& host_of) {
  std::map<int, int> sizes;
  for (int h : host_of)
    ++sizes[h];
  layout_facts f;
  f.hosts = static_cast<int>(sizes.size());
  f.stripes = static_cast<int>(host_of.size());
  for (auto [h, n] : sizes) {
    f.stripes = std::min(f.stripes, n);
    f.most = std::max(f.most, n);
  }
  f.fold = (f.most + f.stripes - 1) / f.stripes - 1;
  return f;
}

std::string show(const std::vector<int>& host_of) {
  std::string s = "host_of = {";
  for (std::size_t r = 0; r < host_of.size(); ++r)
    s += (r ? "," : "") + std::to_string(host_of[r]);
  return s + "}";
}

/// Layouts of up to 64 ranks: H hosts of L ranks each, ranks in blocks and
/// round-robin; uneven hosts, and random assignments of 2..24 ranks.
std::vector<std::vector<int>> layouts() {
  std::vector<std::vector<int>> out;
  for (int h = 1; h <= 8; ++h)
    for (int l = 1; l <= 8; ++l) {
      std::vector<int> blocked, round_robin;
      for (int r = 0; r < h * l; ++r) {
        blocked.push_back(r / l);
        round_robin.push_back(r % h);
      }
      out.push_back(blocked);
      if (h > 1 && l > 1)
        out.push_back(round_robin);
    }
  out.push_back({0, 0, 0, 1});
  out.push_back({0, 1, 1, 1});
  out.push_back({0, 0, 0, 0, 0, 1, 1});
  out.push_back({0, 0, 1, 1, 1, 1, 1, 2, 2, 2});
  out.push_back({7, 3, 7, 3, 3, 9, 9, 9, 9});
  std::mt19937 gen(20261125);
  for (int i = 0; i < 60; ++i) {
    int world = 2 + static_cast<int>(gen() % 23);
    int hosts = 1 + static_cast<int>(gen() % 5);
    std::vector<int> host_of;
    for (int r = 0; r < world; ++r)
      host_of.push_back(static_cast<int>(gen() % static_cast<unsigned>(hosts)));
    out.push_back(host_of);
  }
  return out;
}

/// Blocks each rank sends to ranks of other hosts, by sending rank.
std::vector<int> crossing_blocks(const std::vector<program>& progs, const std::vector<int>& host_of) {
  std::vector<int> out(progs.size());
  for (std::size_t r = 0; r < progs.size(); ++r)
    for (const auto& st : progs[r].steps)
      for (const auto& x : st.xfers)
        if (x.kind == xfer_kind::send && host_of[static_cast<std::size_t>(x.peer)] != host_of[r])
          out[r] += x.block_count;
  return out;
}

std::vector<program> programs(int world, const make_fn& make) {
  std::vector<program> out;
  for (int r = 0; r < world; ++r)
    out.push_back(make(r));
  return out;
}

} // namespace

TEST(program_hosts, hier_allreduce_for_many_layouts) {
  for (const auto& host_of : layouts()) {
    const int w = static_cast<int>(host_of.size());
    auto f = facts(host_of);
    int blocks = f.stripes * f.hosts;
    int steps = f.fold + 2 * (f.stripes - 1) + 2 * (f.hosts - 1) + (f.fold > 0);
    collective c{w, payload::reduction, steps, all_of(blocks), all_of(blocks), fully_reduced(w)};
    make_fn make = [&](int r) { return hier_allreduce(r, host_of); };
    ASSERT_TRUE(run(make, c)) << show(host_of);
    // A ring across hosts per stripe: each of a host's S core ranks sends
    // 2 (H - 1) blocks of 1 / (S H) of the vector to other hosts, the
    // extras none: 2 (H - 1) / H of the vector leaves each host.
    auto crossing = crossing_blocks(programs(w, make), host_of);
    for (int r = 0; r < w; ++r) {
      int place = 0; // among its host's ranks
      for (int q = 0; q < r; ++q)
        place += host_of[q] == host_of[r];
      bool core = place < f.stripes;
      EXPECT_EQ(crossing[r], core ? 2 * (f.hosts - 1) : 0) << show(host_of) << " rank " << r;
    }
  }
}

TEST(program_hosts, hier_reduce_scatter_for_many_layouts) {
  for (const auto& host_of : layouts()) {
    const int w = static_cast<int>(host_of.size());
    auto f = facts(host_of);
    int steps = f.fold + (f.stripes - 1) + (f.hosts - 1) + (f.fold > 0);
    collective c{w, payload::reduction, steps, all_of(w), own_block(), fully_reduced(w)};
    make_fn make = [&](int r) { return hier_reduce_scatter(r, host_of); };
    ASSERT_TRUE(run(make, c)) << show(host_of);
    // What leaves a host is the other hosts' blocks, once each.
    auto crossing = crossing_blocks(programs(w, make), host_of);
    std::map<int, int> out_of, size_of;
    for (int r = 0; r < w; ++r) {
      out_of[host_of[r]] += crossing[r];
      ++size_of[host_of[r]];
    }
    for (auto [h, n] : out_of)
      EXPECT_EQ(n, w - size_of[h]) << show(host_of) << " host " << h;
  }
}

TEST(program_hosts, hier_allgather_for_many_layouts) {
  for (const auto& host_of : layouts()) {
    const int w = static_cast<int>(host_of.size());
    auto f = facts(host_of);
    int fold = f.fold > 0 ? 1 : 0;
    int steps = 2 * fold + (f.hosts - 1) + (f.stripes - 1);
    collective c{w, payload::data, steps, own_block(), all_of(w),
                 [](int, int b) { return only(b); }};
    make_fn make = [&](int r) { return hier_allgather(r, host_of); };
    ASSERT_TRUE(run(make, c)) << show(host_of);
    // Every block reaches each other host once; with hosts of one size,
    // each host sends as much as it receives.
    auto crossing = crossing_blocks(programs(w, make), host_of);
    int total = 0;
    for (int n : crossing)
      total += n;
    EXPECT_EQ(total, w * (f.hosts - 1)) << show(host_of);
    if (f.stripes == f.most) {
      std::map<int, int> out_of;
      for (int r = 0; r < w; ++r)
        out_of[host_of[r]] += crossing[r];
      for (auto [h, n] : out_of)
        EXPECT_EQ(n, f.stripes * (f.hosts - 1)) << show(host_of) << " host " << h;
    }
  }
}

TEST(program_hosts, hier_broadcast_for_many_layouts_and_roots) {
  for (const auto& host_of : layouts()) {
    const int w = static_cast<int>(host_of.size());
    if (w > 24)
      continue; // every root of the larger layouts adds little
    auto f = facts(host_of);
    int steps = (f.stripes > 1) + (f.hosts - 1) + (f.stripes - 1) + (f.fold > 0);
    for (int root = 0; root < w; ++root) {
      collective c{w, payload::data, steps, at_root(root, f.stripes), all_of(f.stripes),
                   [root](int, int) { return only(root); }};
      make_fn make = [&](int r) { return hier_broadcast(r, host_of, root); };
      ASSERT_TRUE(run(make, c)) << show(host_of) << " root " << root;
      // A chain per stripe: every host but the root's receives the data
      // once, so H - 1 copies cross hosts in all (S blocks each).
      auto crossing = crossing_blocks(programs(w, make), host_of);
      int total = 0;
      for (int n : crossing)
        total += n;
      EXPECT_EQ(total, (f.hosts - 1) * f.stripes) << show(host_of) << " root " << root;
    }
  }
}

TEST(program_hosts, one_host_stays_inside_and_one_rank_per_host_is_a_ring) {
  // One host of 4: no transfer leaves it (nothing to check but the steps:
  // a ring reduce-scatter and allgather).
  std::vector<int> one_host(4, 0);
  EXPECT_EQ(hier_allreduce(0, one_host).steps.size(), 6u);
  // One rank per host: the ring allreduce over H blocks.
  std::vector<int> spread{0, 1, 2, 3};
  auto p = hier_allreduce(1, spread);
  EXPECT_EQ(p.blocks, 4);
  EXPECT_EQ(p.steps.size(), 6u);
  for (const auto& st : p.steps) {
    ASSERT_EQ(st.xfers.size(), 2u);
    EXPECT_EQ(st.xfers[0].peer, 2);
    EXPECT_EQ(st.xfers[1].peer, 0);
  }
}

TEST(program_hosts, hosts_are_numbered_by_their_lowest_rank) {
  EXPECT_EQ(number_hosts({"b", "a", "b", "c", "a"}), (std::vector<int>{0, 1, 0, 2, 1}));
  EXPECT_EQ(number_hosts({}), std::vector<int>{});
  EXPECT_EQ(host_count({3, 3, 9, 1, 9}), 3);
  EXPECT_EQ(host_count({}), 0);
}

TEST(program_hosts, bad_arguments_throw_naming_them) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const mccl::error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { hier_allreduce(0, {}); }).find("world must be >= 1"), std::string::npos);
  EXPECT_NE(message([] { hier_allgather(3, {0, 1}); }).find("rank 3 is outside [0, 2)"),
            std::string::npos);
  EXPECT_NE(message([] { hier_broadcast(0, {0, 1}, 2); }).find("root 2 is outside [0, 2)"),
            std::string::npos);
}
