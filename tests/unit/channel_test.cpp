// Two channels (transport/channel.hpp) over the simulated network
// (transport/sim/sim_network.hpp): rank 0's channel to rank 1 sends, rank
// 1's channel to rank 0 receives. Nothing moves unless the test delivers
// bytes and calls progress(), so every interleaving below is exactly the
// one written down. A recording listener stands in for the engine.

#include "collectives/engine/landing.hpp"
#include "transport/buffer_pool.hpp"
#include "transport/channel.hpp"
#include "transport/fault/fault_connection.hpp"
#include "transport/sim/sim_network.hpp"
#include "transport/wire/frame.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <iterator>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

using namespace std::chrono_literals;
using namespace mccl;
using namespace mccl::transport;

namespace {

constexpr uint32_t comm_id = 7;

/// What a stand-in engine was told, in order.
struct recorder : channel_listener {
  struct down {
    int peer;
    down_kind kind;
    errc code;
    std::string why;
  };
  std::vector<received_frame> frames;
  std::vector<std::tuple<int, uint32_t, uint32_t>> sent; ///< peer, step, chunk
  std::vector<down> downs;
  std::vector<std::pair<int, uint64_t>> byes;           ///< peer, issued
  std::vector<std::pair<int, std::string>> aborts;      ///< origin, reason
  landing_map* spots = nullptr;

  uint8_t* landing_for(int peer, const wire::frame_header& h) override {
    return spots ? spots->claim(peer, h) : nullptr;
  }
  void on_frame(received_frame f) override { frames.push_back(std::move(f)); }
  void on_sent(int peer, const frame_ref& ref) override { sent.emplace_back(peer, ref.step, ref.chunk); }
  void on_peer_abort(int, int origin, errc, const std::string& reason, uint64_t, bool) override {
    aborts.emplace_back(origin, reason);
  }
  void on_peer_bye(int peer, uint64_t issued) override { byes.emplace_back(peer, issued); }
  void on_down(int peer, down_kind kind, errc code, const std::string& why) override {
    downs.push_back({peer, kind, code, why});
  }
  void on_fatal(int peer, errc code, const std::string& why) override {
    downs.push_back({peer, down_kind::error, code, "fatal: " + why});
  }
};

/// A frame as the test sent it.
struct sent_frame {
  wire::frame_header h;
  const uint8_t* data = nullptr;
  std::size_t len = 0;
};

class ChannelSim : public ::testing::Test {
protected:
  ChannelSim() { connect(net, nullptr); }

  /// (Re)builds both channels over `network`; `wrap` may decorate rank 0's end.
  void connect(sim_network& network, std::shared_ptr<fault_injector> wrap,
               std::shared_ptr<fault_recorder> faults = nullptr) {
    auto [ca, cb] = network.connect(0, 1);
    if (wrap)
      ca = wrap->wrap(ca, 1);
    a = std::make_unique<channel>(options(0, 1, faults), ca, rec_a, now);
    b = std::make_unique<channel>(options(1, 0, nullptr), cb, rec_b, now);
  }

  channel_options options(int rank, int peer, std::shared_ptr<fault_recorder> faults) {
    channel_options o;
    o.rank = rank;
    o.peer = peer;
    o.comm_id = comm_id;
    o.max_payload = 1u << 20;
    o.crc = crc_;
    o.heartbeat = 1h;
    o.pool = &pool;
    o.recorder = std::move(faults);
    return o;
  }

  /// A payload whose bytes name the frame they belong to.
  const std::vector<uint8_t>& payload(uint64_t seq, uint32_t chunk, std::size_t len) {
    auto& p = payloads_.emplace_back(len);
    for (std::size_t i = 0; i < len; ++i)
      p[i] = static_cast<uint8_t>(i * 31 + seq * 7 + chunk * 3 + 1);
    return p;
  }

