// The op session's protocol around an algorithm (collectives/op_session.hpp),
// driven by hand: a copy of a chunk that arrives after the algorithm had all
// it expected (its own sends still in flight, so the op is not reported yet)
// fails the op naming the chunk and the peer; it never reaches the finished
// algorithm, which may have released its state.

#include "collectives/builtin.hpp"
#include "collectives/op_session.hpp"

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

} // namespace

TEST(OpSession, ACopyOfAChunkAfterTheAlgorithmFinishedFailsTheOpNamingIt) {
  float in = 1.0f, out = 0.0f;
  collective_args a;
  a.rank = 0;
  a.world = 2;
  a.op.kind = op_kind::allreduce;
  a.op.send = &in;
  a.op.recv = &out;
  a.op.count = 1;
  a.op.seq = 30;
  recording_session s(a, 7, "oneshot", builtin::make_allreduce_oneshot);
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
