// Fault scenarios (include/mccl/faults.hpp): every key parses, and every
// malformed file is refused with a message naming the file, the fault, the
// key and what is allowed. The files in examples/faults/ all parse.

#include <mccl/error.hpp>
#include <mccl/faults.hpp>

#include <gtest/gtest.h>

#include <dirent.h>

#include <string>

using namespace mccl::transport;

namespace {

std::string parse_error(const std::string& text) {
  try {
    parse_fault_scenario(text, "test.json");
  } catch (const mccl::error& e) {
    EXPECT_EQ(e.code(), mccl::errc::invalid_config);
    return e.message();
  }
  ADD_FAILURE() << "accepted: " << text;
  return {};
}

} // namespace

TEST(FaultScenario, ParsesEveryKindAndTrigger) {
  auto s = parse_fault_scenario(R"({"seed": 42, "note": "x", "faults": [
      {"kind": "corrupt", "link": "1->0", "seq": 3, "step": 1, "chunk": 2, "bits": 4,
       "probability": 0.5, "count": 0, "after_ms": 10},
      {"kind": "corrupt", "link": "*->2", "bytes": 8},
      {"kind": "drop", "link": "0->*"},
      {"kind": "delay", "link": "0->1", "ms": 20},
      {"kind": "duplicate", "link": "0->1"},
      {"kind": "reorder", "link": "0->1"},
      {"kind": "close", "link": "0->1", "seq": 9},
      {"kind": "stall", "link": "0->1", "after_ms": 100},
      {"kind": "crash", "rank": 2, "seq": 5, "exit_code": 7},
      {"kind": "freeze", "rank": 1, "after_ms": 300}]})",
                                "test.json");
  EXPECT_EQ(s.seed, 42u);
  ASSERT_EQ(s.faults.size(), 10u);
  const auto& c = s.faults[0];
  EXPECT_EQ(c.kind, fault_kind::corrupt);
  EXPECT_EQ(c.from, 1);
  EXPECT_EQ(c.to, 0);
  EXPECT_EQ(*c.seq, 3u);
  EXPECT_EQ(*c.step, 1u);
  EXPECT_EQ(*c.chunk, 2u);
  EXPECT_EQ(c.bits, 4u);
  EXPECT_EQ(c.bytes, 0u);
  EXPECT_DOUBLE_EQ(c.probability, 0.5);
  EXPECT_EQ(c.count, 0u);
  EXPECT_EQ(c.after_ms, 10u);
  EXPECT_EQ(s.faults[1].from, any_rank);
  EXPECT_EQ(s.faults[1].bytes, 8u);
  EXPECT_EQ(s.faults[1].bits, 0u);
  EXPECT_EQ(s.faults[2].to, any_rank);
  EXPECT_EQ(s.faults[2].count, 1u); // default: fires once
  EXPECT_EQ(s.faults[3].ms, 20u);
  EXPECT_FALSE(s.faults[7].seq.has_value());
  EXPECT_EQ(s.faults[8].kind, fault_kind::crash);
  EXPECT_EQ(s.faults[8].rank, 2);
  EXPECT_EQ(s.faults[8].exit_code, 7);
  EXPECT_EQ(s.faults[9].kind, fault_kind::freeze);
  EXPECT_FALSE(is_link_fault(fault_kind::freeze));
  EXPECT_TRUE(is_link_fault(fault_kind::stall));
}

TEST(FaultScenario, CorruptFlipsOneBitByDefault) {
  auto s = parse_fault_scenario(R"({"faults": [{"kind": "corrupt", "link": "0->1"}]})", "t");
  EXPECT_EQ(s.seed, 1u);
  EXPECT_EQ(s.faults.at(0).bits, 1u);
}

