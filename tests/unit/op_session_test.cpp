// The op session's protocol around an algorithm (collectives/engine/op_session.hpp),
// driven by hand: a copy of a chunk that arrives after the algorithm had all
// it expected (its own sends still in flight, so the op is not reported yet)
// fails the op naming the chunk and the peer; it never reaches the finished
// algorithm, which may have released its state.

#include "collectives/algorithms/builtin.hpp"
#include "collectives/engine/op_session.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace mccl;

namespace {

/// A session whose frames go nowhere: it records what it emits and the
/// outcome it reports.
class recording_session final : public op_session {
public:
  using op_session::op_session;

  std::vector<wire::frame_header> emitted;
  int reports = 0;
  errc code = errc::none;
  std::string message;

private:
  void emit(int, const wire::frame_header& h, const uint8_t*, std::size_t) override {
    emitted.push_back(h);
  }
  void report(errc c, std::string m) override {
    ++reports;
    code = c;
    message = std::move(m);
  }
};

/// A frame rank `peer` would send for the same op: our own header (same
/// signature and seq) carrying `value`.
transport::received_frame frame_from(int peer, const wire::frame_header& ours, float value) {
  transport::received_frame f;
  f.peer = peer;
  f.header = ours;
  f.header.flags = 0;
  f.header.payload_len = sizeof value;
  f.buffer = std::shared_ptr<uint8_t>(new uint8_t[sizeof value], std::default_delete<uint8_t[]>());
  std::memcpy(f.buffer.get(), &value, sizeof value);
  return f;
}

/// An allreduce of the one float at `in` into `out`.
collective_args one_float_allreduce(int rank, int world, float* in, float* out) {
  collective_args a;
  a.rank = rank;
  a.world = world;
  a.op.kind = op_kind::allreduce;
  a.op.send = in;
  a.op.recv = out;
  a.op.count = 1;
  return a;
}

} // namespace

TEST(OpSession, ACopyOfAChunkAfterTheAlgorithmFinishedFailsTheOpNamingIt) {
  float in = 1.0f, out = 0.0f;
  auto a = one_float_allreduce(0, 2, &in, &out);
  recording_session s(a, 30, 7, "oneshot", builtin::make_allreduce_oneshot);
  s.start_op();
  ASSERT_EQ(s.emitted.size(), 1u);

  auto first = frame_from(1, s.emitted[0], 2.0f);
  s.deliver(first);
  EXPECT_EQ(out, 3.0f) << "the algorithm reduced both contributions";
  EXPECT_EQ(s.reports, 0) << "our own frame has not left yet";

  auto copy = frame_from(1, s.emitted[0], 2.0f);
  s.deliver(copy);
  ASSERT_EQ(s.reports, 1);
  EXPECT_EQ(s.code, errc::protocol_error);
  EXPECT_NE(s.message.find("duplicate chunk 0 of step 0 from rank 1"), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("allreduce seq 30 on rank 0"), std::string::npos) << s.message;

  s.frame_sent(1, 0, 0);
  EXPECT_EQ(s.reports, 1) << "the outcome is reported once";
}

// An engine with many peers reads the links its ops wait on next
// (algorithm::next_senders): recursive doubling names one partner per
// round, in order, then no one once every chunk is in.
TEST(OpSession, NextSendersFollowRecursiveDoublingRoundByRound) {
  float in = 5.0f, out = 0.0f;
  auto a = one_float_allreduce(5, 8, &in, &out);
  recording_session s(a, 3, 7, "rd", builtin::make_allreduce_rd);
  s.start_op();
  // Round k's partner is 5 xor 2^k; it sends the sum of its half so far.
  const int partner[] = {4, 7, 1};
  const float partial[] = {4.0f, 6.0f + 7.0f, 0.0f + 1.0f + 2.0f + 3.0f};
  for (int round = 0; round < 3; ++round) {
    std::vector<int> next;
    ASSERT_TRUE(s.next_senders(next));
    EXPECT_EQ(next, std::vector<int>{partner[round]}) << "round " << round;
    ASSERT_EQ(s.emitted.size(), static_cast<std::size_t>(round + 1));
    s.frame_sent(partner[round], s.emitted.back().step, s.emitted.back().chunk);
    auto f = frame_from(partner[round], s.emitted.back(), partial[round]);
    s.deliver(f);
  }
  std::vector<int> next;
  EXPECT_TRUE(s.next_senders(next));
  EXPECT_TRUE(next.empty()) << "every chunk is in";
  EXPECT_EQ(out, 28.0f);
  EXPECT_EQ(s.reports, 1);
  EXPECT_EQ(s.code, errc::none) << s.message;
}

TEST(OpSession, NextSendersOfTheDisseminationBarrierIsEachRoundsSender) {
  collective_args a;
  a.rank = 2;
  a.world = 8;
  a.op.kind = op_kind::barrier;
  recording_session s(a, 4, 7, "dissemination", builtin::make_barrier_dissemination);
  s.start_op();
  const int sender[] = {1, 0, 6}; // 2 - 2^k, modulo 8
  for (int round = 0; round < 3; ++round) {
    std::vector<int> next;
    ASSERT_TRUE(s.next_senders(next));
    EXPECT_EQ(next, std::vector<int>{sender[round]}) << "round " << round;
    transport::received_frame f;
    f.peer = sender[round];
    f.header = s.emitted.back();
    f.header.flags = 0;
    s.deliver(f);
  }
  EXPECT_FALSE(s.reports == 1 && s.code != errc::none) << s.message;
  std::vector<int> next;
  EXPECT_TRUE(s.next_senders(next));
  EXPECT_TRUE(next.empty());
}

TEST(OpSession, AnAlgorithmThatDoesNotSayLeavesNextSendersUnknown) {
  float in = 1.0f, out = 0.0f;
  auto a = one_float_allreduce(0, 4, &in, &out);
  recording_session s(a, 0, 7, "oneshot", builtin::make_allreduce_oneshot);
  s.start_op();
  std::vector<int> next;
  EXPECT_FALSE(s.next_senders(next)) << "the one-shot exchange does not implement it: every link is watched";
}
