// The board's staged collectives (collectives/algorithms/board_stage.cpp),
// in one process, each rank a thread with its own mapping of the board:
// board_rs (allreduce: the same bits as a reduction in rank order for
// every dtype and reduction on 2, 3, 4 and 8 ranks, one piece or many, in
// place or not; reduce: the root's result, nothing written elsewhere) and
// board_stage (broadcast, allgather, reduce_scatter against a reference on
// the same ranks); which ops the table puts there; a rank gone mid-op
// named, a silent one ending the wait at the deadline, a desync seen.

#include <mccl/error.hpp>
#include "collectives/algorithms/board_collectives.hpp"
#include "reducers/reduce.hpp"
#include "board_views.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace mccl::transport;
using namespace std::chrono_literals;

namespace {

using mccl::board_call;
using mccl::board_outcome;
using mccl::dtype;
using mccl::errc;
using mccl::redop;

constexpr dtype every_dtype[] = {dtype::float32, dtype::float64, dtype::float16, dtype::bfloat16, dtype::int8,
                                 dtype::uint8,   dtype::int32,   dtype::int64,   dtype::boolean,  dtype::int16,
                                 dtype::uint16,  dtype::uint32,  dtype::uint64};
constexpr redop every_redop[] = {redop::sum, redop::prod, redop::min, redop::max,
                                 redop::avg, redop::band, redop::bor, redop::bxor};

/// Element i of rank r's input: small values (0..3) every dtype holds
/// exactly, so no reduction here overflows into a NaN or rounds.
void fill(dtype t, void* p, std::size_t n, int r) {
  auto* b = static_cast<uint8_t*>(p);
  static const uint16_t half[] = {0x0000, 0x3c00, 0x4000, 0x4200};
  static const uint16_t bf16[] = {0x0000, 0x3f80, 0x4000, 0x4040};
  for (std::size_t i = 0; i < n; ++i) {
    auto v = static_cast<int>((i * 7 + static_cast<std::size_t>(r) * 3 + i / 5) % 4);
    switch (t) {
      case dtype::float32: { float x = static_cast<float>(v); std::memcpy(b + 4 * i, &x, 4); break; }
      case dtype::float64: { double x = v; std::memcpy(b + 8 * i, &x, 8); break; }
      case dtype::float16: std::memcpy(b + 2 * i, &half[v], 2); break;
      case dtype::bfloat16: std::memcpy(b + 2 * i, &bf16[v], 2); break;
      case dtype::boolean: b[i] = v & 1; break;
      default: {
        uint64_t x = static_cast<uint64_t>(v);
        std::memcpy(b + mccl::dtype_size(t) * i, &x, mccl::dtype_size(t)); // little endian
      }
    }
  }
}

/// Floating-point values whose sum depends on the order of the additions
/// (large and small magnitudes by rank), for checking that a reduction
/// adds in rank order; float32 and float64 only.
void fill_order_sensitive(dtype t, void* p, std::size_t n, int r) {
  for (std::size_t i = 0; i < n; ++i) {
    double x = static_cast<double>((i * 13 + static_cast<std::size_t>(r) * 7) % 17) * 0.37
               + (r % 3 == 0 ? 3.0e7 : 0.0) - (r % 3 == 1 ? 3.0e7 : 0.0);
    if (t == dtype::float32) {
      auto f = static_cast<float>(x);
      std::memcpy(static_cast<uint8_t*>(p) + 4 * i, &f, 4);
    } else {
      std::memcpy(static_cast<uint8_t*>(p) + 8 * i, &x, 8);
    }
  }
}

/// `world` threads run one board_rs allreduce each on `b`; `run` sets
/// each rank's request and call. The outcomes, by rank.
std::vector<board_outcome> run_ranks(board_views& b, int world,
                                     const std::function<board_outcome(int, shm_board&)>& run) {
  std::vector<board_outcome> out(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] { out[static_cast<std::size_t>(r)] = run(r, *b.ranks[static_cast<std::size_t>(r)]); });
  for (auto& t : threads)
    t.join();
  return out;
}