TEST(FaultScenario, ChunkFaultsTakeOnChunkAndAnOpKind) {
  auto s = parse_fault_scenario(R"({"faults": [
      {"kind": "drop", "on": "chunk", "link": "1->0", "seq": 4, "op": "allreduce"},
      {"kind": "delay", "on": "chunk", "link": "*->*", "ms": 30, "probability": 0.5, "count": 0},
      {"kind": "duplicate", "on": "chunk", "link": "0->1", "step": 1, "chunk": 2},
      {"kind": "reorder", "on": "chunk", "link": "0->1", "after_ms": 5},
      {"kind": "reorder", "on": "link", "link": "0->1"},
      {"kind": "drop", "link": "0->1"}]})",
                                "t");
  ASSERT_EQ(s.faults.size(), 6u);
  EXPECT_EQ(s.faults[0].on, fault_layer::chunk);
  EXPECT_EQ(*s.faults[0].op, "allreduce");
  EXPECT_EQ(s.faults[0].from, 1);
  EXPECT_EQ(s.faults[0].to, 0);
  EXPECT_EQ(s.faults[1].ms, 30u);
  EXPECT_EQ(s.faults[2].on, fault_layer::chunk);
  EXPECT_EQ(*s.faults[2].chunk, 2u);
  EXPECT_EQ(s.faults[4].on, fault_layer::link);
  EXPECT_EQ(s.faults[5].on, fault_layer::link); // the default
  EXPECT_FALSE(s.faults[5].op.has_value());
}

TEST(FaultScenario, MalformedFilesNameWhatIsWrong) {
  struct bad_case {
    const char* text;
    std::vector<const char*> wanted;
  };
  const bad_case cases[] = {
    {R"({"faults": [)", {"test.json", "not valid JSON"}},
    {R"([1, 2])", {"expected a JSON object"}},
    {R"({"faults": [], "sed": 1})", {"unknown key \"sed\""}},
    {R"({"seed": -1, "faults": []})", {"\"seed\" must be a non-negative integer"}},
    {R"({"faults": {}})", {"\"faults\" must be a list"}},
    {R"({"faults": [{"link": "0->1"}]})", {"fault #0", "\"kind\" is missing", "corrupt"}},
    {R"({"faults": [{"kind": "explode", "link": "0->1"}]})", {"unknown kind \"explode\"", "freeze"}},
    {R"({"faults": [{"kind": "drop"}]})", {"fault #0 (drop)", "\"link\" must be a link \"a->b\""}},
    {R"({"faults": [{"kind": "drop", "link": "0-1"}]})", {"\"link\"", "got \"0-1\""}},
    {R"({"faults": [{"kind": "drop", "link": "1->1"}]})", {"two different ranks"}},
    {R"({"faults": [{"kind": "drop", "link": "x->1"}]})", {"rank numbers"}},
    {R"({"faults": [{"kind": "delay", "link": "0->1"}]})", {"fault #0 (delay)", "\"ms\""}},
    {R"({"faults": [{"kind": "delay", "link": "0->1", "ms": -5}]})", {"\"ms\" must be", "got -5"}},
    {R"({"faults": [{"kind": "drop", "link": "0->1", "probability": 1.5}]})",
     {"\"probability\" must be a probability between 0 and 1", "got 1.5"}},
    {R"({"faults": [{"kind": "drop", "link": "0->1", "seq": "3"}]})", {"\"seq\" must be", "got \"3\""}},
    {R"({"faults": [{"kind": "corrupt", "link": "0->1", "bits": 1, "bytes": 2}]})", {"\"bytes\""}},
    {R"({"faults": [{"kind": "drop", "link": "0->1", "ms": 5}]})",
     {"unknown key \"ms\"", "this fault takes:"}},
    {R"({"faults": [{"kind": "crash", "link": "0->1"}]})", {"fault #0 (crash)", "\"rank\""}},
    {R"({"faults": [{"kind": "crash", "rank": 1, "exit_code": 0}]})", {"\"exit_code\" must be"}},
    {R"({"faults": [{"kind": "freeze", "rank": 1, "chunk": 2}]})", {"unknown key \"chunk\""}},
    {R"({"faults": [{"kind": "drop", "link": "0->1"}, 3]})", {"fault #1 must be a JSON object"}},
    {R"({"faults": [{"kind": "drop", "on": "op", "link": "0->1"}]})",
     {"fault #0 (drop)", "\"on\" must be \"link\"", "or \"chunk\"", "got \"op\""}},
    {R"({"faults": [{"kind": "corrupt", "on": "chunk", "link": "0->1"}]})",
     {"\"on\" must be \"link\" (only drop, delay, duplicate and reorder act on chunks)"}},
    {R"({"faults": [{"kind": "crash", "on": "chunk", "rank": 1}]})", {"unknown key \"on\""}},
    {R"({"faults": [{"kind": "drop", "on": "chunk", "link": "0->1", "op": "allreduse"}]})",
     {"\"op\" must be an op kind", "got \"allreduse\""}},
    {R"({"faults": [{"kind": "drop", "link": "0->1", "op": "allreduce"}]})", {"unknown key \"op\""}},
    {R"({"faults": [{"kind": "delay", "on": "chunk", "link": "0->1", "ms": 60001}]})",
     {"\"ms\" must be the delay in milliseconds (1..60000)"}},
    {R"({"faults": [{"kind": "crash", "rank": 2, "during": "shrunk"}]})",
     {"fault #0 (crash)", "\"during\" must be \"shrink\", \"grow\" or \"reconfigure\"", "got \"shrunk\""}},
    {R"({"faults": [{"kind": "freeze", "rank": 2, "during": 1}]})", {"fault #0 (freeze)", "\"during\" must be"}},
    {R"({"faults": [{"kind": "crash", "rank": 2, "during": "grow", "seq": 3}]})",
     {"\"seq\" must be absent when \"during\" is given (the fault fires inside the grow)"}},
    {R"({"faults": [{"kind": "crash", "rank": 2, "during": "shrink", "after_ms": 10}]})",
     {"\"after_ms\" must be absent when \"during\" is given"}},
    {R"({"faults": [{"kind": "drop", "link": "0->1", "during": "shrink"}]})", {"unknown key \"during\""}},
  };
  for (const auto& c : cases) {
    auto msg = parse_error(c.text);
    for (const char* w : c.wanted)
      EXPECT_NE(msg.find(w), std::string::npos) << "for " << c.text << "\nmessage: " << msg
                                                << "\nmissing: " << w;
  }
}

