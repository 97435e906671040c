// Faults on chunk messages (collectives/engine/chunk_faults.hpp) without an engine:
// which frames go on, when, in what order, and what the report says; and
// the ledger that lets an op tell a copy from a first arrival.

#include "collectives/engine/chunk_faults.hpp"
#include "collectives/engine/chunk_ledger.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using clock_type = mccl::chunk_faults::clock;
using mccl::transport::received_frame;

received_frame frame(int peer, uint64_t seq, uint32_t step, uint32_t chunk) {
  received_frame f;
  f.peer = peer;
  f.header.kind = mccl::wire::frame_kind::data;
  f.header.seq = seq;
  f.header.step = step;
  f.header.chunk = chunk;
  return f;
}

/// The scenario's gate for rank 0, and what it passed on, as "seq.step.chunk".
struct gate {
  explicit gate(const std::string& json)
    : scenario(mccl::transport::parse_fault_scenario(json, "t")),
      recorder(std::make_shared<mccl::transport::fault_recorder>(0, "t", 1, "/nonexistent/x")),
      faults(mccl::chunk_faults::make(scenario, 0, recorder, start)) {}

  void admit(received_frame f, clock_type::duration at = {}) {
    faults->admit(std::move(f), start + at, pass);
  }

  mccl::transport::fault_scenario scenario;
  std::shared_ptr<mccl::transport::fault_recorder> recorder;
  clock_type::time_point start = clock_type::now();
  std::unique_ptr<mccl::chunk_faults> faults;
  std::vector<std::string> passed;
  mccl::chunk_faults::pass_fn pass = [this](received_frame f) {
    passed.push_back(std::to_string(f.header.seq) + "." + std::to_string(f.header.step) + "."
                     + std::to_string(f.header.chunk));
  };
};

TEST(ChunkFaults, NoneForARankTheyDoNotReach) {
  auto s = mccl::transport::parse_fault_scenario(
    R"({"faults": [{"kind": "drop", "on": "chunk", "link": "0->1"}, {"kind": "drop", "link": "1->0"}]})", "t");
  EXPECT_EQ(mccl::chunk_faults::make(s, 0, nullptr, clock_type::now()), nullptr);
  EXPECT_NE(mccl::chunk_faults::make(s, 1, nullptr, clock_type::now()), nullptr);
}

TEST(ChunkFaults, DropsDuplicatesAndFiltersBySeqAndSender) {
  gate g(R"({"faults": [{"kind": "drop", "on": "chunk", "link": "1->0", "seq": 2},
                        {"kind": "duplicate", "on": "chunk", "link": "2->*", "count": 2}]})");
  g.admit(frame(1, 1, 0, 0)); // seq 1: passes
  g.admit(frame(1, 2, 0, 0)); // dropped
  g.admit(frame(1, 2, 0, 1)); // the drop fired once already
  g.admit(frame(2, 3, 0, 0)); // twice
  g.admit(frame(2, 3, 0, 1)); // twice
  g.admit(frame(2, 3, 0, 2)); // count 2 reached
  EXPECT_EQ(g.passed, (std::vector<std::string>{"1.0.0", "2.0.1", "3.0.0", "3.0.0", "3.0.1", "3.0.1", "3.0.2"}));
  EXPECT_EQ(g.recorder->fault_count(), 3u);
  auto text = g.recorder->text();
  EXPECT_NE(text.find("chunk_drop  peer 1  seq 2 step 0 chunk 0"), std::string::npos) << text;
  EXPECT_NE(text.find("chunk_duplicate  peer 2  seq 3 step 0 chunk 1"), std::string::npos) << text;
}

TEST(ChunkFaults, DelayHoldsAChunkUntilItIsDue) {
  using namespace std::chrono_literals;
  gate g(R"({"faults": [{"kind": "delay", "on": "chunk", "link": "*->*", "ms": 30, "chunk": 0}]})");
  g.admit(frame(1, 5, 0, 0));
  g.admit(frame(1, 5, 0, 1)); // not held behind it
  EXPECT_EQ(g.passed, (std::vector<std::string>{"5.0.1"}));
  EXPECT_EQ(g.faults->next_due(), g.start + 30ms);
  g.faults->release_due(g.start + 29ms, g.pass);
  EXPECT_EQ(g.passed.size(), 1u);
  g.faults->release_due(g.start + 30ms, g.pass);
  EXPECT_EQ(g.passed, (std::vector<std::string>{"5.0.1", "5.0.0"}));
  EXPECT_EQ(g.faults->next_due(), clock_type::time_point::max());
}

TEST(ChunkFaults, ReorderSwapsWithTheNextChunkOfTheSameOp) {
  using namespace std::chrono_literals;
  gate g(R"({"faults": [{"kind": "reorder", "on": "chunk", "link": "*->*", "seq": 7, "count": 0, "chunk": 0}]})");
  g.admit(frame(1, 7, 0, 0)); // held
  g.admit(frame(1, 8, 0, 1)); // another op: passes, the held one waits on
  g.admit(frame(2, 7, 0, 1)); // the same op: passes, then the held one
  EXPECT_EQ(g.passed, (std::vector<std::string>{"8.0.1", "7.0.1", "7.0.0"}));
  g.admit(frame(1, 7, 1, 0)); // held; nothing of op 7 follows: goes alone
  g.faults->release_due(g.start + mccl::chunk_faults::reorder_wait, g.pass);
  EXPECT_EQ(g.passed.back(), "7.1.0");
}

TEST(ChunkFaults, ClearForgetsHeldChunks) {
  gate g(R"({"faults": [{"kind": "delay", "on": "chunk", "link": "*->*", "ms": 5}]})");
  g.admit(frame(1, 1, 0, 0));
  g.faults->clear();
  g.faults->release_due(clock_type::time_point::max(), g.pass);
  EXPECT_TRUE(g.passed.empty());
}

TEST(ChunkFaults, ProbabilityDrawsDependOnlyOnSeedAndChunk) {
  auto hits = [](uint64_t seed) {
    gate g(R"({"seed": )" + std::to_string(seed)
           + R"(, "faults": [{"kind": "drop", "on": "chunk", "link": "*->*", "probability": 0.5, "count": 0}]})");
    for (uint32_t c = 0; c < 64; ++c)
      g.admit(frame(1, 0, 0, c));
    return g.passed;
  };
  EXPECT_EQ(hits(3), hits(3));
  EXPECT_NE(hits(3), hits(4));
  auto n = hits(3).size();
  EXPECT_GT(n, 16u);
  EXPECT_LT(n, 48u);
}

TEST(ChunkLedger, TellsACopyFromAFirstArrival) {
  mccl::chunk_ledger seen;
  for (int peer = 0; peer < 4; ++peer)
    for (uint32_t step = 0; step < 10; ++step)
      for (uint32_t chunk = 0; chunk < 50; ++chunk)
        ASSERT_TRUE(seen.first_time(peer, step, chunk));
  for (int peer = 0; peer < 4; ++peer)
    for (uint32_t step = 0; step < 10; ++step)
      for (uint32_t chunk = 0; chunk < 50; ++chunk)
        ASSERT_FALSE(seen.first_time(peer, step, chunk));
  EXPECT_TRUE(seen.first_time(0, 0xFFFFFFFFu, 0)); // an ack
  EXPECT_FALSE(seen.first_time(0, 0xFFFFFFFFu, 0));
}

} // namespace