board_call call_for(shm_board& board, int world, uint64_t n, uint64_t seq,
                    std::chrono::milliseconds limit = std::chrono::milliseconds(20000)) {
  board_call c;
  c.board = &board;
  c.rank = board.rank();
  c.world = world;
  c.n = n;
  c.seq = seq;
  c.spin = 20us;
  c.timeout = limit;
  c.deadline = std::chrono::steady_clock::now() + limit;
  c.closed = [] { return board_outcome{}; };
  return c;
}

/// Rank `gone`'s part in a test of a rank lost mid-op: it posts the op's
/// first board op (its piece staged by the caller, if any), is gone 100 ms
/// later, and its peers' communicators say so from then on.
board_outcome post_first_piece_and_go(shm_board& board, const mccl::op_request& req, int world,
                                      std::atomic<bool>& lost) {
  board.post(0, mccl::board_tag_of(req, world), nullptr, 0);
  std::this_thread::sleep_for(100ms);
  lost = true;
  return {};
}

/// A peer's call in that test: its communicator names rank `gone` lost
/// once `lost` is set.
board_call call_closing_when_lost(shm_board& board, int world, const std::atomic<bool>& lost, int gone) {
  auto call = call_for(board, world, 0, 0);
  call.closed = [&lost, gone]() -> board_outcome {
    if (lost)
      return {errc::peer_lost, "lost rank " + std::to_string(gone) + " (its link closed)", "board exchange"};
    return {};
  };
  return call;
}

} // namespace

TEST(BoardRs, SharesCoverEveryPieceOnceAndFitTheResultBank) {
  for (std::size_t elem : {1, 2, 4, 8})
    for (int world = 1; world <= 64; ++world)
      for (std::size_t stage : {std::size_t{4096}, std::size_t{12288}, std::size_t{262144}})
        for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{63}, stage / elem - 1, stage / elem}) {
          std::size_t next = 0;
          for (int r = 0; r < world; ++r) {
            auto s = mccl::board_rs_share(count, elem, world, r);
            ASSERT_EQ(s.first, s.count > 0 ? next : s.first) << "world " << world << " count " << count;
            ASSERT_LE(s.count * elem, shm_board::result_bytes(world, stage));
            if (s.count > 0) {
              ASSERT_EQ(s.first * elem % 64, 0u) << "a share starts on a cache line";
            }
            next = s.first + s.count;
          }
          ASSERT_EQ(next, count) << "elem " << elem << " world " << world << " count " << count;
        }
  // 64 ranks with the default banks and stage (1 MiB): one segment of
  // under 140 MiB, taken only as ranks first write it.
  EXPECT_LT(shm_board::segment_bytes(64, 16384, std::size_t{1} << 20), std::size_t{140} << 20);
  EXPECT_EQ(mccl::board_rs_ops(0, 4, 4096), 1u);
  EXPECT_EQ(mccl::board_rs_ops(1024, 4, 4096), 2u);
  EXPECT_EQ(mccl::board_rs_ops(1025, 4, 4096), 3u);
}

