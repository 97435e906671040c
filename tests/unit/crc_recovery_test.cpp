// CRC recovery bookkeeping (transport/crc_recovery.hpp) without any I/O: a
// sender and a receiver joined by a test "wire" that may corrupt frames.
// Every chunk ends up delivered once, intact and in stream order, or the
// receiver gives up after the retry budget naming why.

#include "transport/crc_recovery.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <set>

using namespace mccl;
using namespace mccl::transport;

namespace {

/// A frame as it travels: header and payload bytes.
struct wire_frame {
  wire::frame_header h;
  std::vector<uint8_t> payload;
};

received_frame arrive(const wire_frame& f) {
  std::shared_ptr<uint8_t> buf(new uint8_t[f.payload.size() + 1], std::default_delete<uint8_t[]>());
  if (!f.payload.empty())
    std::memcpy(buf.get(), f.payload.data(), f.payload.size());
  return received_frame{1, f.h, buf};
}

bool crc_ok(const wire_frame& f) {
  return wire::frame_crc(f.h, f.payload.data(), f.payload.size()) == f.h.crc;
}

wire_frame sent(const crc_sender::kept_frame& k) {
  return wire_frame{k.header, k.payload};
}

} // namespace

TEST(CrcRecovery, SenderKeepsCopiesUntilAcked) {
  crc_sender tx;
  std::vector<uint8_t> data(100, 7);
  wire::frame_header h;
  h.seq = 3;
  const auto& k0 = tx.keep(h, data.data(), data.size());
  data.assign(100, 9); // the caller reuses its buffer: the copy is unaffected
  EXPECT_EQ(k0.payload[0], 7);
  EXPECT_TRUE(k0.header.flags & wire::flag_crc);
  EXPECT_EQ(k0.index, 0u);
  tx.keep(h, data.data(), data.size());
  EXPECT_EQ(tx.kept_frames(), 2u);
  EXPECT_EQ(tx.kept_bytes(), 200u);
  std::string why;
  auto* again = tx.on_nack(1, &why);
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(again->header.flags & wire::flag_retransmit);
  EXPECT_TRUE(crc_ok(sent(*again))); // the CRC was redone for the new flags
  tx.on_ack(1);
  EXPECT_EQ(tx.kept_frames(), 1u);
  EXPECT_EQ(tx.on_nack(0, &why), nullptr);
  EXPECT_NE(why.find("already acknowledged"), std::string::npos) << why;
  EXPECT_EQ(tx.on_nack(5, &why), nullptr);
  EXPECT_NE(why.find("never sent"), std::string::npos) << why;
}

