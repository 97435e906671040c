#include "collectives/programs/step_plan.hpp"

#include "collectives/algorithms/chunking.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>

namespace mccl {

namespace {

/// Every transfer of the program cut into chunks, in step order, and the
/// lookups from the wire's (step, peer, chunk).
void build_items(step_plan& plan, const collective_args& a, const sched::program& prog,
                 const std::vector<sched::range>& block_elems) {
  struct counter {
    int peer;
    bool is_send;
    uint32_t next;
  };
  std::vector<counter> next_id; // per step: chunks numbered per (peer, direction)
  for (uint32_t s = 0; s < prog.steps.size(); ++s) {
    next_id.clear();
    for (const auto& x : prog.steps[s].xfers) {
      const auto& first = block_elems.at(static_cast<std::size_t>(x.first_block));
      const auto& last = block_elems.at(static_cast<std::size_t>(x.first_block + x.block_count - 1));
      sched::range r{first.begin, last.begin + last.count - first.begin};
      bool is_send = x.kind == sched::xfer_kind::send;
      auto id = std::find_if(next_id.begin(), next_id.end(),
                             [&](const counter& c) { return c.peer == x.peer && c.is_send == is_send; });
      if (id == next_id.end())
        id = next_id.insert(next_id.end(), counter{x.peer, is_send, 0});
      // Both ends of a transfer see the same block range, so they agree
      // on its chunking.
      auto chunk_elems = pipelined_chunk_elems(a, r.count);
      auto n = sched::chunk_count(r.count, chunk_elems);
      for (std::size_t k = 0; k < n; ++k) {
        auto c = sched::chunk_range(r, chunk_elems, k);
        step_item it;
        it.is_send = is_send;
        it.kind = x.kind;
        it.step = s;
        it.peer = x.peer;
        it.wire_chunk = id->next++;
        it.begin = c.begin;
        it.count = c.count;
        auto index = static_cast<uint32_t>(plan.items.size());
        (is_send ? plan.sends : plan.recvs).emplace_back(step_plan::key{s, x.peer, it.wire_chunk}, index);
        plan.items.push_back(it);
      }
    }
  }
  std::sort(plan.sends.begin(), plan.sends.end());
  std::sort(plan.recvs.begin(), plan.recvs.end());
}

std::size_t work_elems(const std::vector<sched::range>& block_elems) {
  std::size_t n = 0;
  for (const auto& b : block_elems)
    n = std::max(n, b.begin + b.count);
  return n;
}

/// Dependencies from the program's semantics, found with one sweep over
/// the steps and a map of the buffer's segments: for each segment, the
/// receive that last wrote it and the sends that read it since.
void build_dependencies(step_plan& plan, const sched::program& prog, std::size_t elems) {
  auto& items = plan.items;
  struct segment {
    std::size_t end;
    int writer = -1;
    std::vector<uint32_t> readers;
  };
  std::map<std::size_t, segment> segs;
  segs.emplace(0, segment{std::max<std::size_t>(elems, 1), -1, {}});
  auto split = [&](std::size_t pos) {
    auto i = segs.upper_bound(pos);
    if (i == segs.begin())
      return;
    --i;
    if (i->first == pos || i->second.end <= pos)
      return;
    segment tail = i->second;
    i->second.end = pos;
    segs.emplace(pos, std::move(tail));
  };
  auto visit = [&](const step_item& it, auto&& f) {
    split(it.begin);
    split(it.begin + it.count);
    for (auto i = segs.find(it.begin); i != segs.end() && i->first < it.begin + it.count; ++i)
      f(i->second);
  };
  std::vector<std::pair<uint32_t, uint32_t>> edges; // (from, to): `to` waits for `from`
  std::vector<uint32_t> deps;
  auto link = [&](uint32_t to) {
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    for (auto d : deps)
      if (d != to) {
        edges.emplace_back(d, to);
        ++items[to].pending;
      }
    deps.clear();
  };
  // The receives of this rank's latest step that had any (program::rounds).
  std::vector<uint32_t> earlier_recvs;
  // Sends of the steps before program::sends_first_until.
  std::vector<uint32_t> first_sends;
  std::size_t i = 0;
  while (i < items.size()) {
    auto step = items[i].step;
    std::size_t end = i;
    while (end < items.size() && items[end].step == step)
      ++end;
    // Sends of a step read the state before the step's receives.
    for (auto j = i; j < end; ++j)
      if (items[j].is_send) {
        visit(items[j], [&](segment& s) {
          if (s.writer >= 0)
            deps.push_back(static_cast<uint32_t>(s.writer));
          s.readers.push_back(static_cast<uint32_t>(j));
        });
        if (prog.rounds && !earlier_recvs.empty()) {
          auto prev = items[earlier_recvs.front()].step;
          bool fed = std::any_of(deps.begin(), deps.end(),
                                 [&](uint32_t d) { return !items[d].is_send && items[d].step == prev; });
          if (!fed) // data held since before the previous round: wait for it
            deps.insert(deps.end(), earlier_recvs.begin(), earlier_recvs.end());
        }
        if (step >= static_cast<uint32_t>(prog.sends_first_until))
          deps.insert(deps.end(), first_sends.begin(), first_sends.end());
        link(static_cast<uint32_t>(j));
        if (step < static_cast<uint32_t>(prog.sends_first_until))
          first_sends.push_back(static_cast<uint32_t>(j));
      }
    for (auto j = i; j < end; ++j)
      if (!items[j].is_send) {
        visit(items[j], [&](segment& s) {
          if (s.writer >= 0)
            deps.push_back(static_cast<uint32_t>(s.writer));
          deps.insert(deps.end(), s.readers.begin(), s.readers.end());
          s.writer = static_cast<int>(j);
          s.readers.clear();
        });
        link(static_cast<uint32_t>(j));
      }
    std::vector<uint32_t> recvs;
    for (auto j = i; j < end; ++j)
      if (!items[j].is_send)
        recvs.push_back(static_cast<uint32_t>(j));
    if (!recvs.empty())
      earlier_recvs = std::move(recvs);
    i = end;
  }
  // One array for all: each item's dependents in the order they were found.
  for (const auto& [from, to] : edges)
    ++items[from].dependents_end;
  uint32_t at = 0;
  for (auto& it : items) {
    it.dependents_begin = at;
    at += it.dependents_end;
    it.dependents_end = it.dependents_begin;
  }
  plan.dependents.resize(edges.size());
  for (const auto& [from, to] : edges)
    plan.dependents[items[from].dependents_end++] = to;
}

/// Everything a plan is made from: the program's transfers, rounds and
/// send order, the blocks, and each transfer's chunk size.
std::vector<uint64_t> plan_key(const collective_args& a, const sched::program& prog,
                               const std::vector<sched::range>& block_elems) {
  std::size_t size = 3 + 2 * block_elems.size();
  for (const auto& s : prog.steps)
    size += 1 + 5 * s.xfers.size();
  std::vector<uint64_t> key;
  key.reserve(size);
  key.push_back(prog.rounds ? 1 : 0);
  key.push_back(static_cast<uint64_t>(prog.sends_first_until));
  key.push_back(block_elems.size());
  for (const auto& b : block_elems) {
    key.push_back(b.begin);
    key.push_back(b.count);
  }
  for (const auto& s : prog.steps) {
    key.push_back(s.xfers.size());
    for (const auto& x : s.xfers) {
      key.push_back(static_cast<uint64_t>(x.kind));
      key.push_back(static_cast<uint64_t>(static_cast<int64_t>(x.peer)));
      key.push_back(static_cast<uint64_t>(x.first_block));
      key.push_back(static_cast<uint64_t>(x.block_count));
      const auto& first = block_elems.at(static_cast<std::size_t>(x.first_block));
      const auto& last = block_elems.at(static_cast<std::size_t>(x.first_block + x.block_count - 1));
      key.push_back(pipelined_chunk_elems(a, last.begin + last.count - first.begin));
    }
  }
  return key;
}

/// The plans of recent ops. Small plans only: a large op's plan costs
/// little next to its transfers, and would hold memory.
class plan_cache {
public:
  static constexpr std::size_t capacity = 32;
  static constexpr std::size_t max_items = 512;

