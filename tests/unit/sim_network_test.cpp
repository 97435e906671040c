// The simulated network (transport/sim/sim_network.hpp): two-stage pipes whose
// delivery the test controls, close/reset semantics, capacity and partial
// writes, and when notifications fire.

#include "transport/sim/sim_network.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using mccl::transport::connection_ptr;
using mccl::transport::io_result;
using mccl::transport::sim_network;
using mccl::transport::sim_pipe_id;

namespace {

io_result write_str(const connection_ptr& c, const std::string& s) {
  iovec iov{const_cast<char*>(s.data()), s.size()};
  return c->write_some(&iov, 1);
}

std::string read_str(const connection_ptr& c, std::size_t max = 4096) {
  std::string out(max, '\0');
  auto r = c->read_some(out.data(), max);
  EXPECT_TRUE(r.error.empty()) << r.error;
  out.resize(r.bytes);
  return out;
}

/// Counts how often a notification ran.
struct counter {
  int n = 0;
  std::function<void()> cb() {
    return [this] { ++n; };
  }
};

} // namespace

TEST(SimNetwork, WrittenBytesAreNotReadableBeforeDeliver) {
  sim_network net;
  auto [a, b] = net.connect(0, 1);
  EXPECT_EQ(a->description(), "rank 1 (simulated)");
  EXPECT_EQ(b->description(), "rank 0 (simulated)");
  auto w = write_str(a, "hello");
  EXPECT_EQ(w.bytes, 5u);
  EXPECT_TRUE(w.error.empty());
  char buf[16];
  auto r = b->read_some(buf, sizeof buf);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_FALSE(r.closed);
  EXPECT_EQ(net.in_flight(0, 1), 5u);
  EXPECT_EQ(net.readable(0, 1), 0u);
  EXPECT_EQ(net.pending(), (std::vector<sim_pipe_id>{{0, 1, 5}}));
  EXPECT_EQ(net.deliver(0, 1), 5u);
  EXPECT_TRUE(net.pending().empty());
  EXPECT_EQ(read_str(b), "hello");
  EXPECT_EQ(read_str(b), "");
}

TEST(SimNetwork, DeliverIsFifoAndMayBePartial) {
  sim_network net;
  auto [a, b] = net.connect(3, 7);
  write_str(a, "abc");
  std::string x = "de", y = "fgh";
  iovec iov[2] = {{x.data(), x.size()}, {y.data(), y.size()}};
  EXPECT_EQ(a->write_some(iov, 2).bytes, 5u);
  EXPECT_EQ(net.deliver(3, 7, 2), 2u);
  EXPECT_EQ(read_str(b), "ab");
  EXPECT_EQ(net.deliver(3, 7, 4), 4u);
  EXPECT_EQ(net.pending(), (std::vector<sim_pipe_id>{{3, 7, 2}}));
  EXPECT_EQ(read_str(b, 3), "cde");
  EXPECT_EQ(read_str(b), "f");
  EXPECT_EQ(net.deliver(3, 7), 2u);
  EXPECT_EQ(net.deliver(3, 7), 0u);
  EXPECT_EQ(read_str(b), "gh");
  EXPECT_THROW(net.deliver(3, 4), std::invalid_argument);
}

TEST(SimNetwork, DirectionsAreIndependentAndDeliverAllIsOrdered) {
  sim_network net;
  auto m = net.mesh(3);
  ASSERT_EQ(m.size(), 3u);
  for (int r = 0; r < 3; ++r)
    for (int p = 0; p < 3; ++p)
      EXPECT_EQ(m[r][p] == nullptr, r == p);
  write_str(m[2][0], "2to0");
  write_str(m[0][1], "0to1");
  write_str(m[1][0], "1to0!");
  EXPECT_EQ(net.pending(), (std::vector<sim_pipe_id>{{0, 1, 4}, {1, 0, 5}, {2, 0, 4}}));
  EXPECT_EQ(net.deliver(1, 0), 5u);
  EXPECT_EQ(read_str(m[0][2]), "");
  EXPECT_EQ(read_str(m[0][1]), "1to0!");
  EXPECT_EQ(net.deliver_all(), 8u);
  EXPECT_EQ(read_str(m[0][2]), "2to0");
  EXPECT_EQ(read_str(m[1][0]), "0to1");
  EXPECT_THROW(net.connect(1, 2), std::invalid_argument);
  EXPECT_THROW(net.connect(1, 1), std::invalid_argument);
}

