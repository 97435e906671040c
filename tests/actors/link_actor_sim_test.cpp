// Two real link actors (actors/link_actor.hpp) over the simulated network
// (transport/sim/sim_network.hpp), run by CAF's deterministic test coordinator:
// nothing happens unless the test delivers bytes and runs the scheduler, so
// every interleaving below is exactly the one written down.
//
// Rank 0 sends through link_a; rank 1 receives through link_b. A recording
// actor stands in for each side's collective and progress actor.
//
// The scheduler is driven with sched.run() (messages only). The fixture's
// run() / run_until() also fire timeouts, and a link re-arms its heartbeat
// tick every time it fires, so those would never return while a link lives.

#include "transport/buffer_pool.hpp"
#include "actors/link_actor.hpp"
#include "actors/messages.hpp"
#include "transport/fault/fault_connection.hpp"
#include "transport/wire/frame.hpp"
#include "transport/sim/sim_network.hpp"

#include <caf/all.hpp>

#include <cstring>
#include <deque>
#include <iterator>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "caf_gtest_dsl.hpp" // last: defines the macros expect, allow, ...

using namespace std::chrono_literals;
using mccl::buffer_pool;
using mccl::errc;
using mccl::actors::chunk_atom;
using mccl::actors::fail_atom;
using mccl::actors::link_actor;
using mccl::actors::link_down_atom;
using mccl::actors::link_init;
using mccl::actors::peer_abort_atom;
using mccl::actors::poll_atom;
using mccl::actors::ready_atom;
using mccl::actors::route_atom;
using mccl::actors::rx_chunk;
using mccl::actors::send_atom;
using mccl::actors::sent_atom;
using mccl::actors::shutdown_atom;
using mccl::actors::tx_request;
using mccl::transport::sim_network;
using mccl::transport::sim_pipe_id;