  /// Queues a data frame on rank 0's channel and lets it write.
  sent_frame send_from_a(uint64_t seq, uint32_t step, uint32_t chunk, std::size_t len) {
    auto& p = payload(seq, chunk, len);
    sent_frame f;
    f.h.kind = wire::frame_kind::data;
    f.h.seq = seq;
    f.h.step = step;
    f.h.chunk = chunk;
    f.data = p.data();
    f.len = p.size();
    EXPECT_TRUE(a->send(f.h, f.data, f.len, frame_ref{1, step, chunk}));
    a->progress(now);
    return f;
  }

  /// Delivers rank 0's in-flight bytes `portion` at a time, rank 1 reading
  /// after each. Returns the number of portions.
  std::size_t trickle(std::size_t portion) {
    std::size_t n = 0;
    while (net.deliver(0, 1, portion) > 0) {
      b->progress(now);
      a->progress(now);
      ++n;
    }
    return n;
  }

  static void expect_frame(const received_frame& c, const sent_frame& sent, bool crc = false) {
    EXPECT_EQ(c.peer, 0);
    EXPECT_EQ(c.header.kind, wire::frame_kind::data);
    EXPECT_EQ(c.header.comm_id, comm_id);
    EXPECT_EQ(c.header.seq, sent.h.seq);
    EXPECT_EQ(c.header.step, sent.h.step);
    EXPECT_EQ(c.header.chunk, sent.h.chunk);
    ASSERT_EQ(c.header.payload_len, sent.len);
    EXPECT_EQ((c.header.flags & wire::flag_crc) != 0, crc);
    if (sent.len > 0) {
      ASSERT_NE(c.payload(), nullptr);
      EXPECT_EQ(std::memcmp(c.payload(), sent.data, sent.len), 0)
        << "payload of seq " << sent.h.seq << " chunk " << sent.h.chunk;
    }
  }

  buffer_pool pool;
  sim_network net;
  channel::clock::time_point now{};
  bool crc_ = false;
  recorder rec_a, rec_b;
  std::unique_ptr<channel> a, b;

private:
  std::deque<std::vector<uint8_t>> payloads_; // stable addresses
};

} // namespace

// One frame, 7 bytes per delivery: the header arrives in several pieces and
// its last piece shares a delivery with the first payload bytes. Every
// delivery wakes the reader's notification exactly once; only the last
// completes the frame. The sender hears "sent" as soon as the network took
// the whole frame.
TEST_F(ChannelSim, OneFrameInSevenByteDeliveries) {
  auto f = send_from_a(0, 2, 5, 20);
  EXPECT_EQ(rec_a.sent, (std::vector<std::tuple<int, uint32_t, uint32_t>>{{1, 2, 5}}));
  ASSERT_EQ(net.pending(), (std::vector<sim_pipe_id>{{0, 1, wire::header_size + 20}}));

  int wakes = 0;
  constexpr std::size_t total = wire::header_size + 20;
  constexpr int deliveries = static_cast<int>((total + 6) / 7);
  for (int i = 0; i < deliveries; ++i) {
    b->conn()->notify_when_ready(false, [&] { ++wakes; });
    ASSERT_EQ(net.deliver(0, 1, 7), i + 1 < deliveries ? 7u : total - 7 * (deliveries - 1));
    EXPECT_EQ(wakes, i + 1) << "after delivery " << i;
    b->progress(now);
    if (i + 1 < deliveries) {
      EXPECT_TRUE(rec_b.frames.empty()) << "after delivery " << i;
    }
  }
  EXPECT_TRUE(net.pending().empty());
  ASSERT_EQ(rec_b.frames.size(), 1u);
  expect_frame(rec_b.frames[0], f);
  EXPECT_TRUE(rec_a.downs.empty());
  EXPECT_TRUE(rec_b.downs.empty());
}

