#pragma once
// The symbolic simulator of step programs (program_test.cpp,
// program_hosts_test.cpp): runs every rank's program with the semantics of
// include/mccl/program.hpp, tracking which ranks' data each block holds.

#include <mccl/program.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <mccl/error.hpp>
#include "contributions.hpp"

namespace program_sim {

using namespace mccl::sched;
using namespace sim;


inline int floor_pow2(int w) {
  int p = 1;
  while (p * 2 <= w)
    p *= 2;
  return p;
}

inline int log2_exact(int p) {
  return ceil_log2(p);
}

inline bool is_pow2(int w) {
  return (w & (w - 1)) == 0;
}

inline std::vector<int> all_blocks(int n) {
  std::vector<int> v;
  for (int b = 0; b < n; ++b)
    v.push_back(b);
  return v;
}

// ---- the symbolic simulator --------------------------------------------------

// Reductions may use recv_reduce; data movement (allgather, broadcast) only
// copies, and a block's bit names whose original data it holds.
enum class payload { reduction, data };

struct cell {
  bool valid = false;
  contributions bits = 0;
};

using world_state = std::vector<std::vector<cell>>;

// One side of a transfer, as listed by the sender or by the receiver.
struct side {
  int from;
  int to;
  int first;
  int count;
  xfer_kind kind;
  std::vector<cell> data; // sends only: the blocks as they left the sender
};

inline const char* kind_name(xfer_kind k) {
  switch (k) {
    case xfer_kind::send: return "send";
    case xfer_kind::recv_copy: return "recv_copy";
    case xfer_kind::recv_reduce: return "recv_reduce";
  }
  return "?";
}

inline std::string where(int s, const side& x) {
  std::ostringstream o;
  o << "step " << s << ": " << kind_name(x.kind) << " " << x.from << "->" << x.to << " blocks ["
    << x.first << ", " << x.first + x.count << ")";
  return o.str();
}

// Transfers of one rank in one step to/from one peer in one direction must
// be maximal ranges sorted by first block: disjoint, not touching, ascending.
inline ::testing::AssertionResult compact(const std::vector<xfer>& xs, int rank, int s) {
  for (std::size_t i = 0; i < xs.size(); ++i)
    for (std::size_t j = i + 1; j < xs.size(); ++j) {
      const auto& a = xs[i];
      const auto& b = xs[j];
      if (a.peer != b.peer || (a.kind == xfer_kind::send) != (b.kind == xfer_kind::send))
        continue;
      if (b.first_block <= a.first_block + a.block_count)
        return ::testing::AssertionFailure()
               << "rank " << rank << " step " << s << ": transfers with peer " << a.peer
               << " overlap, touch or are out of order: [" << a.first_block << ", +"
               << a.block_count << ") then [" << b.first_block << ", +" << b.block_count << ")";
    }
  return ::testing::AssertionSuccess();
}

// Runs the programs of every rank of a world with the step-synchronous
// semantics of program.hpp and leaves the final blocks in `state`.
inline ::testing::AssertionResult simulate(const std::vector<program>& progs, payload mode,
                                    world_state& state) {
  const int world = static_cast<int>(progs.size());
  const int blocks = progs.at(0).blocks;
  if (blocks < 1 || blocks > 64)
    return ::testing::AssertionFailure() << "blocks " << blocks << " outside [1, 64]";
  const std::size_t steps = progs[0].steps.size();
  for (int r = 0; r < world; ++r) {
    const auto& p = progs[r];
    if (p.blocks != blocks)
      return ::testing::AssertionFailure() << "rank " << r << " has " << p.blocks
                                           << " blocks, rank 0 " << blocks;
    if (p.steps.size() != steps)
      return ::testing::AssertionFailure() << "rank " << r << " has " << p.steps.size()
                                           << " steps, rank 0 " << steps;
    try {
      validate(p, r, world);
    } catch (const mccl::error& e) {
      return ::testing::AssertionFailure() << "rank " << r << ": " << e.what();
    }
  }

  state.assign(world, std::vector<cell>(blocks));
  for (int r = 0; r < world; ++r)
    for (int b : progs[r].initial_blocks)
      state[r][b] = {true, only(r)};

  std::vector<side> sends;
  std::vector<side> recvs;
  std::vector<char> written(blocks);
  for (std::size_t s = 0; s < steps; ++s) {
    const int si = static_cast<int>(s);
    sends.clear();
    recvs.clear();
    // Sends read the state after all receives of earlier steps.
    for (int r = 0; r < world; ++r) {
      const auto& xs = progs[r].steps[s].xfers;
      auto ok = compact(xs, r, si);
      if (!ok)
        return ok;
      for (const auto& x : xs) {
        if (x.kind != xfer_kind::send) {
          recvs.push_back({x.peer, r, x.first_block, x.block_count, x.kind, {}});
          continue;
        }
        side out{r, x.peer, x.first_block, x.block_count, x.kind, {}};
        for (int b = x.first_block; b < x.first_block + x.block_count; ++b) {
          if (!state[r][b].valid)
            return ::testing::AssertionFailure()
                   << where(si, out) << " sends block " << b << " which holds no data";
          out.data.push_back(state[r][b]);
        }
        sends.push_back(std::move(out));
      }
    }
    // Match per ordered pair in listing order: a stable sort by (from, to)
    // keeps each side's listing order within a pair.
    auto by_pair = [](const side& a, const side& b) {
      return a.from != b.from ? a.from < b.from : a.to < b.to;
    };
    std::stable_sort(sends.begin(), sends.end(), by_pair);
    std::stable_sort(recvs.begin(), recvs.end(), by_pair);
    for (std::size_t i = 0; i < std::max(sends.size(), recvs.size()); ++i) {
      if (i >= sends.size())
        return ::testing::AssertionFailure() << where(si, recvs[i]) << " has no matching send";
      if (i >= recvs.size())
        return ::testing::AssertionFailure() << where(si, sends[i]) << " has no matching receive";
      const auto& a = sends[i];
      const auto& b = recvs[i];
      if (a.from != b.from || a.to != b.to || a.first != b.first || a.count != b.count)
        return ::testing::AssertionFailure()
               << where(si, a) << " is matched against " << where(si, b);
    }
    // Receives apply after every send of this step has read its blocks.
    for (std::size_t i = 0; i < recvs.size(); ++i) {
      const auto& in = recvs[i];
      for (int k = 0; k < in.count; ++k) {
        int b = in.first + k;
        cell& local = state[in.to][b];
        const cell& got = sends[i].data[k];
        if (in.kind == xfer_kind::recv_copy) {
          local = got;
          continue;
        }
        if (mode == payload::data)
          return ::testing::AssertionFailure() << where(si, in) << ": data movement reduces";
        if (!local.valid)
          return ::testing::AssertionFailure()
                 << where(si, in) << " reduces into block " << b << " which holds no data";
        if ((local.bits & got.bits) != 0)
          return ::testing::AssertionFailure()
                 << where(si, in) << " counts contributions 0x" << std::hex
                 << (local.bits & got.bits) << " twice in block " << std::dec << b;
        local.bits |= got.bits;
      }
    }
    // No two receives of one step may write the same block of a rank: their
    // order would be undefined.
    for (int r = 0; r < world; ++r) {
      std::fill(written.begin(), written.end(), 0);
      for (const auto& x : progs[r].steps[s].xfers) {
        if (x.kind == xfer_kind::send)
          continue;
        for (int b = x.first_block; b < x.first_block + x.block_count; ++b) {
          if (written[b])
            return ::testing::AssertionFailure() << "rank " << r << " step " << s
                                                 << " receives block " << b << " twice";
          written[b] = 1;
        }
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// ---- running whole collectives ---------------------------------------------------

using make_fn = std::function<program(int rank)>;
// What a result block must hold: expected(rank, block).
using expect_fn = std::function<contributions(int rank, int block)>;
using result_fn = std::function<std::vector<int>(int rank)>;

struct collective {
  int world;
  payload mode;
  int steps;           // expected global step count
  result_fn initial;   // documented initial_blocks
  result_fn result;    // documented result_blocks
  expect_fn expected;
};

inline ::testing::AssertionResult run(const make_fn& make, const collective& c) {
  std::vector<program> progs;
  progs.reserve(c.world);
  for (int r = 0; r < c.world; ++r) {
    progs.push_back(make(r));
    if (progs.back().initial_blocks != c.initial(r))
      return ::testing::AssertionFailure() << "rank " << r << ": unexpected initial_blocks";
    if (progs.back().result_blocks != c.result(r))
      return ::testing::AssertionFailure() << "rank " << r << ": unexpected result_blocks";
    if (static_cast<int>(progs.back().steps.size()) != c.steps)
      return ::testing::AssertionFailure() << "rank " << r << ": " << describe(progs.back())
                                           << ", expected " << c.steps << " steps";
  }
  world_state state;
  auto ok = simulate(progs, c.mode, state);
  if (!ok)
    return ok;
  for (int r = 0; r < c.world; ++r)
    for (int b : progs[r].result_blocks) {
      const cell& got = state[r][b];
      contributions want = c.expected(r, b);
      if (!got.valid || got.bits != want)
        return ::testing::AssertionFailure()
               << "rank " << r << " block " << b << " holds " << (got.valid ? "" : "nothing ")
               << "0x" << std::hex << got.bits << ", expected 0x" << want;
    }
  return ::testing::AssertionSuccess();
}

inline result_fn all_of(int blocks) {
  return [blocks](int) { return all_blocks(blocks); };
}

inline result_fn own_block() {
  return [](int r) { return std::vector<int>{r}; };
}

inline result_fn at_root(int root, int blocks) {
  return [root, blocks](int r) { return r == root ? all_blocks(blocks) : std::vector<int>{}; };
}

inline expect_fn fully_reduced(int world) {
  return [world](int, int) { return everyone(world); };
}

// Extra steps of a non-power-of-two world: fold in, fold out.
inline int fold_steps(int w) {
  return is_pow2(w) ? 0 : 2;
}

} // namespace program_sim
