// Point-to-point matching (collectives/engine/p2p_matcher.hpp) frame by frame, in
// arrival orders a stream from one peer cannot produce but the rule must
// survive: a later message's frames before an earlier one's, receives
// posted before, between and after.

#include "collectives/engine/p2p_matcher.hpp"

#include <gtest/gtest.h>

#include <vector>

using namespace mccl;

namespace {

transport::received_frame frame(uint64_t msg, uint32_t tag, uint32_t chunk = 0) {
  transport::received_frame f;
  f.peer = 0;
  f.header.seq = msg;
  f.header.aux = tag;
  f.header.chunk = chunk;
  f.header.payload_len = 40;
  return f;
}

} // namespace

// Control: in order, the first frame of message 0 completes the match.
TEST(P2PMatcher, InOrderTheFirstFrameMatchesTheReceive) {
  p2p_matcher m;
  EXPECT_TRUE(m.post(5, 101).empty());
  std::vector<p2p_matcher::match> matched;
  auto f = frame(0, 5);
  EXPECT_EQ(m.on_frame(f, &matched), 0u);
  ASSERT_EQ(matched.size(), 1u);
  EXPECT_EQ(matched[0].receiver, 101u);
  ASSERT_EQ(matched[0].frames.size(), 1u);
  EXPECT_EQ(matched[0].frames[0].header.seq, 0u);
  EXPECT_EQ(m.kept_bytes(), 0u);
}

// Message 1 arrives first. It has the receive's tag, but message 0 has not
// been seen, so it must wait; when message 0 arrives the receive takes
// message 0. A second receive then takes message 1; later frames of a
// matched message go straight to its receiver.
TEST(P2PMatcher, ALaterMessageArrivingFirstDoesNotOvertake) {
  p2p_matcher m;
  EXPECT_TRUE(m.post(5, 101).empty());
  std::vector<p2p_matcher::match> matched;
  auto late = frame(1, 5);
  EXPECT_EQ(m.on_frame(late, &matched), 0u);
  EXPECT_TRUE(matched.empty()) << "the receive took message 1 before message 0 was seen";
  EXPECT_TRUE(m.has_unclaimed(5));
  auto early = frame(0, 5);
  EXPECT_EQ(m.on_frame(early, &matched), 0u);
  ASSERT_EQ(matched.size(), 1u);
  EXPECT_EQ(matched[0].receiver, 101u);
  EXPECT_EQ(matched[0].frames[0].header.seq, 0u);
  auto second = m.post(5, 102);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].receiver, 102u);
  EXPECT_EQ(second[0].frames[0].header.seq, 1u);
  EXPECT_FALSE(m.has_unclaimed(5));
  auto more = frame(1, 5, 1);
  EXPECT_EQ(m.on_frame(more, &matched), 102u);
}

// Per tag: a message of another tag in between matches its own receive
// only; receives of one tag match in the order they were posted, whatever
// order the messages' frames came in.
TEST(P2PMatcher, TagsMatchIndependentlyAndReceivesInPostingOrder) {
  p2p_matcher m;
  std::vector<p2p_matcher::match> matched;
  for (uint64_t msg : {3u, 1u, 2u, 0u}) { // tags: 0->5, 1->9, 2->5, 3->5
    auto f = frame(msg, msg == 1 ? 9 : 5);
    m.on_frame(f, &matched);
  }
  EXPECT_TRUE(matched.empty()) << "nothing was posted";
  EXPECT_EQ(m.kept_bytes(), 4u * 40);
  auto a = m.post(5, 201);
  auto b = m.post(9, 202);
  auto c = m.post(5, 203);
  auto d = m.post(5, 204);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(c.size(), 1u);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(a[0].frames[0].header.seq, 0u);
  EXPECT_EQ(b[0].frames[0].header.seq, 1u);
  EXPECT_EQ(c[0].frames[0].header.seq, 2u);
  EXPECT_EQ(d[0].frames[0].header.seq, 3u);
  EXPECT_EQ(m.kept_bytes(), 0u);
}

// A receive that ended (its op failed) is forgotten: it never matches, and
// the next receive of its tag takes the message.
TEST(P2PMatcher, AForgottenReceiveNeverMatches) {
  p2p_matcher m;
  m.post(5, 301);
  EXPECT_EQ(m.waiting_receivers(), (std::vector<uint64_t>{301}));
  m.forget(301);
  EXPECT_TRUE(m.waiting_receivers().empty());
  std::vector<p2p_matcher::match> matched;
  auto f = frame(0, 5);
  m.on_frame(f, &matched);
  EXPECT_TRUE(matched.empty());
  auto next = m.post(5, 302);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].receiver, 302u);
}
