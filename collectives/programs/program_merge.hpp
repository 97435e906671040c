#pragma once
/// Building a program out of smaller ones (program.cpp, program_hosts.cpp):
/// sub-programs written for a group of ranks and their own block numbering
/// are placed into one program, side by side (the two rings of a
/// bidirectional program) or one after another (the phases of a
/// hierarchical one). Internal: not part of the extension API.

#include <mccl/program.hpp>

#include <algorithm>
#include <vector>

namespace mccl::sched::detail {

/// Blocks 0..n-1: a sub-program's whole vector.
inline std::vector<int> all_blocks(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int b = 0; b < n; ++b)
    v[static_cast<std::size_t>(b)] = b;
  return v;
}

/// Collects a rank's transfers as block sets per (step, kind, peer) and
/// writes each set as maximal ranges sorted by first block, the form every
/// program's transfers take. Both ends of a transfer collect the same block
/// set for it, so they list the same ranges in the same order. Per step,
/// sets are written in the order of their first transfer; a sub-program
/// that received from one peer both by copy and by reduction in one step
/// would be listed out of order, and none does.
class step_merger {
public:
  void add(int step, xfer_kind kind, int peer, const std::vector<int>& blocks) {
    auto& groups = at(step);
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const group& g) { return g.kind == kind && g.peer == peer; });
    if (g == groups.end())
      g = groups.insert(groups.end(), group{kind, peer, {}});
    g->blocks.insert(g->blocks.end(), blocks.begin(), blocks.end());
  }

  /// Places `sub`'s transfers from step `first_step` on: its peer p is rank
  /// peer_of(p), its block b the blocks blocks_of(b) (a std::vector<int>).
  template <class PeerOf, class BlocksOf>
  void embed(const program& sub, int first_step, PeerOf peer_of, BlocksOf blocks_of) {
    for (std::size_t s = 0; s < sub.steps.size(); ++s)
      for (const auto& x : sub.steps[s].xfers) {
        std::vector<int> blocks;
        for (int b = x.first_block; b < x.first_block + x.block_count; ++b) {
          const std::vector<int>& mapped = blocks_of(b);
          blocks.insert(blocks.end(), mapped.begin(), mapped.end());
        }
        add(first_step + static_cast<int>(s), x.kind, peer_of(x.peer), blocks);
      }
  }

  /// Writes the collected transfers into prog.steps, padded to at least
  /// `total_steps` entries.
  void write_to(program& prog, int total_steps) const {
    prog.steps.resize(std::max(steps_.size(), static_cast<std::size_t>(total_steps)));
    for (std::size_t s = 0; s < steps_.size(); ++s)
      for (const auto& g : steps_[s])
        for (const auto& r : ranges_of(g.blocks))
          prog.steps[s].xfers.push_back({g.kind, g.peer, r.first, r.second});
  }

  /// Sorted, deduplicated blocks as maximal (first, count) ranges.
  static std::vector<std::pair<int, int>> ranges_of(std::vector<int> blocks) {
    std::sort(blocks.begin(), blocks.end());
    blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
    std::vector<std::pair<int, int>> out;
    for (int b : blocks) {
      if (!out.empty() && out.back().first + out.back().second == b)
        ++out.back().second;
      else
        out.emplace_back(b, 1);
    }
    return out;
  }

private:
  struct group {
    xfer_kind kind;
    int peer;
    std::vector<int> blocks;
  };

  std::vector<group>& at(int step) {
    if (steps_.size() <= static_cast<std::size_t>(step))
      steps_.resize(static_cast<std::size_t>(step) + 1);
    return steps_[static_cast<std::size_t>(step)];
  }

  std::vector<std::vector<group>> steps_;
};

} // namespace mccl::sched::detail
