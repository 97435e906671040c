/// Host-aware step programs (include/mccl/program.hpp, "host-aware"): the
/// ring programs of program.cpp, run inside each host and across hosts, put
/// together with step_merger.

#include <mccl/program.hpp>

#include "collectives/programs/program_merge.hpp"
#include "collectives/programs/schedule_checks.hpp"

#include <algorithm>
#include <map>
#include <string>

namespace mccl::sched {

using namespace detail;

namespace {

/// The ranks by host, as the host-aware programs use them (see program.hpp).
class host_layout {
public:
  /// `lead`, when >= 0, is listed first on its host (a broadcast's root), so
  /// that it is a core rank; the others follow in rank order.
  host_layout(const char* fn, const std::vector<int>& host_of, int rank, int lead = -1)
    : world_(static_cast<int>(host_of.size())) {
    check_world(fn, world_);
    check_member(fn, "rank", rank, world_);
    if (lead >= 0)
      check_member(fn, "root", lead, world_);
    std::map<int, int> index; // host_of value -> host number
    for (int r = 0; r < world_; ++r) {
      auto [it, added] = index.emplace(host_of[static_cast<std::size_t>(r)], hosts());
      if (added)
        members_.emplace_back();
      members_[static_cast<std::size_t>(it->second)].push_back(r);
    }
    if (lead >= 0) {
      auto& m = members_[static_cast<std::size_t>(index[host_of[static_cast<std::size_t>(lead)]])];
      std::rotate(m.begin(), std::find(m.begin(), m.end(), lead), std::find(m.begin(), m.end(), lead) + 1);
    }
    host_.resize(static_cast<std::size_t>(world_));
    place_.resize(static_cast<std::size_t>(world_));
    stripes_ = world_;
    int most = 0;
    for (int h = 0; h < hosts(); ++h) {
      const auto& m = members_[static_cast<std::size_t>(h)];
      for (std::size_t i = 0; i < m.size(); ++i) {
        host_[static_cast<std::size_t>(m[i])] = h;
        place_[static_cast<std::size_t>(m[i])] = static_cast<int>(i);
      }
      stripes_ = std::min(stripes_, static_cast<int>(m.size()));
      most = std::max(most, static_cast<int>(m.size()));
    }
    fold_steps_ = (most + stripes_ - 1) / stripes_ - 1;
  }