// Several frames in 7-byte deliveries (headers split everywhere), sends
// interleaved with deliveries.
TEST_F(ChannelSim, SmallFramesInSevenByteDeliveries) {
  std::vector<sent_frame> sent;
  const std::size_t sizes[] = {1, 13, 0, 40, 100, 3, 64};
  uint32_t chunk = 0;
  for (auto len : sizes) {
    sent.push_back(send_from_a(0, 1, chunk++, len));
    // Deliver part of what is in flight before the next send.
    for (int i = 0; i < 3; ++i) {
      net.deliver(0, 1, 7);
      b->progress(now);
    }
  }
  trickle(7);
  ASSERT_EQ(rec_b.frames.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i)
    expect_frame(rec_b.frames[i], sent[i]);
  ASSERT_EQ(rec_a.sent.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i)
    EXPECT_EQ(rec_a.sent[i], std::make_tuple(1, 1u, static_cast<uint32_t>(i)));
}

// Frames large enough to be read straight to their destination (32 KiB and
// up) next to small ones, delivered in uneven portions.
TEST_F(ChannelSim, LargeFramesInUnevenDeliveries) {
  std::vector<sent_frame> sent;
  sent.push_back(send_from_a(3, 0, 0, 70000));
  sent.push_back(send_from_a(3, 0, 1, 5));
  sent.push_back(send_from_a(3, 1, 0, 200000));
  sent.push_back(send_from_a(3, 1, 1, 65536));
  sent.push_back(send_from_a(3, 1, 2, channel::direct_read_min));
  EXPECT_EQ(rec_a.sent.size(), 5u);
  const std::size_t portions[] = {7, 1, 40, 333, 65536, 39, 100000};
  std::size_t k = 0;
  while (net.deliver(0, 1, portions[k++ % std::size(portions)]) > 0)
    b->progress(now);
  ASSERT_EQ(rec_b.frames.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i)
    expect_frame(rec_b.frames[i], sent[i]);
}

// Once large frames come, their payloads never pass the stage: not the
// remainder of one delivered in pieces (however little is left), and not
// the next large frame after a few small ones (mccl-bench's barriers
// between its ops). Only a run of small frames goes back to staging.
TEST_F(ChannelSim, LargePayloadsSkipTheStageAcrossSmallFramesAndRemainders) {
  std::vector<sent_frame> sent;
  sent.push_back(send_from_a(0, 0, 0, 100000));
  sent.push_back(send_from_a(0, 0, 1, 100000));
  // The first frame's bytes may pass the stage (nothing said frames are
  // large yet); deliver exactly it.
  net.deliver(0, 1, wire::header_size + 100000);
  b->progress(now);
  ASSERT_EQ(rec_b.frames.size(), 1u);
  auto staged = b->staged_payload_bytes();
  // The second in pieces that leave less than direct_read_min for last.
  net.deliver(0, 1, wire::header_size + 90000);
  b->progress(now);
  net.deliver(0, 1, 10000);
  b->progress(now);
  // A zero-length frame and a small one, then a large one, all at once.
  sent.push_back(send_from_a(1, 0, 0, 0));
  sent.push_back(send_from_a(2, 0, 0, 100));
  sent.push_back(send_from_a(3, 0, 0, 100000));
  trickle(1 << 20);
  ASSERT_EQ(rec_b.frames.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i)
    expect_frame(rec_b.frames[i], sent[i]);
  EXPECT_EQ(b->staged_payload_bytes(), staged + 100) << "only the small frame's payload was staged";
  // Eight small frames in a row: small frames share reads through the stage again.
  for (uint32_t c = 0; c < 9; ++c)
    sent.push_back(send_from_a(4, 0, c, 10));
  sent.push_back(send_from_a(5, 0, 0, 100000));
  trickle(1 << 20);
  ASSERT_EQ(rec_b.frames.size(), sent.size());
  expect_frame(rec_b.frames.back(), sent.back());
  EXPECT_GT(b->staged_payload_bytes(), staged + 100 + 90 + 50000)
    << "after a run of small frames the next header is read with what follows it";
}