TEST(BoardRs, TheTableTakesItAboveTheBanksOrForManyRanksAndMcclAlgoForcesIt) {
  mccl::op_request op;
  op.type = dtype::float32;
  op.count = 256; // 1 KiB: the banks up to 8 ranks (8 KiB in all)
  EXPECT_EQ(mccl::board_algorithm(op, 4, 16384, 262144, ""), "board");
  EXPECT_EQ(mccl::board_algorithm(op, 8, 16384, 262144, ""), "board");
  EXPECT_EQ(mccl::board_algorithm(op, 16, 16384, 262144, ""), "board_rs") << "16 KiB in all";
  EXPECT_EQ(mccl::board_algorithm(op, 32, 16384, 262144, ""), "board_rs");
  EXPECT_EQ(mccl::board_algorithm(op, 32, 16384, 0, ""), "board") << "no stage: the banks";
  op.count = 1024; // 4 KiB
  EXPECT_EQ(mccl::board_algorithm(op, 2, 16384, 262144, ""), "board") << "two ranks keep the banks";
  EXPECT_EQ(mccl::board_algorithm(op, 3, 16384, 262144, ""), "board") << "12 KiB in all";
  EXPECT_EQ(mccl::board_algorithm(op, 4, 16384, 262144, ""), "board_rs") << "16 KiB in all";
  op.count = 4096; // 16 KiB: 2 ranks keep the banks, 4 take the stage
  EXPECT_EQ(mccl::board_algorithm(op, 2, 16384, 262144, ""), "board");
  EXPECT_EQ(mccl::board_algorithm(op, 4, 16384, 262144, ""), "board_rs");
  op.count = 16384; // 64 KiB
  EXPECT_EQ(mccl::board_algorithm(op, 2, 16384, 262144, ""), "") << "two ranks: the engine's direct exchange";
  EXPECT_EQ(mccl::board_algorithm(op, 2, 16384, 262144, "board_rs"), "board_rs") << "unless MCCL_ALGO names it";
  EXPECT_EQ(mccl::board_algorithm(op, 3, 16384, 262144, ""), "board_rs");
  EXPECT_EQ(mccl::board_algorithm(op, 4, 16384, 0, ""), "") << "no stage: the engine";
  EXPECT_EQ(mccl::board_algorithm(op, 4, 16384, 262144, "ring"), "") << "MCCL_ALGO names another";
  op.count = std::size_t{16} << 20; // 64 MiB: still the stage, in pieces
  EXPECT_EQ(mccl::board_algorithm(op, 4, 16384, 262144, ""), "board_rs");
  op.count = 256;
  EXPECT_EQ(mccl::board_algorithm(op, 4, 16384, 262144, "board_rs"), "board_rs") << "named: every size";
  op.kind = mccl::op_kind::reduce; // the same rule: a reduce-scatter and a gather to the root
  EXPECT_EQ(mccl::board_algorithm(op, 4, 16384, 262144, ""), "board");
  EXPECT_EQ(mccl::board_algorithm(op, 16, 16384, 262144, ""), "board_rs") << "16 KiB in all";
}

TEST(BoardStage, TheTableTakesItAboveTheBanksForBroadcastAllgatherAndReduceScatter) {
  mccl::op_request op;
  op.type = dtype::float32;
  for (auto kind : {mccl::op_kind::broadcast, mccl::op_kind::allgather}) {
    op.kind = kind;
    op.count = 1024; // 4 KiB a rank: the banks, whatever the world
    EXPECT_EQ(mccl::board_algorithm(op, 32, 16384, 262144, ""), "board") << mccl::to_string(kind);
    op.count = 16384; // 64 KiB a rank: the stage
    EXPECT_EQ(mccl::board_algorithm(op, 4, 16384, 262144, ""), "board_stage") << mccl::to_string(kind);
    EXPECT_EQ(mccl::board_algorithm(op, 4, 16384, 0, ""), "") << "no stage: the engine";
    EXPECT_EQ(mccl::board_algorithm(op, 4, 16384, 262144, "board_rs"), "") << "not its staged algorithm";
    EXPECT_EQ(mccl::board_algorithm(op, 4, 16384, 262144, "ring"), "") << "MCCL_ALGO names another";
    op.count = 16;
    EXPECT_EQ(mccl::board_algorithm(op, 4, 16384, 262144, "board_stage"), "board_stage") << "named: every size";
  }
  op.kind = mccl::op_kind::reduce_scatter;
  op.count = 1024; // 4 KiB blocks: 4 ranks' 16 KiB fit the banks, 8 ranks' 32 KiB do not
  EXPECT_EQ(mccl::board_algorithm(op, 4, 16384, 262144, ""), "board");
  EXPECT_EQ(mccl::board_algorithm(op, 8, 16384, 262144, ""), "board_stage");
  op.type = dtype::float64;
  EXPECT_EQ(mccl::board_algorithm(op, 64, 16384, 256, ""), "") << "a stage bank too small for an element of each block";
  op.kind = mccl::op_kind::alltoall;
  EXPECT_EQ(mccl::board_algorithm(op, 4, 16384, 262144, ""), "") << "no staged alltoall";
  op.type = dtype::float32;
  op.kind = mccl::op_kind::broadcast;
  op.count = 1025;
  EXPECT_EQ(mccl::board_ops(op, 4, 4096, "board_stage"), 2u) << "1024 floats a piece";
  EXPECT_EQ(mccl::board_ops(op, 4, 4096, "board"), 1u);
  op.kind = mccl::op_kind::reduce_scatter; // 4096 / 4 ranks: 256 floats of each block a piece
  EXPECT_EQ(mccl::board_stage_piece(op, 4, 4096), 256u);
  EXPECT_EQ(mccl::board_ops(op, 4, 4096, "board_stage"), 5u);
  EXPECT_EQ(mccl::board_stage_piece(op, 3, 4096), 1344u / 4) << "1365 bytes cut at 64";
}