TEST(FaultScenario, RankFaultsFireDuringAMembershipChange) {
  auto s = parse_fault_scenario(R"({"faults": [
    {"kind": "crash", "rank": 2, "during": "shrink", "exit_code": 7},
    {"kind": "freeze", "rank": 5, "during": "grow"},
    {"kind": "crash", "rank": 0, "during": "reconfigure"},
    {"kind": "crash", "rank": 1, "seq": 4}]})", "t.json");
  ASSERT_EQ(s.faults.size(), 4u);
  EXPECT_EQ(s.faults[0].during, membership_change::shrink);
  EXPECT_EQ(s.faults[0].rank, 2);
  EXPECT_EQ(s.faults[0].exit_code, 7);
  EXPECT_EQ(s.faults[1].during, membership_change::grow);
  EXPECT_EQ(s.faults[1].kind, fault_kind::freeze);
  EXPECT_EQ(s.faults[2].during, membership_change::reconfigure);
  EXPECT_EQ(s.faults[3].during, membership_change::none);
  // A grow's newcomer has a rank past the job's size: not refused.
  EXPECT_NO_THROW(check_fault_ranks(s, 4));
  EXPECT_THROW(check_fault_ranks(s, 1), mccl::error) << "fault #3 names rank 1";
}

TEST(FaultScenario, RanksOutsideTheJobAreRefused) {
  auto s = parse_fault_scenario(R"({"faults": [{"kind": "drop", "link": "0->3"}]})", "t.json");
  EXPECT_NO_THROW(check_fault_ranks(s, 4));
  try {
    check_fault_ranks(s, 2);
    ADD_FAILURE() << "rank 3 of 2 accepted";
  } catch (const mccl::error& e) {
    EXPECT_NE(e.message().find("names rank 3, but the job has ranks 0..1"), std::string::npos)
      << e.message();
  }
}

TEST(FaultScenario, MissingFileNamesTheSetting) {
  try {
    load_fault_scenario("/nonexistent/scenario.json");
    ADD_FAILURE();
  } catch (const mccl::error& e) {
    EXPECT_NE(e.message().find("MCCL_FAULTS=\"/nonexistent/scenario.json\""), std::string::npos)
      << e.message();
  }
}

TEST(FaultScenario, ShippedExamplesParse) {
  std::string dir = MCCL_SOURCE_DIR "/examples/faults";
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  int files = 0;
  while (auto* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 5 || name.substr(name.size() - 5) != ".json")
      continue;
    ++files;
    EXPECT_NO_THROW(load_fault_scenario(dir + "/" + name)) << name;
  }
  closedir(d);
  EXPECT_GE(files, 13); // one per fault kind, one per fault on chunks
}