// A small capacity forces partial writes: "sent" comes exactly when the
// network has accepted all of a frame, never earlier.
TEST_F(ChannelSim, PartialWritesReportSentOnlyOnceTheWholeFrameLeft) {
  // Payloads above inline_payload_bytes: sent from the sender's memory.
  constexpr std::size_t big = 4096;
  net.set_capacity(0, 1, 100);
  auto fa = send_from_a(0, 0, 0, big + 100);
  auto fb = send_from_a(0, 0, 1, big + 7);
  EXPECT_EQ(net.in_flight(0, 1), 100u);
  EXPECT_TRUE(rec_a.sent.empty());
  EXPECT_TRUE(a->wants_write());

  const std::size_t frame_a = wire::header_size + big + 100;
  const std::size_t frame_b = frame_a + wire::header_size + big + 7;
  std::size_t delivered = 0, rounds = 0;
  bool writable = false;
  while (rec_b.frames.size() < 2 && rounds++ < 1000) {
    a->conn()->notify_when_ready(true, [&] { writable = true; });
    delivered += net.deliver(0, 1, 97);
    b->progress(now);
    EXPECT_TRUE(writable) << "reading freed space, but the writer was not woken";
    writable = false;
    a->progress(now);
    auto accepted = delivered + net.in_flight(0, 1);
    EXPECT_EQ(rec_a.sent.size(), accepted >= frame_b ? 2u : accepted >= frame_a ? 1u : 0u)
      << "accepted " << accepted;
  }
  ASSERT_EQ(rec_b.frames.size(), 2u);
  expect_frame(rec_b.frames[0], fa);
  expect_frame(rec_b.frames[1], fb);
  EXPECT_FALSE(a->wants_write());
  EXPECT_TRUE(net.pending().empty());
}

// A payload of up to inline_payload_bytes is copied into its queue entry:
// the sender hears it was sent before send() returns, once, and what it
// writes to its memory afterwards does not reach the peer. A larger one
// stays in the sender's memory and is reported once written. send() writes
// nothing itself: progress() (the link actor's turn) does.
TEST_F(ChannelSim, TinyPayloadsLeaveTheSendersMemoryInsideSendWhichWritesNothing) {
  wire::frame_header h;
  h.kind = wire::frame_kind::data;
  h.seq = 3;
  const std::size_t n = channel::inline_payload_bytes;
  std::vector<uint8_t> tiny(n, 0x5a), larger(n + 1, 0x6b), tiny2(1, 0x7c);
  ASSERT_TRUE(a->send(h, tiny.data(), n, frame_ref{1, 0, 0}));
  EXPECT_EQ(rec_a.sent, (std::vector<std::tuple<int, uint32_t, uint32_t>>{{1, 0, 0}})); // copied
  EXPECT_EQ(net.in_flight(0, 1), 0u) << "send() wrote";
  ASSERT_TRUE(a->send(h, larger.data(), larger.size(), frame_ref{1, 0, 1}));
  EXPECT_EQ(rec_a.sent.size(), 1u); // from the sender's memory: once written
  ASSERT_TRUE(a->send(h, tiny2.data(), tiny2.size(), frame_ref{1, 0, 2}));
  EXPECT_EQ(rec_a.sent.size(), 2u); // copied, behind the larger one
  std::fill(tiny.begin(), tiny.end(), uint8_t{0}); // the op reuses what was reported sent
  tiny2[0] = 0;
  for (int i = 0; i < 100 && rec_b.frames.size() < 3; ++i) {
    a->progress(now);
    net.deliver(0, 1, 1 << 20);
    b->progress(now);
  }
  ASSERT_EQ(rec_b.frames.size(), 3u);
  const std::size_t lens[] = {n, n + 1, 1};
  const uint8_t sent_bytes[] = {0x5a, 0x6b, 0x7c};
  for (int f = 0; f < 3; ++f) {
    const auto& got = rec_b.frames[f];
    ASSERT_EQ(got.header.payload_len, lens[f]);
    for (std::size_t i = 0; i < lens[f]; ++i)
      ASSERT_EQ(got.payload()[i], sent_bytes[f]) << "frame " << f << ", byte " << i;
  }
  EXPECT_EQ(rec_a.sent.size(), 3u); // the larger once written; none twice
}