TEST(BoardRs, EveryDtypeAndReductionGivesTheRankOrderBitsOn2348Ranks) {
  // 4 KiB stage banks: 1023 and 4099 elements are several pieces for most
  // dtypes, and none of the counts is a multiple of the rank count.
  constexpr std::size_t stage = 4096;
  const std::size_t counts[] = {1, 7, 13, 1023, 4099, 2048};
  for (int world : {2, 3, 4, 8}) {
    board_views b(world, 256, stage);
    uint64_t n = 0, seq = 0;
    for (auto t : every_dtype)
      for (auto op : every_redop) {
        if (!mccl::check_reduction(op, t).empty())
          continue;
        for (auto count : counts)
          for (bool in_place : {false, true}) {
            auto bytes = count * mccl::dtype_size(t);
            std::vector<std::vector<uint8_t>> in(static_cast<std::size_t>(world), std::vector<uint8_t>(bytes));
            std::vector<std::vector<uint8_t>> out(static_cast<std::size_t>(world), std::vector<uint8_t>(bytes, 0xee));
            for (int r = 0; r < world; ++r)
              fill(t, in[static_cast<std::size_t>(r)].data(), count, r);
            // The reference: rank order 0..n-1 with the same kernels.
            std::vector<uint8_t> expect(bytes);
            mccl::reduce3(op, t, expect.data(), in[0].data(), in[1].data(), count);
            for (int r = 2; r < world; ++r)
              mccl::reduce(op, t, expect.data(), in[static_cast<std::size_t>(r)].data(), count);
            if (op == redop::avg)
              mccl::finish_avg(t, expect.data(), count, world);
            auto outcomes = run_ranks(b, world, [&](int r, shm_board& board) {
              mccl::op_request req;
              req.type = t;
              req.op = op;
              req.count = count;
              auto& mine = in[static_cast<std::size_t>(r)];
              req.send = mine.data();
              req.recv = in_place ? mine.data() : out[static_cast<std::size_t>(r)].data();
              return mccl::run_board_rs(req, call_for(board, world, n, seq));
            });
            n += mccl::board_rs_ops(count, mccl::dtype_size(t), stage);
            ++seq;
            for (int r = 0; r < world; ++r) {
              auto what = std::string(mccl::to_string(t)) + " " + mccl::to_string(op) + " count " + std::to_string(count)
                          + (in_place ? " in place" : "") + ", rank " + std::to_string(r) + " of "
                          + std::to_string(world);
              ASSERT_EQ(outcomes[static_cast<std::size_t>(r)].code, errc::none)
                << what << ": " << outcomes[static_cast<std::size_t>(r)].message;
              const auto& got = in_place ? in[static_cast<std::size_t>(r)] : out[static_cast<std::size_t>(r)];
              ASSERT_TRUE(got == expect) << what;
            }
          }
      }
  }
}

