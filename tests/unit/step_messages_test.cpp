// The message inbox and outbox of step collectives
// (collectives/extension/message_inbox.hpp, message_outbox.hpp), driven by hand:
// frames joined into whole messages, held until asked for, handed over in
// step order; sends cut into frames, their memory released after the last.

#include "collectives/extension/message_inbox.hpp"
#include "collectives/extension/message_outbox.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

using namespace mccl;

namespace {

/// Frame `index` of a message from `peer` at `step`, its bytes in `keep`.
incoming_chunk frame(int peer, uint32_t step, uint32_t index, std::vector<uint8_t> bytes) {
  auto held = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  incoming_chunk c;
  c.peer = peer;
  c.step = step;
  c.chunk = index;
  c.data = held->data();
  c.len = held->size();
  c.keep = held;
  return c;
}

std::string text(const step_message& m) { return {m.data, m.data + m.bytes}; }

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

/// Records what a collective would put on the wire.
class recording_io final : public collective_io {
public:
  struct sent_frame {
    int peer;
    uint32_t step, chunk;
    std::string bytes;
  };
  std::vector<sent_frame> frames;
  void send(int peer, uint32_t step, uint32_t chunk, const void* data, std::size_t n) override {
    auto p = static_cast<const char*>(data);
    frames.push_back({peer, step, chunk, std::string(p, p + n)});
  }
  void send_block(int, uint32_t, uint32_t, const void*, std::size_t, uint64_t) override {}
  void finish() override {}
  void fail(errc, const std::string&) override {}
};

} // namespace

TEST(StepMessages, FramesAreJoinedAndHeldUntilAskedFor) {
  message_inbox in(4);
  in.add(frame(1, 0, 1, bytes("efg"))); // the second frame first, before the ask
  step_message m;
  EXPECT_FALSE(in.next(m));
  in.ask(1, 0, 7, nullptr, false, nullptr);
  EXPECT_FALSE(in.next(m)); // half of it is in
  in.add(frame(1, 0, 0, bytes("abcd")));
  ASSERT_TRUE(in.next(m));
  EXPECT_EQ(text(m), "abcdefg");
  EXPECT_EQ(m.peer, 1);
  in.release(m);
  EXPECT_FALSE(in.next(m));
}

TEST(StepMessages, ALaterStepWaitsForEveryMessageAskedForOfEarlierSteps) {
  message_inbox in(16);
  in.ask(1, 0, 1, nullptr, false, nullptr);
  in.ask(2, 0, 1, nullptr, false, nullptr);
  in.ask(1, 1, 1, nullptr, false, nullptr);
  in.add(frame(1, 1, 0, bytes("c"))); // step 1 complete first
  in.add(frame(2, 0, 0, bytes("b")));
  step_message m;
  ASSERT_TRUE(in.next(m));
  EXPECT_EQ(text(m), "b");
  in.release(m);
  EXPECT_FALSE(in.next(m)); // step 0 from rank 1 is still missing
  std::vector<int> peers;
  EXPECT_TRUE(in.waiting_on(peers));
  EXPECT_EQ(peers, std::vector<int>{1});
  EXPECT_EQ(in.waiting_for(), "the message of step 0 from rank 1 (0 of 1 frames in)");
  in.add(frame(1, 0, 0, bytes("a")));
  ASSERT_TRUE(in.next(m));
  EXPECT_EQ(text(m), "a");
  in.release(m);
  ASSERT_TRUE(in.next(m));
  EXPECT_EQ(text(m), "c");
}

TEST(StepMessages, AMessageIsAssembledAtTheDestinationNamed) {
  message_inbox in(2);
  char dst[5] = {};
  in.ask(3, 2, 5, reinterpret_cast<uint8_t*>(dst), false, nullptr);
  in.add(frame(3, 2, 2, bytes("e")));
  in.add(frame(3, 2, 0, bytes("ab")));
  in.add(frame(3, 2, 1, bytes("cd")));
  step_message m;
  ASSERT_TRUE(in.next(m));
  EXPECT_EQ(static_cast<const void*>(m.data), static_cast<void*>(dst));
  EXPECT_EQ(std::string(dst, 5), "abcde");
}

TEST(StepMessages, PartsAreHandedOutAsTheyComeInStepOrder) {
  message_inbox in(2);
  in.ask(1, 0, 1, nullptr, false, nullptr);
  in.ask(2, 1, 4, nullptr, true, nullptr);
  in.add(frame(2, 1, 1, bytes("cd"))); // a part of step 1 first: held
  step_message m;
  EXPECT_FALSE(in.next(m));
  in.add(frame(1, 0, 0, bytes("a")));
  ASSERT_TRUE(in.next(m));
  EXPECT_EQ(text(m), "a");
  in.release(m);
  ASSERT_TRUE(in.next(m));
  EXPECT_EQ(text(m), "cd");
  EXPECT_EQ(m.offset, 2u);
  EXPECT_FALSE(m.last);
  in.release(m);
  EXPECT_FALSE(in.next(m));
  in.add(frame(2, 1, 0, bytes("ab")));
  ASSERT_TRUE(in.next(m));
  EXPECT_EQ(text(m), "ab");
  EXPECT_EQ(m.offset, 0u);
  EXPECT_TRUE(m.last);
}

TEST(StepMessages, AFrameThatDoesNotFitOrComesTwiceIsAProtocolError) {
  message_inbox in(4);
  in.ask(1, 0, 6, nullptr, false, nullptr);
  try {
    in.add(frame(1, 0, 1, bytes("xyz"))); // the last frame holds 2 bytes
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::protocol_error);
    EXPECT_NE(std::string(e.what()).find("has 3 bytes, expected 2"), std::string::npos) << e.what();
  }
  in.add(frame(1, 0, 0, bytes("abcd")));
  EXPECT_THROW(in.add(frame(1, 0, 0, bytes("abcd"))), error);
  in.add(frame(2, 5, 0, bytes("h")));
  EXPECT_THROW(in.add(frame(2, 5, 0, bytes("h"))), error); // held twice
}

TEST(StepMessages, SendsAreCutIntoFramesAndTheirMemoryHeldUntilTheLastLeft) {
  recording_io io;
  message_outbox out(3);
  auto payload = std::make_shared<std::string>("abcdefg");
  std::weak_ptr<std::string> watch = payload;
  out.send(io, 2, 4, reinterpret_cast<const uint8_t*>(payload->data()), payload->size(), payload);
  payload.reset();
  ASSERT_EQ(io.frames.size(), 3u);
  EXPECT_EQ(io.frames[0].bytes, "abc");
  EXPECT_EQ(io.frames[2].bytes, "g");
  EXPECT_EQ(io.frames[2].chunk, 2u);
  out.sent(2, 4);
  out.sent(2, 4);
  EXPECT_FALSE(watch.expired());
  out.sent(2, 4);
  EXPECT_TRUE(watch.expired());
  EXPECT_THROW(out.send(io, 2, 4, nullptr, 0, nullptr), error); // one message per (peer, step)
  out.send(io, 2, 5, nullptr, 0, nullptr); // an empty message is one empty frame
  EXPECT_EQ(io.frames.back().bytes, "");
}