  std::shared_ptr<const step_plan> find(const std::vector<uint64_t>& key) {
    std::lock_guard<std::mutex> guard{mutex_};
    for (const auto& e : entries_)
      if (e.key == key)
        return e.plan;
    return nullptr;
  }

  void add(std::vector<uint64_t> key, std::shared_ptr<const step_plan> plan) {
    if (plan->items.size() > max_items)
      return;
    std::lock_guard<std::mutex> guard{mutex_};
    if (entries_.size() == capacity)
      entries_.pop_front(); // the oldest
    entries_.push_back({std::move(key), std::move(plan)});
  }

private:
  struct entry {
    std::vector<uint64_t> key;
    std::shared_ptr<const step_plan> plan;
  };
  std::mutex mutex_;
  std::deque<entry> entries_;
};

plan_cache& compiled_plans() {
  static plan_cache c;
  return c;
}

} // namespace

const uint32_t* step_plan::find(const index& in, const key& k) {
  auto i = std::lower_bound(in.begin(), in.end(), k,
                            [](const std::pair<key, uint32_t>& e, const key& want) { return e.first < want; });
  return i != in.end() && i->first == k ? &i->second : nullptr;
}

std::shared_ptr<const step_plan> compile_step_plan(const collective_args& a, const sched::program& prog,
                                                   const std::vector<sched::range>& block_elems) {
  auto key = plan_key(a, prog, block_elems);
  if (auto known = compiled_plans().find(key))
    return known;
  auto plan = std::make_shared<step_plan>();
  build_items(*plan, a, prog, block_elems);
  build_dependencies(*plan, prog, work_elems(block_elems));
  std::shared_ptr<const step_plan> done = std::move(plan);
  compiled_plans().add(std::move(key), done);
  return done;
}

} // namespace mccl