TEST(BoardRs, ARankGoneMidOpIsNamedAndNobodyHangs) {
  // Rank 1 of 3 stages its first piece and is gone: the others end at the
  // communicator's verdict (a lost link, as closed() reports it), naming
  // the rank they waited on, the piece and the phase.
  constexpr int world = 3;
  constexpr std::size_t stage = 4096;
  board_views b(world, 256, stage);
  std::vector<float> data(3000, 1.0f); // 3 pieces
  std::atomic<bool> lost{false};
  auto t0 = std::chrono::steady_clock::now();
  auto outcomes = run_ranks(b, world, [&](int r, shm_board& board) -> board_outcome {
    mccl::op_request req;
    std::vector<float> mine(data), out(data.size());
    req.count = mine.size();
    req.send = mine.data();
    req.recv = out.data();
    if (r == 1) {
      std::memcpy(board.stage_of(1, 0), mine.data(), stage);
      return post_first_piece_and_go(board, req, world, lost);
    }
    return mccl::run_board_rs(req, call_closing_when_lost(board, world, lost, 1));
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  for (int r : {0, 2}) {
    const auto& o = outcomes[static_cast<std::size_t>(r)];
    EXPECT_EQ(o.code, errc::peer_lost);
    EXPECT_NE(o.message.find("lost rank 1"), std::string::npos) << o.message;
    EXPECT_NE(o.where.find("waiting on rank 1"), std::string::npos) << o.where;
    EXPECT_NE(o.where.find("board_rs piece 2 of 3"), std::string::npos) << o.where;
  }
}

TEST(BoardRs, ASilentRankEndsTheWaitAtTheDeadline) {
  constexpr int world = 2;
  board_views b(world, 256, 4096);
  std::vector<float> in(100, 1.0f), out(100);
  mccl::op_request req;
  req.count = in.size();
  req.send = in.data();
  req.recv = out.data();
  auto t0 = std::chrono::steady_clock::now();
  auto o = mccl::run_board_rs(req, call_for(*b.ranks[0], world, 0, 0, 200ms));
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(o.code, errc::timeout);
  EXPECT_NE(o.where.find("waiting on rank 1"), std::string::npos) << o.where;
  EXPECT_GE(took, 200ms);
  EXPECT_LT(took, 3s);
}

TEST(BoardRs, AnotherCollectiveAtTheSameSeqIsADesync) {
  constexpr int world = 2;
  board_views b(world, 256, 4096);
  std::vector<float> in(2000, 1.0f), out(2000);
  auto outcomes = run_ranks(b, world, [&](int r, shm_board& board) {
    mccl::op_request req;
    req.count = r == 0 ? in.size() : in.size() - 1; // rank 1 issued another count
    req.send = in.data();
    req.recv = out.data();
    return mccl::run_board_rs(req, call_for(board, world, 0, 0, 5000ms));
  });
  for (const auto& o : outcomes) {
    EXPECT_EQ(o.code, errc::desync);
    EXPECT_NE(o.message.find("issued different collectives"), std::string::npos) << o.message;
  }
}

namespace {

/// One board_stage (or board_rs, for a reduce) op of `kind` on every rank
/// of `b`, checked against a reference made on one thread from the same
/// inputs; `what` names the case in failures.
void expect_staged_matches_reference(board_views& b, int world, mccl::op_kind kind, dtype t, redop op, int root,
                                     std::size_t count, bool in_place, uint64_t& n, uint64_t& seq,
                                     void (*fill_input)(dtype, void*, std::size_t, int) = fill) {
  auto elem = mccl::dtype_size(t);
  auto bytes = count * elem;
  auto w = static_cast<std::size_t>(world);
  bool reduce_scatter = kind == mccl::op_kind::reduce_scatter;
  bool gathered = kind == mccl::op_kind::allgather;
  auto in_bytes = reduce_scatter ? bytes * w : bytes;
  auto out_bytes = gathered ? bytes * w : bytes;
  // Each rank's input, and a buffer for its output (the input's own
  // buffer, in place: a reduce_scatter's output is its block, an
  // allgather's input is its block of the output).
  std::vector<std::vector<uint8_t>> in(w, std::vector<uint8_t>(in_bytes));
  std::vector<std::vector<uint8_t>> out(w, std::vector<uint8_t>(out_bytes, 0xee));
  for (int r = 0; r < world; ++r) {
    auto& mine = in[static_cast<std::size_t>(r)];
    fill_input(t, mine.data(), in_bytes / elem, r);
    if (in_place && gathered)
      std::memcpy(out[static_cast<std::size_t>(r)].data() + static_cast<std::size_t>(r) * bytes, mine.data(), bytes);
  }
  std::vector<uint8_t> expect(out_bytes);
  auto reduced = [&](std::size_t block, uint8_t* into) {
    auto at = block * bytes;
    mccl::reduce3(op, t, into, in[0].data() + at, in[1].data() + at, count);
    for (std::size_t r = 2; r < w; ++r)
      mccl::reduce(op, t, into, in[r].data() + at, count);
    if (op == redop::avg)
      mccl::finish_avg(t, into, count, world);
  };
  switch (kind) {
    case mccl::op_kind::broadcast:
      expect = in[static_cast<std::size_t>(root)];
      break;
    case mccl::op_kind::allgather:
      for (std::size_t r = 0; r < w; ++r)
        std::memcpy(expect.data() + r * bytes, in[r].data(), bytes);
      break;
    default: // reduce; reduce_scatter, every rank's block (before an in-place run overwrites its input)
      if (count > 0)
        reduced(0, expect.data());
  }
  std::vector<std::vector<uint8_t>> blocks(reduce_scatter ? w : 0, std::vector<uint8_t>(bytes));
  for (std::size_t r = 0; r < blocks.size() && count > 0; ++r)
    reduced(r, blocks[r].data());
  auto outcomes = run_ranks(b, world, [&](int r, shm_board& board) {
    mccl::op_request req;
    req.kind = kind;
    req.type = t;
    req.op = op;
    req.root = root;
    req.count = count;
    auto& mine = in[static_cast<std::size_t>(r)];
    auto& result = out[static_cast<std::size_t>(r)];
    auto ur = static_cast<std::size_t>(r);
    req.send = in_place && gathered ? result.data() + ur * bytes : mine.data();
    req.recv = !in_place       ? result.data()
               : reduce_scatter ? mine.data() + ur * bytes
               : gathered       ? result.data()
                                : mine.data();
    auto call = call_for(board, world, n, seq);
    return kind == mccl::op_kind::reduce ? mccl::run_board_rs(req, call) : mccl::run_board_stage(req, call);
  });
  mccl::op_request counted;
  counted.kind = kind;
  counted.type = t;
  counted.count = count;
  n += mccl::board_ops(counted, world, b.ranks[0]->stage_bytes(),
                       kind == mccl::op_kind::reduce ? "board_rs" : "board_stage");
  ++seq;
  for (int r = 0; r < world; ++r) {
    auto ur = static_cast<std::size_t>(r);
    auto what = std::string(mccl::to_string(kind)) + " " + mccl::to_string(t) + " " + mccl::to_string(op) + " root "
                + std::to_string(root) + " count " + std::to_string(count) + (in_place ? " in place" : "") + ", rank "
                + std::to_string(r) + " of " + std::to_string(world);
    ASSERT_EQ(outcomes[ur].code, errc::none) << what << ": " << outcomes[ur].message;
    std::vector<uint8_t> got;
    if (in_place && !gathered) {
      auto at = reduce_scatter ? ur * bytes : 0;
      got = std::vector<uint8_t>(in[ur].data() + at, in[ur].data() + at + bytes);
    } else {
      got = out[ur];
    }
    if (reduce_scatter) {
      ASSERT_TRUE(got == blocks[ur]) << what;
    } else if (kind == mccl::op_kind::reduce && r != root) {
      // Only the root's output is written.
      if (!in_place) {
        ASSERT_TRUE(got == std::vector<uint8_t>(out_bytes, 0xee)) << what << ": a non-root's output was written";
      }
    } else {
      ASSERT_TRUE(got == expect) << what;
    }
  }
}

} // namespace

TEST(BoardStage, EveryKindMatchesTheReferenceOn2348RanksInPiecesInPlaceOrNot) {
  // 4 KiB stage banks: 1023 and 4099 elements are several pieces, and a
  // reduce_scatter's pieces are 1/world of a bank per block.
  constexpr std::size_t stage = 4096;
  const std::size_t counts[] = {1, 7, 1023, 4099};
  const dtype types[] = {dtype::float32, dtype::float16, dtype::int8, dtype::float64};
  for (int world : {2, 3, 4, 8}) {
    board_views b(world, 256, stage);
    uint64_t n = 0, seq = 0;
    for (auto count : counts)
      for (bool in_place : {false, true}) {
        for (int root : {0, world - 1})
          expect_staged_matches_reference(b, world, mccl::op_kind::broadcast, dtype::float32, redop::sum, root, count,
                                          in_place, n, seq);
        for (auto t : types) {
          expect_staged_matches_reference(b, world, mccl::op_kind::allgather, t, redop::sum, 0, count, in_place, n,
                                          seq);
          for (auto op : {redop::sum, redop::max, redop::avg}) {
            if (!mccl::check_reduction(op, t).empty())
              continue;
            expect_staged_matches_reference(b, world, mccl::op_kind::reduce_scatter, t, op, 0, count, in_place, n,
                                            seq);
            expect_staged_matches_reference(b, world, mccl::op_kind::reduce, t, op, world - 1, count, in_place, n,
                                            seq);
          }
        }
      }
  }
}

TEST(BoardStage, SixteenRanksReduceWhatTheyPrefetchedInRankOrder) {
  // 64 KiB stage banks among 16 ranks: 4 KiB of each bank per reduction,
  // where the ranks ask for every bank before they read (prefetch_stage_reads),
  // each from its own rank's on; the sums must still be in rank order.
  constexpr int world = 16;
  constexpr std::size_t stage = 64 << 10;
  ASSERT_TRUE(mccl::prefetch_stage_reads(world, stage / world));
  board_views b(world, 256, stage);
  uint64_t n = 0, seq = 0;
  for (std::size_t count : {1024, 3000}) // one piece; three, the last one shorter
    for (bool in_place : {false, true})
      for (auto t : {dtype::float32, dtype::float64})
        for (auto op : {redop::sum, redop::avg}) {
          expect_staged_matches_reference(b, world, mccl::op_kind::reduce_scatter, t, op, 0, count, in_place, n,
                                          seq, fill_order_sensitive);
          expect_staged_matches_reference(b, world, mccl::op_kind::reduce, t, op, 3, count * world, in_place, n,
                                          seq, fill_order_sensitive);
        }
}

TEST(BoardStage, PrefetchingTheStageOnlyWhereItMeasuredFaster) {
  EXPECT_TRUE(mccl::prefetch_stage_reads(16, 2048));
  EXPECT_TRUE(mccl::prefetch_stage_reads(32, 8192));
  EXPECT_TRUE(mccl::prefetch_stage_reads(16, 16384));
  EXPECT_FALSE(mccl::prefetch_stage_reads(16, 1024)) << "1 KiB a bank: allreduce slower";
  EXPECT_FALSE(mccl::prefetch_stage_reads(32, 32768)) << "1 MiB ops: no gain";
  EXPECT_FALSE(mccl::prefetch_stage_reads(2, 4096)) << "2 ranks: slower";
  EXPECT_FALSE(mccl::prefetch_stage_reads(8, 4096)) << "8 ranks: not measured";
  EXPECT_FALSE(mccl::prefetch_stage_reads(64, 4096)) << "64 ranks: slower";
}

TEST(BoardStage, ARankGoneMidBroadcastIsNamedWithItsPiece) {
  constexpr int world = 3;
  constexpr std::size_t stage = 4096;
  board_views b(world, 256, stage);
  std::vector<float> data(2500, 1.0f); // 3 pieces
  std::atomic<bool> lost{false};
  auto outcomes = run_ranks(b, world, [&](int r, shm_board& board) -> board_outcome {
    mccl::op_request req;
    req.kind = mccl::op_kind::broadcast;
    std::vector<float> mine(data);
    req.count = mine.size();
    req.send = req.recv = mine.data();
    if (r == 2) // not the root: nothing to stage
      return post_first_piece_and_go(board, req, world, lost);
    return mccl::run_board_stage(req, call_closing_when_lost(board, world, lost, 2));
  });
  for (int r : {0, 1}) {
    const auto& o = outcomes[static_cast<std::size_t>(r)];
    EXPECT_EQ(o.code, errc::peer_lost);
    EXPECT_NE(o.where.find("board_stage piece 2 of 3"), std::string::npos) << o.where;
    EXPECT_NE(o.where.find("waiting on rank 2"), std::string::npos) << o.where;
  }
}
