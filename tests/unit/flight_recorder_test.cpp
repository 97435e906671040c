// The flight recorder keeps the last N ops with their state, tracks the
// last enqueued and completed sequence numbers beyond its window, and dumps
// one readable line per op.
#include "collectives/observability/flight_recorder.hpp"

#include <gtest/gtest.h>

#include <algorithm>

using mccl::flight_recorder;
using mccl::driver_kind;

namespace {

flight_recorder::op_info recorded_collective(uint64_t seq, std::size_t bytes = 1024) {
  flight_recorder::op_info info;
  info.kind = mccl::op_kind::allreduce;
  info.seq = seq;
  info.bytes = bytes;
  info.algorithm = "ring";
  return info;
}

std::size_t lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

} // namespace

TEST(FlightRecorder, KeepsTheLastNOpsOldestFirst) {
  flight_recorder rec(3);
  for (uint64_t seq = 0; seq < 5; ++seq)
    rec.ended(rec.started(recorded_collective(seq)), flight_recorder::state::done);
  auto text = rec.dump(1, 9, "test");
  EXPECT_EQ(lines(text), 3u) << text;
  EXPECT_EQ(text.find("seq 1,"), std::string::npos) << text;
  auto s2 = text.find("allreduce seq 2, 1024 B, ring (driven by the op thread): done after");
  auto s4 = text.find("allreduce seq 4,");
  ASSERT_NE(s2, std::string::npos) << text;
  ASSERT_NE(s4, std::string::npos) << text;
  EXPECT_LT(s2, s4);
  EXPECT_NE(text.find("rank 1, communicator 9"), std::string::npos) << text;
}

TEST(FlightRecorder, TracksLastEnqueuedAndCompletedSeq) {
  flight_recorder rec(2);
  EXPECT_EQ(rec.progress_note(), "last enqueued seq none, last completed seq none");
  auto a = rec.started(recorded_collective(0));
  auto b = rec.started(recorded_collective(1));
  auto c = rec.started(recorded_collective(2));
  rec.ended(a, flight_recorder::state::done); // fell out of the window: ignored
  rec.ended(b, flight_recorder::state::done);
  rec.ended(c, flight_recorder::state::failed);
  EXPECT_EQ(rec.last_enqueued_seq(), 2u);
  EXPECT_EQ(rec.last_completed_seq(), 1u);
  EXPECT_EQ(rec.progress_note(), "last enqueued seq 2, last completed seq 1");
}

TEST(FlightRecorder, PointToPointDoesNotMoveTheCollectiveSeq) {
  flight_recorder rec(4);
  rec.ended(rec.started(recorded_collective(5)), flight_recorder::state::done);
  flight_recorder::op_info send;
  send.kind = mccl::op_kind::send;
  send.collective = false;
  send.peer = 2;
  send.tag = 7;
  send.seq = 40;
  rec.ended(rec.started(send), flight_recorder::state::done);
  EXPECT_EQ(rec.last_enqueued_seq(), 5u);
  EXPECT_EQ(rec.last_completed_seq(), 5u);
  EXPECT_NE(rec.dump(0, 0, "x").find("send to rank 2 message 40 tag 7, 0 B"), std::string::npos);
}

TEST(FlightRecorder, FirstOutcomeSticksAndAbortMarksRunningOps) {
  flight_recorder rec(4);
  auto failed = rec.started(recorded_collective(0));
  auto running = rec.started(recorded_collective(1));
  rec.ended(failed, flight_recorder::state::failed);
  rec.ended(failed, flight_recorder::state::done);
  rec.abort_running();
  rec.ended(running, flight_recorder::state::done);
  auto text = rec.dump(0, 0, "x");
  EXPECT_NE(text.find("seq 0, 1024 B, ring (driven by the op thread): failed after"), std::string::npos) << text;
  EXPECT_NE(text.find("seq 1, 1024 B, ring (driven by the op thread): aborted after"), std::string::npos) << text;
  EXPECT_EQ(rec.last_completed_seq(), std::nullopt);
}

TEST(FlightRecorder, RunningOpsShowHowLongTheyRun) {
  flight_recorder rec(4);
  auto info = recorded_collective(3);
  info.driver = driver_kind::caller;
  rec.started(info);
  EXPECT_NE(rec.dump(0, 0, "x").find("seq 3, 1024 B, ring (driven by the caller): running for"),
            std::string::npos);
}

TEST(FlightRecorder, ZeroCapacityKeepsNothing) {
  flight_recorder rec(0);
  rec.ended(rec.started(recorded_collective(0)), flight_recorder::state::done);
  EXPECT_NE(rec.dump(0, 0, "x").find(" off"), std::string::npos);
  EXPECT_EQ(rec.last_enqueued_seq(), 0u); // still counted for error messages
}