// BYE carries how many collectives rank 0 issued; rank 1 gets the data
// before it, then the BYE, and its channel is closed: later sends are
// refused rather than queued for nobody.
TEST_F(ChannelSim, ByeComesAfterTheDataAndClosesTheChannel) {
  auto f = send_from_a(0, 0, 0, 12);
  a->send_bye(4);
  a->progress(now);
  EXPECT_TRUE(rec_b.byes.empty()); // data and BYE still in flight
  trickle(7);
  ASSERT_EQ(rec_b.frames.size(), 1u);
  expect_frame(rec_b.frames[0], f);
  ASSERT_EQ(rec_b.byes.size(), 1u);
  EXPECT_EQ(rec_b.byes[0], std::make_pair(0, uint64_t{4}));
  EXPECT_TRUE(rec_b.downs.empty()) << "a BYE is no failure";
  EXPECT_EQ(b->current(), channel::state::closed);
  wire::frame_header h;
  EXPECT_FALSE(b->send(h, nullptr, 0, frame_ref{}));
}

// Two ranks finalizing together: rank 1 closes as soon as it reads rank 0's
// BYE (its own BYE is never sent), and rank 0, still flushing, then finds
// the connection closed. That ends a finalize; it is not a lost peer. A
// close that comes before our BYE still is.
TEST_F(ChannelSim, APeerClosingAfterOurByeIsNoLoss) {
  a->send_bye(1);
  a->progress(now);
  trickle(7);
  ASSERT_EQ(rec_b.byes.size(), 1u);
  EXPECT_EQ(b->current(), channel::state::closed);
  for (int i = 0; i < 4; ++i)
    a->progress(now);
  EXPECT_TRUE(rec_a.downs.empty()) << rec_a.downs[0].why;
  EXPECT_EQ(a->current(), channel::state::closed);

  // Without a BYE of ours, the same close is a loss.
  sim_network fresh;
  connect(fresh, nullptr);
  b->close();
  a->progress(now);
  ASSERT_EQ(rec_a.downs.size(), 1u);
  EXPECT_EQ(rec_a.downs[0].kind, down_kind::lost);
  EXPECT_NE(rec_a.downs[0].why.find("closed"), std::string::npos) << rec_a.downs[0].why;
}

// A reset takes both channels down, as a loss (not an error), naming the
// simulated peer's failure.
TEST_F(ChannelSim, BrokenLinkIsReportedOnBothSides) {
  net.break_link(0, 1);
  a->progress(now);
  b->progress(now);
  ASSERT_EQ(rec_a.downs.size(), 1u);
  ASSERT_EQ(rec_b.downs.size(), 1u);
  EXPECT_EQ(rec_a.downs[0].kind, down_kind::lost);
  EXPECT_EQ(rec_a.downs[0].peer, 1);
  EXPECT_EQ(rec_b.downs[0].peer, 0);
  EXPECT_EQ(rec_a.downs[0].code, errc::peer_lost);
  EXPECT_NE(rec_a.downs[0].why.find("connection reset by peer (simulated)"), std::string::npos)
    << rec_a.downs[0].why;
}

// An ABORT from rank 0 reaches rank 1 with its origin and reason.
TEST_F(ChannelSim, AbortReachesThePeer) {
  a->abort(0, errc::aborted, "out of patience");
  EXPECT_TRUE(rec_b.aborts.empty());
  a->progress(now);
  trickle(7);
  ASSERT_EQ(rec_b.aborts.size(), 1u);
  EXPECT_EQ(rec_b.aborts[0].first, 0);
  EXPECT_EQ(rec_b.aborts[0].second, "out of patience");
}