namespace {

constexpr uint32_t comm_id = 7;

/// What a stand-in collective / progress actor was told, in order.
struct recorder {
  struct link_down {
    int peer;
    std::string why;
    bool graceful;
    uint64_t issued;
  };
  std::vector<rx_chunk> chunks;
  std::vector<std::tuple<int, uint32_t, uint32_t>> sent; ///< peer, step, chunk
  std::vector<std::string> failures;
  std::vector<link_down> downs;
  std::vector<std::pair<int, std::string>> aborts;
};

caf::behavior recording_actor(std::shared_ptr<recorder> rec) {
  return {
    [rec](chunk_atom, rx_chunk& c) { rec->chunks.push_back(std::move(c)); },
    [rec](sent_atom, int peer, uint32_t step, uint32_t chunk) {
      rec->sent.emplace_back(peer, step, chunk);
    },
    [rec](fail_atom, errc, const std::string& why) { rec->failures.push_back(why); },
    [rec](link_down_atom, int peer, const std::string& why, bool graceful, uint64_t issued) {
      rec->downs.push_back({peer, why, graceful, issued});
    },
    [rec](peer_abort_atom, int origin, const std::string& reason, errc) {
      rec->aborts.emplace_back(origin, reason);
    },
  };
}

/// What must outlive the actor system: the pool owns the memory of every
/// received chunk (recorders and links hold them until the system is gone),
/// and the network owns the pipes. As a base listed before
/// test_coordinator_fixture it is destroyed after it.
struct sim_env {
  buffer_pool pool;
  sim_network net;
};

class LinkActorSim : public ::testing::Test,
                     public sim_env,
                     public test_coordinator_fixture<> {
protected:
  LinkActorSim() {
    auto [ca, cb] = net.connect(0, 1);
    coll_a = sys.spawn(recording_actor, rec_a);
    coll_b = sys.spawn(recording_actor, rec_b);
    prog_a = sys.spawn(recording_actor, progress_a);
    prog_b = sys.spawn(recording_actor, progress_b);
    link_a = sys.spawn<link_actor>(make_init(0, 1, ca, prog_a));
    link_b = sys.spawn<link_actor>(make_init(1, 0, cb, prog_b));
    sched.run(); // the links start and park (read notification armed)
  }

  ~LinkActorSim() override {
    // Links must go before the fixture's destructor runs (it fires timeouts
    // until none is left, and a live link re-arms its heartbeat tick), and
    // their connections hold the links' notification callbacks.
    for (auto& a : {link_a, link_b, coll_a, coll_b, prog_a, prog_b})
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sched.run();
  }

  link_init make_init(int rank, int peer, mccl::transport::connection_ptr conn,
                      caf::actor progress) {
    link_init init;
    init.rank = rank;
    init.peer = peer;
    init.comm_id = comm_id;
    init.conn = std::move(conn);
    init.progress = std::move(progress);
    init.pool = &pool;
    init.crc = crc_;
    init.spin = 0us; // park at once: progress only through notifications
    init.heartbeat = 1h;
    init.max_payload = 1u << 20;
    return init;
  }

  /// A payload whose bytes name the frame they belong to.
  const std::vector<uint8_t>& payload(uint64_t seq, uint32_t chunk, std::size_t len) {
    auto& p = payloads_.emplace_back(len);
    for (std::size_t i = 0; i < len; ++i)
      p[i] = static_cast<uint8_t>(i * 31 + seq * 7 + chunk * 3 + 1);
    return p;
  }

  tx_request request(uint64_t seq, uint32_t step, uint32_t chunk, std::size_t len) {
    auto& p = payload(seq, chunk, len);
    tx_request req;
    req.header.kind = mccl::wire::frame_kind::data;
    req.header.seq = seq;
    req.header.step = step;
    req.header.chunk = chunk;
    req.data = p.data();
    req.len = p.size();
    req.peer = 1;
    return req;
  }

  /// Queues a data frame on link_a, as rank 0's collective would.
  tx_request send_from_a(uint64_t seq, uint32_t step, uint32_t chunk, std::size_t len) {
    auto req = request(seq, step, chunk, len);
    caf::anon_send(link_a, send_atom::value, req, coll_a);
    return req;
  }

  void route_b(uint64_t seq, const caf::actor& to) {
    caf::anon_send(link_b, route_atom::value, seq, to, std::shared_ptr<mccl::landing_map>{});
  }

  /// Delivers rank 0's in-flight bytes `portion` at a time, running the
  /// scheduler after each portion. Returns the number of portions.
  std::size_t trickle(std::size_t portion) {
    std::size_t n = 0;
    while (net.deliver(0, 1, portion) > 0) {
      sched.run();
      ++n;
    }
    return n;
  }

  static void expect_chunk_crc(const rx_chunk& c, const tx_request& sent) {
    EXPECT_NE(c.header.flags & mccl::wire::flag_crc, 0);
    EXPECT_EQ(c.header.chunk, sent.header.chunk);
    ASSERT_EQ(c.header.payload_len, sent.len);
    EXPECT_EQ(std::memcmp(c.buffer.get(), sent.data, sent.len), 0) << "chunk " << sent.header.chunk;
  }

  static void expect_chunk(const rx_chunk& c, const tx_request& sent) {
    EXPECT_EQ(c.peer, 0);
    EXPECT_EQ(c.header.kind, mccl::wire::frame_kind::data);
    EXPECT_EQ(c.header.comm_id, comm_id);
    EXPECT_EQ(c.header.seq, sent.header.seq);
    EXPECT_EQ(c.header.step, sent.header.step);
    EXPECT_EQ(c.header.chunk, sent.header.chunk);
    ASSERT_EQ(c.header.payload_len, sent.len);
    EXPECT_EQ(c.header.flags & mccl::wire::flag_crc, 0); // CRC has its own test below
    if (sent.len > 0) {
      ASSERT_NE(c.buffer, nullptr);
      EXPECT_EQ(std::memcmp(c.buffer.get(), sent.data, sent.len), 0)
        << "payload of seq " << sent.header.seq << " chunk " << sent.header.chunk;
    }
  }

  bool crc_ = false;
  /// The network of links made by a test itself (CRC over a fault decorator).
  std::unique_ptr<sim_network> extra_net_;

  std::shared_ptr<recorder> rec_a = std::make_shared<recorder>();
  std::shared_ptr<recorder> rec_b = std::make_shared<recorder>();
  std::shared_ptr<recorder> progress_a = std::make_shared<recorder>();
  std::shared_ptr<recorder> progress_b = std::make_shared<recorder>();
  caf::actor coll_a, coll_b, prog_a, prog_b, link_a, link_b;

private:
  std::deque<std::vector<uint8_t>> payloads_; // stable addresses
};

} // namespace