  int world() const { return world_; }
  int hosts() const { return static_cast<int>(members_.size()); }
  /// S: ranks per host that carry inter-host traffic (the fewest any host has).
  int stripes() const { return stripes_; }
  /// Steps in which extras hand their data to their core rank, one each.
  int fold_steps() const { return fold_steps_; }
  int host(int rank) const { return host_[static_cast<std::size_t>(rank)]; }
  /// Position on its host (0 for the lead).
  int place(int rank) const { return place_[static_cast<std::size_t>(rank)]; }
  int stripe(int rank) const { return place(rank) % stripes_; }
  bool is_core(int rank) const { return place(rank) < stripes_; }
  /// The rank of place `place` on host `h`.
  int at(int h, int place) const {
    return members_[static_cast<std::size_t>(h)][static_cast<std::size_t>(place)];
  }
  /// The core rank an extra folds into (itself for a core rank).
  int core_of(int rank) const { return at(host(rank), stripe(rank)); }
  /// The step in which an extra folds in: the first S extras of a host in
  /// step 0, the next S in step 1, ...
  int fold_step(int extra) const { return place(extra) / stripes_ - 1; }
  /// Extras folding into a core rank, in fold-step order.
  std::vector<int> extras_of(int core) const {
    const auto& m = members_[static_cast<std::size_t>(host(core))];
    std::vector<int> out;
    for (std::size_t i = static_cast<std::size_t>(place(core) + stripes_); i < m.size();
         i += static_cast<std::size_t>(stripes_))
      out.push_back(m[i]);
    return out;
  }
  /// The ranks (blocks) of stripe k on host h: its core rank and extras.
  std::vector<int> stripe_on(int h, int k) const {
    const auto& m = members_[static_cast<std::size_t>(h)];
    std::vector<int> out;
    for (std::size_t i = static_cast<std::size_t>(k); i < m.size(); i += static_cast<std::size_t>(stripes_))
      out.push_back(m[i]);
    return out;
  }
  /// Stripe k on every host.
  std::vector<int> stripe_everywhere(int k) const {
    std::vector<int> out;
    for (int h = 0; h < hosts(); ++h) {
      auto part = stripe_on(h, k);
      out.insert(out.end(), part.begin(), part.end());
    }
    return out;
  }

private:
  int world_;
  std::vector<std::vector<int>> members_; ///< by host: ranks, lead first, then ascending
  std::vector<int> host_;
  std::vector<int> place_;
  int stripes_ = 1;
  int fold_steps_ = 0;
};

std::vector<int> all_but(int n, int block) {
  auto v = all_blocks(n);
  v.erase(v.begin() + block);
  return v;
}

/// Places a program for the core of host h (ranks by place) into `merged`.
template <class BlocksOf>
void inside_host(step_merger& merged, const host_layout& l, int h, const program& sub,
                 int first_step, BlocksOf blocks_of) {
  merged.embed(sub, first_step, [&](int place) { return l.at(h, place); }, blocks_of);
}

/// Places a program for stripe k across hosts (ranks by host) into `merged`.
template <class BlocksOf>
void across_hosts(step_merger& merged, const host_layout& l, int k, const program& sub,
                  int first_step, BlocksOf blocks_of) {
  merged.embed(sub, first_step, [&](int h) { return l.at(h, k); }, blocks_of);
}

/// Folding for the reductions: an extra hands its whole vector (`all`) to
/// its core rank in its fold step and gets result(extra) back in step
/// `last`; a core rank reduces each of its extras' vectors into its own and
/// sends each its result.
template <class Result>
void fold_reduction(step_merger& merged, const host_layout& l, int rank, const std::vector<int>& all,
                    int last, Result result) {
  if (!l.is_core(rank)) {
    merged.add(l.fold_step(rank), xfer_kind::send, l.core_of(rank), all);
    merged.add(last, xfer_kind::recv_copy, l.core_of(rank), result(rank));
    return;
  }
  for (int e : l.extras_of(rank)) {
    merged.add(l.fold_step(e), xfer_kind::recv_reduce, e, all);
    merged.add(last, xfer_kind::send, e, result(e));
  }
}

} // namespace

std::vector<int> number_hosts(const std::vector<std::string>& keys) {
  std::map<std::string, int> seen;
  std::vector<int> out;
  for (const auto& k : keys)
    out.push_back(seen.emplace(k, static_cast<int>(seen.size())).first->second);
  return out;
}

int host_count(const std::vector<int>& host_of) {
  std::vector<int> v = host_of;
  std::sort(v.begin(), v.end());
  return static_cast<int>(std::unique(v.begin(), v.end()) - v.begin());
}

program hier_allreduce(int rank, const std::vector<int>& host_of) {
  host_layout l("hier_allreduce", host_of, rank);
  const int S = l.stripes();
  const int H = l.hosts();
  const int F = l.fold_steps();
  // Stripe k is blocks [k H, (k + 1) H): block j of it crosses to host j.
  program prog;
  prog.blocks = S * H;
  prog.initial_blocks = all_blocks(prog.blocks);
  prog.result_blocks = all_blocks(prog.blocks);
  const int cross = F + S - 1;               // first inter-host step
  const int gather = cross + 2 * (H - 1);    // first intra-host allgather step
  const int last = gather + S - 1 + (F > 0); // steps in all
  step_merger merged;
  const auto all = all_blocks(prog.blocks);
  fold_reduction(merged, l, rank, all, last - 1, [&](int) { return all; });
  if (l.is_core(rank)) {
    const int h = l.host(rank);
    const int k = l.place(rank);
    auto stripe = [H](int s) {
      std::vector<int> v;
      for (int j = 0; j < H; ++j)
        v.push_back(s * H + j);
      return v;
    };
    auto crossing = [H, k](int j) { return std::vector<int>{k * H + j}; };
    inside_host(merged, l, h, ring_reduce_scatter(k, S), F, stripe);
    across_hosts(merged, l, k, ring_reduce_scatter(h, H), cross, crossing);
    across_hosts(merged, l, k, ring_allgather(h, H), cross + H - 1, crossing);
    inside_host(merged, l, h, ring_allgather(k, S), gather, stripe);
  }
  merged.write_to(prog, last);
  return prog;
}

program hier_reduce_scatter(int rank, const std::vector<int>& host_of) {
  host_layout l("hier_reduce_scatter", host_of, rank);
  const int S = l.stripes();
  const int H = l.hosts();
  const int F = l.fold_steps();
  program prog;
  prog.blocks = l.world();
  prog.initial_blocks = all_blocks(prog.blocks);
  prog.result_blocks = {rank};
  const int cross = F + S - 1;
  const int last = cross + H - 1 + (F > 0);
  step_merger merged;
  fold_reduction(merged, l, rank, all_blocks(prog.blocks), last - 1,
                 [](int extra) { return std::vector<int>{extra}; });
  if (l.is_core(rank)) {
    const int h = l.host(rank);
    const int k = l.place(rank);
    // Inside the host, sub-block s is stripe s of every host; across hosts,
    // sub-block j is this stripe's part on host j.
    inside_host(merged, l, h, ring_reduce_scatter(k, S), F,
                [&](int s) { return l.stripe_everywhere(s); });
    across_hosts(merged, l, k, ring_reduce_scatter(h, H), cross,
                 [&](int j) { return l.stripe_on(j, k); });
  }
  merged.write_to(prog, last);
  return prog;
}

program hier_allgather(int rank, const std::vector<int>& host_of) {
  host_layout l("hier_allgather", host_of, rank);
  const int S = l.stripes();
  const int H = l.hosts();
  const int fold = l.fold_steps() > 0 ? 1 : 0; // extras' blocks differ: one step
  program prog;
  prog.blocks = l.world();
  prog.initial_blocks = {rank};
  prog.result_blocks = all_blocks(prog.blocks);
  const int inside = fold + H - 1;
  const int last = inside + S - 1 + fold;
  step_merger merged;
  if (!l.is_core(rank)) {
    merged.add(0, xfer_kind::send, l.core_of(rank), {rank});
    merged.add(last - 1, xfer_kind::recv_copy, l.core_of(rank), all_but(prog.blocks, rank));
    merged.write_to(prog, last);
    return prog;
  }
  const int h = l.host(rank);
  const int k = l.place(rank);
  for (int e : l.extras_of(rank)) {
    merged.add(0, xfer_kind::recv_copy, e, {e});
    merged.add(last - 1, xfer_kind::send, e, all_but(prog.blocks, e));
  }
  across_hosts(merged, l, k, ring_allgather(h, H), fold, [&](int j) { return l.stripe_on(j, k); });
  inside_host(merged, l, h, ring_allgather(k, S), inside,
              [&](int s) { return l.stripe_everywhere(s); });
  merged.write_to(prog, last);
  return prog;
}

program hier_broadcast(int rank, const std::vector<int>& host_of, int root) {
  host_layout l("hier_broadcast", host_of, rank, root);
  const int S = l.stripes();
  const int H = l.hosts();
  program prog;
  prog.blocks = S;
  if (rank == root)
    prog.initial_blocks = all_blocks(S);
  prog.result_blocks = all_blocks(S);
  const int chain = S > 1 ? 1 : 0;                        // after the root's scatter
  const int inside = chain + H - 1;                       // the core's allgather
  const int last = inside + S - 1 + (l.fold_steps() > 0); // then the extras' copy
  step_merger merged;
  if (!l.is_core(rank)) {
    merged.add(last - 1, xfer_kind::recv_copy, l.core_of(rank), all_blocks(S));
    merged.write_to(prog, last);
    return prog;
  }
  const int root_host = l.host(root);
  const int h = l.host(rank);
  const int k = l.place(rank);
  if (rank == root) {
    for (int s = 1; s < S; ++s)
      merged.add(0, xfer_kind::send, l.at(h, s), {s});
  } else if (h == root_host) {
    merged.add(0, xfer_kind::recv_copy, root, {k});
  }
  // Stripe k's chain visits the hosts from the root's on; each forwards
  // the block in the step after it arrived, chunk by chunk.
  const int position = mod(static_cast<long long>(h) - root_host, H);
  if (position > 0)
    merged.add(chain + position - 1, xfer_kind::recv_copy,
               l.at(mod(static_cast<long long>(h) - 1, H), k), {k});
  if (position < H - 1)
    merged.add(chain + position, xfer_kind::send, l.at(mod(h + 1LL, H), k), {k});
  inside_host(merged, l, h, ring_allgather(k, S), inside, [](int s) { return std::vector<int>{s}; });
  for (int e : l.extras_of(rank))
    merged.add(last - 1, xfer_kind::send, e, all_blocks(S));
  merged.write_to(prog, last);
  return prog;
}

} // namespace mccl::sched