// MCCL_TRANSPORT_CRC: a chunk corrupted on the wire (by the fault decorator
// under rank 0's channel) is NACKed by rank 1 and sent again from rank 0's
// own copy; rank 1 gets it once, intact, in order with the chunk behind it;
// acks let rank 0 drop its copies, and then its BYE goes out.
TEST_F(ChannelSim, CrcMismatchIsNackedAndRetransmitted) {
  crc_ = true;
  sim_network auto_net(true);
  auto faults = std::make_shared<fault_recorder>(0, "test", 1, "/dev/null/x");
  auto injector = std::make_shared<fault_injector>(
    parse_fault_scenario(R"({"faults": [{"kind": "corrupt", "link": "0->1", "seq": 0, "chunk": 1, "bits": 5}]})",
                         "test"),
    0, faults);
  connect(auto_net, injector, faults);
  auto first = send_from_a(0, 0, 1, 300);
  auto second = send_from_a(0, 0, 2, 40);
  EXPECT_EQ(rec_a.sent.size(), 2u) << "with CRC the caller's memory is free at once";
  for (int i = 0; i < 10; ++i) {
    b->progress(now);
    a->progress(now);
  }
  ASSERT_EQ(rec_b.frames.size(), 2u);
  expect_frame(rec_b.frames[0], first, true);
  expect_frame(rec_b.frames[1], second, true);
  EXPECT_EQ(faults->fault_count(), 1u);
  EXPECT_EQ(faults->reaction_count("retransmit"), 1u);
  // Acknowledgements ride along with rank 1's next frame; rank 0 keeps its
  // copies until then.
  EXPECT_EQ(a->unacked_frames(), 2u);
  wire::frame_header h;
  h.seq = 1;
  ASSERT_TRUE(b->send(h, nullptr, 0, frame_ref{2, 0, 0}));
  for (int i = 0; i < 3; ++i) {
    b->progress(now);
    a->progress(now);
  }
  EXPECT_EQ(a->unacked_frames(), 0u);
  ASSERT_EQ(rec_a.frames.size(), 1u);
  EXPECT_TRUE(rec_a.downs.empty());
  EXPECT_TRUE(rec_b.downs.empty());

  a->send_bye(1);
  a->progress(now);
  b->progress(now);
  ASSERT_EQ(rec_b.byes.size(), 1u);
}

// ---- receive in place (collectives/engine/landing.hpp) ----------------------------

namespace {

/// The signature the test's frames carry (their op fields are zero).
op_signature test_signature() {
  return unpack_signature(wire::frame_header{});
}

} // namespace

// A chunk with a spot lands there; one whose length differs, a second copy
// and one without a spot arrive in staging memory and leave the caller's
// buffer alone.
TEST_F(ChannelSim, ChunksLandInPlaceOnceAndOnlyWhereTheyFit) {
  std::vector<uint8_t> dst(100, 0xEE);
  landing_map map(test_signature());
  map.add(0, 2, 0, dst.data(), 40);
  map.add(0, 2, 1, dst.data() + 40, 40);
  map.close_additions();
  rec_b.spots = &map;

  auto fits = send_from_a(0, 2, 0, 40);
  auto too_short = send_from_a(0, 2, 1, 30);
  auto again = send_from_a(0, 2, 0, 40);
  auto no_spot = send_from_a(0, 2, 2, 10);
  trickle(1000);

  ASSERT_EQ(rec_b.frames.size(), 4u);
  const auto& landed = rec_b.frames[0];
  EXPECT_EQ(landed.landed, dst.data());
  EXPECT_EQ(landed.buffer, nullptr);
  EXPECT_EQ(std::memcmp(dst.data(), fits.data, 40), 0);
  for (std::size_t i = 1; i < 4; ++i)
    EXPECT_EQ(rec_b.frames[i].landed, nullptr) << "chunk " << i;
  expect_frame(rec_b.frames[1], too_short);
  expect_frame(rec_b.frames[2], again);
  expect_frame(rec_b.frames[3], no_spot);
  for (std::size_t i = 40; i < dst.size(); ++i)
    ASSERT_EQ(dst[i], 0xEE) << "byte " << i << " was written";
}