// Every message of one frame's journey, one at a time, with CAF's expect().
TEST_F(LinkActorSim, OneFrameMessageByMessage) {
  route_b(0, coll_b);
  expect((route_atom, uint64_t, caf::actor, std::shared_ptr<mccl::landing_map>), from(_).to(link_b).with(_, 0u, coll_b, _));
  expect((poll_atom), from(link_b).to(link_b)); // nothing to read: parks again
  EXPECT_FALSE(sched.has_job());

  auto req = send_from_a(0, 2, 5, 20);
  expect((send_atom, tx_request, caf::actor), from(_).to(link_a));
  // The frame fit, so link_a wrote it inside the handler and says so at once.
  expect((sent_atom, int, uint32_t, uint32_t), from(link_a).to(coll_a).with(_, 1, 2u, 5u));
  expect((poll_atom), from(link_a).to(link_a));
  EXPECT_FALSE(sched.has_job());
  ASSERT_EQ(net.pending(), (std::vector<sim_pipe_id>{{0, 1, mccl::wire::header_size + 20}}));

  // Header plus 20 payload bytes, 7 at a time: the header arrives in
  // several pieces and its last piece shares a delivery with the first
  // payload bytes. Every delivery wakes link_b exactly once; only the last
  // one completes the frame.
  constexpr std::size_t total = mccl::wire::header_size + 20;
  constexpr int deliveries = static_cast<int>((total + 6) / 7);
  for (int i = 0; i < deliveries; ++i) {
    ASSERT_EQ(net.deliver(0, 1, 7), i + 1 < deliveries ? 7u : total - 7 * (deliveries - 1));
    expect((ready_atom, bool), from(_).to(link_b).with(_, false));
    if (i + 1 < deliveries) {
      EXPECT_FALSE(sched.has_job()) << "after delivery " << i;
    }
  }
  expect((chunk_atom, rx_chunk), from(link_b).to(coll_b));
  EXPECT_FALSE(sched.has_job());
  EXPECT_TRUE(net.pending().empty());

  ASSERT_EQ(rec_b->chunks.size(), 1u);
  expect_chunk(rec_b->chunks[0], req);
  EXPECT_EQ(rec_a->sent, (std::vector<std::tuple<int, uint32_t, uint32_t>>{{1, 2, 5}}));
  EXPECT_TRUE(progress_a->downs.empty());
  EXPECT_TRUE(progress_b->downs.empty());
}

// Several frames in 7-byte deliveries (headers split everywhere), sends
// interleaved with deliveries.
TEST_F(LinkActorSim, SmallFramesInSevenByteDeliveries) {
  route_b(0, coll_b);
  sched.run();
  std::vector<tx_request> sent;
  const std::size_t sizes[] = {1, 13, 0, 40, 100, 3, 64};
  uint32_t chunk = 0;
  for (auto len : sizes) {
    sent.push_back(send_from_a(0, 1, chunk++, len));
    sched.run();
    // Deliver part of what is in flight before the next send.
    for (int i = 0; i < 3; ++i) {
      net.deliver(0, 1, 7);
      sched.run();
    }
  }
  trickle(7);
  EXPECT_FALSE(sched.has_job());
  ASSERT_EQ(rec_b->chunks.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i)
    expect_chunk(rec_b->chunks[i], sent[i]);
  ASSERT_EQ(rec_a->sent.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i)
    EXPECT_EQ(rec_a->sent[i], std::make_tuple(1, 1u, static_cast<uint32_t>(i)));
}

// Frames large enough for link_b's direct-to-buffer reads (64 KiB and up),
// delivered in uneven portions.
TEST_F(LinkActorSim, LargeFramesInUnevenDeliveries) {
  route_b(3, coll_b);
  sched.run();
  std::vector<tx_request> sent;
  sent.push_back(send_from_a(3, 0, 0, 70000));
  sent.push_back(send_from_a(3, 0, 1, 5));
  sent.push_back(send_from_a(3, 1, 0, 200000));
  sent.push_back(send_from_a(3, 1, 1, 65536));
  sched.run();
  EXPECT_EQ(rec_a->sent.size(), 4u);
  const std::size_t portions[] = {7, 1, 40, 333, 65536, 39, 100000};
  std::size_t k = 0;
  while (net.deliver(0, 1, portions[k++ % std::size(portions)]) > 0)
    sched.run();
  EXPECT_FALSE(sched.has_job());
  ASSERT_EQ(rec_b->chunks.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i)
    expect_chunk(rec_b->chunks[i], sent[i]);
}