TEST(CrcRecovery, CorruptFramesAreRecoveredInStreamOrder) {
  // Frames 1 and 3 are corrupted once, frame 3 a second time on its
  // retransmission; everything arrives once, in order.
  crc_sender tx;
  crc_receiver rx(3);
  std::deque<wire_frame> wire_q;
  for (uint32_t i = 0; i < 6; ++i) {
    std::vector<uint8_t> data(64, static_cast<uint8_t>(i));
    wire::frame_header h;
    h.chunk = i;
    wire_q.push_back(sent(tx.keep(h, data.data(), data.size())));
  }
  std::map<uint32_t, int> corrupt_times{{1, 1}, {3, 2}};
  std::vector<uint32_t> delivered;
  int nacks = 0;
  while (!wire_q.empty()) {
    auto f = wire_q.front();
    wire_q.pop_front();
    auto& left = corrupt_times[f.h.chunk];
    if (left > 0) {
      --left;
      f.payload[10] ^= 0x40;
    }
    auto out = rx.on_frame(arrive(f), crc_ok(f));
    ASSERT_TRUE(out.fatal.empty()) << out.fatal;
    for (auto& c : out.deliver)
      delivered.push_back(c.header.chunk);
    for (auto n : out.nacks) {
      ++nacks;
      std::string why;
      auto* again = tx.on_nack(n, &why);
      ASSERT_NE(again, nullptr) << why;
      wire_q.push_back(sent(*again));
    }
    tx.on_ack(rx.delivered());
  }
  EXPECT_EQ(delivered, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(nacks, 3);
  EXPECT_EQ(rx.delivered(), 6u);
  EXPECT_EQ(rx.held(), 0u);
  EXPECT_EQ(tx.kept_frames(), 0u);
}

TEST(CrcRecovery, BudgetSpentIsFatal) {
  crc_sender tx;
  crc_receiver rx(2);
  std::vector<uint8_t> data(32, 1);
  auto f = sent(tx.keep(wire::frame_header{}, data.data(), data.size()));
  f.payload[0] ^= 1;
  auto out = rx.on_frame(arrive(f), false);
  ASSERT_EQ(out.nacks.size(), 1u);
  std::string why;
  for (int attempt = 1; attempt <= 2; ++attempt) {
    auto again = sent(*tx.on_nack(out.nacks.at(0), &why));
    again.payload[0] ^= 1; // corrupted every time
    out = rx.on_frame(arrive(again), false);
    if (attempt < 2) {
      EXPECT_TRUE(out.fatal.empty());
      EXPECT_EQ(out.nacks.size(), 1u);
    }
  }
  EXPECT_NE(out.fatal.find("after 2 retransmission(s) (MCCL_CRC_RETRIES=2)"), std::string::npos)
    << out.fatal;
}

TEST(CrcRecovery, NoRetriesMeansTheFirstMismatchIsFatal) {
  crc_receiver rx(0);
  wire_frame f;
  f.payload.assign(8, 0);
  auto out = rx.on_frame(arrive(f), false);
  EXPECT_NE(out.fatal.find("MCCL_CRC_RETRIES=0"), std::string::npos) << out.fatal;
}

TEST(CrcRecovery, UnrequestedRetransmissionIsFatal) {
  crc_receiver rx(3);
  wire_frame f;
  f.h.flags = wire::flag_crc | wire::flag_retransmit;
  auto out = rx.on_frame(arrive(f), true);
  EXPECT_NE(out.fatal.find("not asked for"), std::string::npos) << out.fatal;
}

TEST(CrcRecovery, SkippedFramesKeepTheNumberingAndAreNotDelivered) {
  crc_sender tx;
  crc_receiver rx(3);
  std::vector<uint8_t> data(16, 3);
  auto f0 = sent(tx.keep(wire::frame_header{}, data.data(), data.size()));
  auto f1 = sent(tx.keep(wire::frame_header{}, data.data(), data.size()));
  auto f2 = sent(tx.keep(wire::frame_header{}, data.data(), data.size()));
  f0.payload[0] ^= 1;
  auto out = rx.on_frame(arrive(f0), crc_ok(f0)); // corrupt: frame 0 nacked
  ASSERT_EQ(out.nacks, (std::vector<uint64_t>{0}));
  rx.skip();                                       // frame 1: its op ended while it was read
  out = rx.on_frame(arrive(f2), crc_ok(f2));        // frame 2 waits behind frame 0
  EXPECT_TRUE(out.deliver.empty());
  std::string why;
  auto again = sent(*tx.on_nack(0, &why));
  out = rx.on_frame(arrive(again), crc_ok(again));
  ASSERT_EQ(out.deliver.size(), 2u);               // frames 0 and 2, not 1
  EXPECT_EQ(rx.delivered(), 3u);                   // all three acked
  (void)f1;
}

// Resuming a lost link (MCCL_RECONNECT_MS): frames 0..4 were sent; 0 and 1
// arrived, 2 was corrupted (nacked), 3 arrived and waits behind it, 4 was
// lost with the connection. On the new connection the receiver says "2 in
// order", the sender resends 2, 3 and 4 as ordinary frames and every chunk
// is delivered once, in order.
TEST(CrcRecovery, ResumeResendsEverythingAfterTheLastFrameReceivedInOrder) {
  crc_sender tx;
  crc_receiver rx(3);
  std::vector<wire_frame> frames;
  for (uint32_t i = 0; i < 5; ++i) {
    wire::frame_header h;
    h.chunk = i;
    std::vector<uint8_t> data(8, static_cast<uint8_t>(i));
    frames.push_back(sent(tx.keep(h, data.data(), data.size())));
  }
  std::vector<uint32_t> got;
  auto take = [&](crc_receiver::outcome out) {
    EXPECT_EQ(out.fatal, "");
    for (auto& c : out.deliver)
      got.push_back(c.header.chunk);
  };
  take(rx.on_frame(arrive(frames[0]), true));
  take(rx.on_frame(arrive(frames[1]), true));
  auto out = rx.on_frame(arrive(frames[2]), false);
  ASSERT_EQ(out.nacks, std::vector<uint64_t>{2});
  take(rx.on_frame(arrive(frames[3]), true));
  EXPECT_EQ(got, (std::vector<uint32_t>{0, 1}));

  // The connection is lost here; the nack may or may not have arrived.
  std::string why;
  ASSERT_NE(tx.on_nack(2, &why), nullptr);
  uint64_t in_order = rx.resume();
  EXPECT_EQ(in_order, 2u);
  EXPECT_EQ(rx.held(), 0u);
  auto* again = tx.resume_from(in_order, &why);
  ASSERT_NE(again, nullptr) << why;
  ASSERT_EQ(again->size(), 3u);
  EXPECT_EQ(tx.kept_frames(), 3u); // 0 and 1 count as acked
  for (const auto& k : *again) {
    auto f = sent(k);
    EXPECT_FALSE(f.h.flags & wire::flag_retransmit) << "resent as an ordinary frame";
    take(rx.on_frame(arrive(f), crc_ok(f)));
  }
  EXPECT_EQ(got, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(rx.delivered(), 5u);
}

TEST(CrcRecovery, ResumeClaimsOutsideWhatWasSentAreRefused) {
  crc_sender tx;
  std::vector<uint8_t> data(4, 1);
  for (int i = 0; i < 4; ++i)
    tx.keep(wire::frame_header{}, data.data(), data.size());
  tx.on_ack(2);
  std::string why;
  EXPECT_EQ(tx.resume_from(5, &why), nullptr);
  EXPECT_NE(why.find("claims to have received 5 frame(s) in order, but 4 were sent"),
            std::string::npos) << why;
  why.clear();
  EXPECT_EQ(tx.resume_from(1, &why), nullptr);
  EXPECT_NE(why.find("2 already acknowledged"), std::string::npos) << why;
  EXPECT_EQ(tx.kept_frames(), 2u) << "a refused claim changes nothing";
  auto* all = tx.resume_from(4, &why);
  ASSERT_NE(all, nullptr);
  EXPECT_TRUE(all->empty());
  EXPECT_EQ(tx.sent(), 4u);
}