// A chunk that arrived before its op started (in staging memory) is passed
// on after the op's start() added its spot: a second copy of it is never
// landed over what the algorithm copied itself.
TEST_F(ChannelSim, AChunkPassedOnBeforeItsSpotExistedNeverLands) {
  send_from_a(0, 0, 5, 16);
  trickle(1000); // no spots yet: staging memory
  ASSERT_EQ(rec_b.frames.size(), 1u);
  EXPECT_EQ(rec_b.frames[0].landed, nullptr);

  std::vector<uint8_t> dst(16, 0xEE);
  landing_map map(test_signature());
  map.add(0, 0, 5, dst.data(), 16); // the op's start()
  map.close_additions();
  map.passed_on(0, rec_b.frames[0].header); // the early chunk goes to it
  rec_b.spots = &map;

  send_from_a(0, 0, 5, 16);
  trickle(1000);
  ASSERT_EQ(rec_b.frames.size(), 2u);
  EXPECT_EQ(rec_b.frames[1].landed, nullptr);
  for (auto byte : dst)
    ASSERT_EQ(byte, 0xEE);
}

// An abort while a payload is being read into the caller's buffer: the
// rest goes to scratch memory and the frame is dropped.
TEST_F(ChannelSim, AbortStopsALandingPayloadMidway) {
  std::vector<uint8_t> dst(64, 0xEE);
  landing_map map(test_signature());
  map.add(0, 0, 0, dst.data(), 64);
  map.close_additions();
  rec_b.spots = &map;
  auto f = send_from_a(0, 0, 0, 64);
  net.deliver(0, 1, wire::header_size + 10);
  b->progress(now);
  EXPECT_EQ(std::memcmp(dst.data(), f.data, 10), 0); // landing had begun

  b->abort(1, errc::aborted, "giving up");
  trickle(1000);
  EXPECT_TRUE(rec_b.frames.empty());
  for (std::size_t i = 10; i < dst.size(); ++i)
    ASSERT_EQ(dst[i], 0xEE) << "byte " << i << " was written after the abort";
}

// Heartbeats: a direction idle for half an interval gets one, a busy one
// does not; the reader counts any bytes as a sign of life.
TEST_F(ChannelSim, IdleDirectionsGetHeartbeatsAndAnyByteIsASignOfLife) {
  auto o = options(0, 1, nullptr);
  o.heartbeat = 100ms;
  sim_network hb_net;
  auto [ca, cb] = hb_net.connect(0, 1);
  recorder ra, rb;
  channel ha(o, ca, ra, now);
  channel hb(options(1, 0, nullptr), cb, rb, now);
  ha.keep_alive(now + 49ms);
  ha.progress(now + 49ms);
  EXPECT_TRUE(hb_net.pending().empty()) << "a heartbeat before half an interval passed";
  ha.keep_alive(now + 50ms);
  ha.progress(now + 50ms);
  ASSERT_EQ(hb_net.in_flight(0, 1), wire::header_size) << "one heartbeat, nothing else";
  EXPECT_EQ(ha.last_tx(), now + 50ms);
  hb_net.deliver_all();
  hb.progress(now + 70ms);
  EXPECT_EQ(hb.last_rx(), now + 70ms);
  EXPECT_TRUE(rb.frames.empty()) << "a heartbeat is not a data frame";
  ha.keep_alive(now + 90ms); // written at 50 ms: not due yet
  ha.progress(now + 90ms);
  EXPECT_TRUE(hb_net.pending().empty());
}