// A chunk of an op rank 1 has not started (no route for seq 1 yet) is kept
// and handed over when the route arrives; other seqs are not held up.
TEST_F(LinkActorSim, ChunkBeforeRouteIsBufferedUntilRouted) {
  auto coll_b1_rec = std::make_shared<recorder>();
  auto coll_b1 = sys.spawn(recording_actor, coll_b1_rec);
  route_b(0, coll_b);
  sched.run();

  auto early0 = send_from_a(1, 0, 0, 30);
  auto early1 = send_from_a(1, 0, 1, 17);
  auto now = send_from_a(0, 0, 0, 11);
  sched.run();
  trickle(7);
  ASSERT_EQ(rec_b->chunks.size(), 1u);
  expect_chunk(rec_b->chunks[0], now);
  EXPECT_TRUE(coll_b1_rec->chunks.empty());

  route_b(1, coll_b1);
  expect((route_atom, uint64_t, caf::actor, std::shared_ptr<mccl::landing_map>), from(_).to(link_b).with(_, 1u, coll_b1, _));
  expect((chunk_atom, rx_chunk), from(link_b).to(coll_b1));
  expect((chunk_atom, rx_chunk), from(link_b).to(coll_b1));
  sched.run();
  ASSERT_EQ(coll_b1_rec->chunks.size(), 2u);
  expect_chunk(coll_b1_rec->chunks[0], early0);
  expect_chunk(coll_b1_rec->chunks[1], early1);

  // Once routed, later chunks of seq 1 go straight through.
  auto late = send_from_a(1, 1, 0, 9);
  sched.run();
  net.deliver_all();
  sched.run();
  ASSERT_EQ(coll_b1_rec->chunks.size(), 3u);
  expect_chunk(coll_b1_rec->chunks[2], late);
  EXPECT_EQ(rec_b->chunks.size(), 1u);
  caf::anon_send_exit(coll_b1, caf::exit_reason::user_shutdown);
}

// A small capacity forces partial writes: link_a parks on a write
// notification and resumes when link_b reads; sent_atom comes only once the
// whole frame has left.
TEST_F(LinkActorSim, PartialWritesResumeWhenTheReceiverReads) {
  net.set_capacity(0, 1, 10);
  route_b(0, coll_b);
  sched.run();
  auto a = send_from_a(0, 0, 0, 100);
  auto b = send_from_a(0, 0, 1, 7);
  sched.run();
  EXPECT_EQ(net.in_flight(0, 1), 10u);
  EXPECT_TRUE(rec_a->sent.empty());
  EXPECT_FALSE(sched.has_job()); // link_a is parked, waiting for space

  // link_a reports a frame sent exactly when the network has accepted all
  // of it: never earlier, and without waiting for anything else.
  const std::size_t frame_a = mccl::wire::header_size + 100;
  const std::size_t frame_b = frame_a + mccl::wire::header_size + 7;
  std::size_t delivered = 0, rounds = 0;
  while (rec_b->chunks.size() < 2 && rounds++ < 1000) {
    delivered += net.deliver(0, 1, 7);
    sched.run();
    auto accepted = delivered + net.in_flight(0, 1);
    EXPECT_EQ(rec_a->sent.size(), accepted >= frame_b ? 2u : accepted >= frame_a ? 1u : 0u)
      << "accepted " << accepted;
  }
  ASSERT_EQ(rec_b->chunks.size(), 2u);
  expect_chunk(rec_b->chunks[0], a);
  expect_chunk(rec_b->chunks[1], b);
  EXPECT_EQ(rec_a->sent.size(), 2u);
  EXPECT_TRUE(net.pending().empty());
}

// shutdown_atom: link_a sends BYE (with the number of ops issued) and closes;
// link_b reports a graceful loss once the BYE is delivered, and fails later
// sends instead of leaving the collective waiting.
TEST_F(LinkActorSim, ByeThenCloseIsAGracefulLinkDown) {
  route_b(0, coll_b);
  sched.run();
  auto req = send_from_a(0, 0, 0, 12);
  caf::anon_send(link_a, shutdown_atom::value, uint64_t{4});
  sched.run();
  EXPECT_TRUE(progress_b->downs.empty()); // data and BYE still in flight
  trickle(7);
  ASSERT_EQ(rec_b->chunks.size(), 1u);
  expect_chunk(rec_b->chunks[0], req);
  ASSERT_EQ(progress_b->downs.size(), 1u);
  EXPECT_EQ(progress_b->downs[0].peer, 0);
  EXPECT_TRUE(progress_b->downs[0].graceful);
  EXPECT_EQ(progress_b->downs[0].issued, 4u);
  EXPECT_NE(progress_b->downs[0].why.find("rank 0 (simulated)"), std::string::npos)
    << progress_b->downs[0].why;

  auto back = request(1, 0, 0, 3);
  caf::anon_send(link_b, send_atom::value, back, coll_b);
  sched.run();
  ASSERT_EQ(rec_b->failures.size(), 1u);
  EXPECT_NE(rec_b->failures[0].find("lost rank 0"), std::string::npos) << rec_b->failures[0];
}