TEST(SimNetwork, AutoDeliver) {
  sim_network net(true);
  auto [a, b] = net.connect(0, 1);
  counter rd;
  b->notify_when_ready(false, rd.cb());
  write_str(a, "now");
  EXPECT_EQ(rd.n, 1);
  EXPECT_TRUE(net.pending().empty());
  EXPECT_EQ(read_str(b), "now");
  net.set_auto_deliver(false);
  write_str(a, "later");
  EXPECT_EQ(read_str(b), "");
  net.set_auto_deliver(true); // flushes what is in flight
  EXPECT_EQ(read_str(b), "later");
}

TEST(SimNetwork, ReadNotificationFiresOnDeliver) {
  sim_network net;
  auto [a, b] = net.connect(0, 1);
  counter rd;
  b->notify_when_ready(false, rd.cb());
  EXPECT_EQ(rd.n, 0);
  write_str(a, "xyz");
  EXPECT_EQ(rd.n, 0); // written is not delivered
  EXPECT_EQ(net.deliver(0, 1, 1), 1u);
  EXPECT_EQ(rd.n, 1);
  EXPECT_EQ(net.deliver(0, 1, 1), 1u);
  EXPECT_EQ(rd.n, 1); // each callback runs once
  // Condition already true: runs at once, on this thread.
  b->notify_when_ready(false, rd.cb());
  EXPECT_EQ(rd.n, 2);
  EXPECT_EQ(read_str(b), "xy");
  // Unlimited capacity: always writable.
  counter wr;
  a->notify_when_ready(true, wr.cb());
  EXPECT_EQ(wr.n, 1);
  // deliver_all fires too.
  b->notify_when_ready(false, rd.cb());
  EXPECT_EQ(rd.n, 2);
  EXPECT_EQ(net.deliver_all(), 1u);
  EXPECT_EQ(rd.n, 3);
}

TEST(SimNetwork, CloseGivesEofAfterTheDataAndBreaksThePeersWrites) {
  sim_network net;
  auto [a, b] = net.connect(0, 1);
  counter rd_b, rd_a;
  b->notify_when_ready(false, rd_b.cb());
  a->notify_when_ready(false, rd_a.cb());
  write_str(a, "last words");
  a->close();
  EXPECT_EQ(rd_a.n, 1); // own waiting notification: cancelled, runs once
  EXPECT_EQ(rd_b.n, 0); // FIN is behind the in-flight bytes
  EXPECT_EQ(net.deliver(0, 1, 4), 4u);
  EXPECT_EQ(rd_b.n, 1);
  EXPECT_EQ(read_str(b), "last");
  char buf[32];
  auto r = b->read_some(buf, sizeof buf);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_FALSE(r.closed); // " words" still in flight
  counter rd_b2;
  b->notify_when_ready(false, rd_b2.cb());
  net.deliver_all();
  EXPECT_EQ(rd_b2.n, 1);
  EXPECT_EQ(read_str(b), " words");
  r = b->read_some(buf, sizeof buf);
  EXPECT_TRUE(r.closed);
  EXPECT_TRUE(r.error.empty());
  EXPECT_EQ(r.bytes, 0u);
  // EOF is a read condition: fires at once now.
  counter rd_b3;
  b->notify_when_ready(false, rd_b3.cb());
  EXPECT_EQ(rd_b3.n, 1);
  // Writing to the closed peer fails.
  auto w = write_str(b, "anyone?");
  EXPECT_EQ(w.bytes, 0u);
  EXPECT_EQ(w.error, "broken pipe (simulated)");
  // The closed end itself.
  EXPECT_FALSE(write_str(a, "x").error.empty());
  r = a->read_some(buf, sizeof buf);
  EXPECT_TRUE(r.closed);
  a->close(); // twice is harmless
}