// A reset takes both links down, not gracefully, naming the simulated peer.
TEST_F(LinkActorSim, BrokenLinkIsReportedOnBothSides) {
  net.break_link(0, 1);
  sched.run();
  ASSERT_EQ(progress_a->downs.size(), 1u);
  ASSERT_EQ(progress_b->downs.size(), 1u);
  EXPECT_FALSE(progress_a->downs[0].graceful);
  EXPECT_EQ(progress_a->downs[0].peer, 1);
  EXPECT_EQ(progress_b->downs[0].peer, 0);
  EXPECT_NE(progress_a->downs[0].why.find("connection reset by peer (simulated)"),
            std::string::npos)
    << progress_a->downs[0].why;
}

// An ABORT frame from rank 0 reaches rank 1's progress actor with its reason.
TEST_F(LinkActorSim, AbortReachesThePeersProgressActor) {
  caf::anon_send(link_a, mccl::actors::abort_atom::value, 0, std::string("out of patience"),
                 errc::aborted);
  sched.run();
  EXPECT_TRUE(progress_b->aborts.empty());
  trickle(7);
  ASSERT_EQ(progress_b->aborts.size(), 1u);
  EXPECT_EQ(progress_b->aborts[0].first, 0);
  EXPECT_EQ(progress_b->aborts[0].second, "out of patience");
}

// MCCL_TRANSPORT_CRC: a chunk corrupted on the wire (by the fault decorator
// under link_a) is NACKed by link_b and sent again by link_a from its own
// copy; the collective gets it once, intact, in order with the chunk behind
// it; acks let link_a drop its copies, and shutdown waits for them before BYE.
TEST_F(LinkActorSim, CrcMismatchIsNackedAndRetransmitted) {
  for (auto& l : {link_a, link_b})
    caf::anon_send_exit(l, caf::exit_reason::user_shutdown);
  sched.run();
  crc_ = true;
  extra_net_ = std::make_unique<sim_network>(true);
  auto [ca, cb] = extra_net_->connect(0, 1);
  auto recorder_ = std::make_shared<mccl::transport::fault_recorder>(0, "test", 1, "/dev/null/x");
  auto injector = std::make_shared<mccl::transport::fault_injector>(
    mccl::transport::parse_fault_scenario(
      R"({"faults": [{"kind": "corrupt", "link": "0->1", "seq": 0, "chunk": 1, "bits": 5}]})", "test"),
    0, recorder_);
  auto init_a = make_init(0, 1, injector->wrap(ca, 1), prog_a);
  init_a.recorder = recorder_;
  link_a = sys.spawn<link_actor>(init_a);
  link_b = sys.spawn<link_actor>(make_init(1, 0, cb, prog_b));
  sched.run();
  route_b(0, coll_b);
  auto first = send_from_a(0, 0, 1, 300);
  auto second = send_from_a(0, 0, 2, 40);
  sched.run();
  ASSERT_EQ(rec_b->chunks.size(), 2u);
  expect_chunk_crc(rec_b->chunks[0], first);
  expect_chunk_crc(rec_b->chunks[1], second);
  EXPECT_EQ(recorder_->fault_count(), 1u);
  EXPECT_EQ(recorder_->reaction_count("retransmit"), 1u);
  EXPECT_TRUE(progress_a->downs.empty());
  EXPECT_TRUE(progress_b->downs.empty());

  caf::anon_send(link_a, shutdown_atom::value, uint64_t{1});
  sched.run();
  ASSERT_EQ(progress_b->downs.size(), 1u);
  EXPECT_TRUE(progress_b->downs[0].graceful);
}

// A connection lost without BYE or ABORT: a later send is not failed by the
// link, which would blame this peer at once; the progress actor fails the op
// after its grace period, with the reason of an ABORT from another rank
// that may still explain the loss.
TEST_F(LinkActorSim, SendAfterAnUnexplainedLossIsLeftToTheProgressActor) {
  net.break_link(0, 1);
  sched.run();
  ASSERT_EQ(progress_b->downs.size(), 1u);
  EXPECT_FALSE(progress_b->downs[0].graceful);
  caf::anon_send(link_b, send_atom::value, request(0, 0, 0, 3), coll_b);
  sched.run();
  EXPECT_TRUE(rec_b->failures.empty()) << rec_b->failures[0];
}