TEST(SimNetwork, CloseWithNothingInFlightGivesEofAtOnce) {
  sim_network net;
  auto [a, b] = net.connect(0, 1);
  counter rd, wr;
  b->notify_when_ready(false, rd.cb());
  net.set_capacity(1, 0, 2);
  write_str(b, "12");
  b->notify_when_ready(true, wr.cb()); // full: waits
  EXPECT_EQ(wr.n, 0);
  a->close();
  EXPECT_EQ(rd.n, 1);
  EXPECT_EQ(wr.n, 1); // the write now fails, so it is "ready"
  EXPECT_EQ(write_str(b, "3").error, "broken pipe (simulated)");
  EXPECT_TRUE(net.pending().empty()); // bytes towards the closed end are dropped
  char c;
  EXPECT_TRUE(b->read_some(&c, 1).closed);
}

TEST(SimNetwork, DestructorCloses) {
  sim_network net;
  auto [a, b] = net.connect(0, 1);
  counter rd;
  b->notify_when_ready(false, rd.cb());
  a.reset();
  EXPECT_EQ(rd.n, 1);
  char c;
  EXPECT_TRUE(b->read_some(&c, 1).closed);
}

TEST(SimNetwork, BreakLinkResetsBothDirections) {
  sim_network net;
  auto [a, b] = net.connect(0, 1);
  write_str(a, "kept");
  net.deliver_all();
  write_str(a, "lost");
  counter rd_a, wr_b;
  a->notify_when_ready(false, rd_a.cb());
  net.break_link(1, 0);
  EXPECT_EQ(rd_a.n, 1);
  EXPECT_TRUE(net.pending().empty());
  EXPECT_EQ(read_str(b), "kept");
  char buf[8];
  auto r = b->read_some(buf, sizeof buf);
  EXPECT_TRUE(r.closed);
  EXPECT_EQ(r.error, "connection reset by peer (simulated)");
  EXPECT_FALSE(write_str(a, "x").error.empty());
  EXPECT_FALSE(write_str(b, "x").error.empty());
  b->notify_when_ready(true, wr_b.cb());
  EXPECT_EQ(wr_b.n, 1);
}

TEST(SimNetwork, CapacityGivesPartialWritesAndWriteNotifications) {
  sim_network net;
  net.set_capacity(8);
  auto [a, b] = net.connect(0, 1);
  std::string h = "HDR:", p = "payload";
  iovec iov[2] = {{h.data(), h.size()}, {p.data(), p.size()}};
  auto w = a->write_some(iov, 2);
  EXPECT_EQ(w.bytes, 8u); // header and the first 4 payload bytes
  EXPECT_TRUE(w.error.empty());
  EXPECT_EQ(write_str(a, "more").bytes, 0u); // full, no error: try later
  counter wr;
  a->notify_when_ready(true, wr.cb());
  EXPECT_EQ(wr.n, 0);
  net.deliver(0, 1, 3);
  EXPECT_EQ(wr.n, 0); // delivered bytes still count until read
  EXPECT_EQ(read_str(b, 2), "HD");
  EXPECT_EQ(wr.n, 1); // space freed by the read
  iovec rest{p.data() + 4, p.size() - 4};
  EXPECT_EQ(a->write_some(&rest, 1).bytes, 2u);
  net.deliver_all();
  EXPECT_EQ(read_str(b), "R:payloa");
  iovec last{p.data() + 6, 1};
  EXPECT_EQ(a->write_some(&last, 1).bytes, 1u);
  net.deliver_all();
  EXPECT_EQ(read_str(b), "d");
  // Raising the capacity of one direction releases a waiting writer.
  write_str(a, "12345678");
  counter wr2;
  a->notify_when_ready(true, wr2.cb());
  EXPECT_EQ(wr2.n, 0);
  net.set_capacity(0, 1, 0);
  EXPECT_EQ(wr2.n, 1);
  EXPECT_EQ(write_str(a, "9").bytes, 1u);
}

TEST(SimNetwork, CallbacksMayCallBackIntoTheNetwork) {
  sim_network net;
  auto [a, b] = net.connect(0, 1);
  std::string got;
  b->notify_when_ready(false, [&, b = b] { got = read_str(b); });
  write_str(a, "re-entrant");
  net.deliver_all();
  EXPECT_EQ(got, "re-entrant");
}