// ---- receive in place (collectives/landing.hpp) ----------------------------

namespace {

/// The signature the test's frames carry (their op fields are zero).
mccl::op_signature test_signature() {
  return mccl::unpack_signature(mccl::wire::frame_header{});
}

} // namespace

// A chunk with a spot lands there; one whose length differs, a second copy
// and one without a spot arrive in staging memory and leave the caller's
// buffer alone.
TEST_F(LinkActorSim, ChunksLandInPlaceOnceAndOnlyWhereTheyFit) {
  std::vector<uint8_t> dst(100, 0xEE);
  auto map = std::make_shared<mccl::landing_map>(test_signature());
  map->add(0, 2, 0, dst.data(), 40);
  map->add(0, 2, 1, dst.data() + 40, 40);
  map->close_additions();
  caf::anon_send(link_b, route_atom::value, uint64_t{0}, coll_b, map);
  sched.run();

  auto fits = send_from_a(0, 2, 0, 40);
  auto too_short = send_from_a(0, 2, 1, 30);
  auto again = send_from_a(0, 2, 0, 40);
  auto no_spot = send_from_a(0, 2, 2, 10);
  sched.run();
  trickle(1000);

  ASSERT_EQ(rec_b->chunks.size(), 4u);
  const auto& landed = rec_b->chunks[0];
  EXPECT_EQ(landed.landed, dst.data());
  EXPECT_EQ(landed.buffer, nullptr);
  EXPECT_EQ(std::memcmp(dst.data(), fits.data, 40), 0);
  for (std::size_t i = 1; i < 4; ++i)
    EXPECT_EQ(rec_b->chunks[i].landed, nullptr) << "chunk " << i;
  expect_chunk(rec_b->chunks[1], too_short);
  expect_chunk(rec_b->chunks[2], again);
  expect_chunk(rec_b->chunks[3], no_spot);
  for (std::size_t i = 40; i < dst.size(); ++i)
    ASSERT_EQ(dst[i], 0xEE) << "byte " << i << " was written";
}

// A chunk that went by before its spot was added (it came before the op was
// routed) is never landed later: a second copy must not overwrite what the
// algorithm copied itself, possibly after the op completed.
TEST_F(LinkActorSim, AChunkPassedOnBeforeItsSpotExistedNeverLands) {
  send_from_a(0, 0, 5, 16);
  sched.run();
  trickle(1000); // early: no route yet
  EXPECT_TRUE(rec_b->chunks.empty());

  std::vector<uint8_t> dst(16, 0xEE);
  auto map = std::make_shared<mccl::landing_map>(test_signature());
  caf::anon_send(link_b, route_atom::value, uint64_t{0}, coll_b, map);
  sched.run();
  ASSERT_EQ(rec_b->chunks.size(), 1u); // handed over from the early frames
  map->add(0, 0, 5, dst.data(), 16);   // the algorithm's start() runs later
  map->close_additions();

  send_from_a(0, 0, 5, 16);
  sched.run();
  trickle(1000);
  ASSERT_EQ(rec_b->chunks.size(), 2u);
  EXPECT_EQ(rec_b->chunks[1].landed, nullptr);
  for (auto b : dst)
    ASSERT_EQ(b, 0xEE);
}

// An abort while a payload is being read into the caller's buffer: the
// rest goes to scratch memory and the frame is dropped.
TEST_F(LinkActorSim, AbortStopsALandingPayloadMidway) {
  std::vector<uint8_t> dst(64, 0xEE);
  auto map = std::make_shared<mccl::landing_map>(test_signature());
  map->add(0, 0, 0, dst.data(), 64);
  map->close_additions();
  caf::anon_send(link_b, route_atom::value, uint64_t{0}, coll_b, map);
  sched.run();
  auto req = send_from_a(0, 0, 0, 64);
  sched.run();
  net.deliver(0, 1, mccl::wire::header_size + 10);
  sched.run();
  EXPECT_EQ(std::memcmp(dst.data(), req.data, 10), 0); // landing had begun

  caf::anon_send(link_b, mccl::actors::abort_atom::value, 1, std::string("giving up"), errc::aborted);
  sched.run();
  trickle(1000);
  EXPECT_TRUE(rec_b->chunks.empty());
  for (std::size_t i = 10; i < dst.size(); ++i)
    ASSERT_EQ(dst[i], 0xEE) << "byte " << i << " was written after the abort";
}
