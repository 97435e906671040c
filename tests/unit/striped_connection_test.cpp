// The striped byte stream over local socket pairs (no network): how bytes
// are dealt to stripes, partial reads and writes against small socket
// buffers, a stripe failing mid-stream, and readiness following the stream.

#include "transport/tcp/striped_connection.hpp"

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <numeric>
#include <random>

using namespace mccl::transport;

namespace {

/// K socket pairs: `near` ends go into a striped_connection, `far` ends are
/// read or written raw by the test (or wrapped in the other end's stripes).
struct socket_pairs {
  std::vector<int> near, far;
  explicit socket_pairs(int k, int sndbuf = 0) {
    for (int i = 0; i < k; ++i) {
      int fds[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0)
        throw std::runtime_error("socketpair failed");
      if (sndbuf > 0)
        for (int fd : fds)
          ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
      near.push_back(fds[0]);
      far.push_back(fds[1]);
    }
  }
  /// Hands one side's descriptors to a striped_connection (which closes them).
  static std::vector<stripe_socket> stripes(std::vector<int>& fds, const char* side) {
    std::vector<stripe_socket> out;
    for (std::size_t i = 0; i < fds.size(); ++i)
      out.push_back({fds[i], std::string(side) + "-" + std::to_string(i)});
    fds.clear();
    return out;
  }
  ~socket_pairs() {
    for (int fd : near)
      ::close(fd);
    for (int fd : far)
      ::close(fd);
  }
};

std::vector<uint8_t> stream_bytes(std::size_t n) {
  std::vector<uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<uint8_t>(i * 7 + i / 251);
  return v;
}

std::vector<uint8_t> read_raw(int fd) {
  std::vector<uint8_t> out(1 << 16);
  auto n = ::recv(fd, out.data(), out.size(), MSG_DONTWAIT);
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

} // namespace

TEST(striped_connection, deals_segments_round_robin) {
  auto monitor = std::make_shared<readiness_monitor>();
  socket_pairs sp(3);
  striped_connection conn(monitor, socket_pairs::stripes(sp.near, "s"), "rank 1 (test)", 8);
  auto data = stream_bytes(50);
  // Two gathered buffers whose boundary falls inside a segment.
  iovec iov[2] = {{data.data(), 13}, {data.data() + 13, 37}};
  auto r = conn.write_some(iov, 2);
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_EQ(r.bytes, 50u);
  // Stripe i holds segments i, i+3, ...: bytes [8i, 8i+8), [8i+24, 8i+32), ...
  for (int s = 0; s < 3; ++s) {
    std::vector<uint8_t> expect;
    for (std::size_t seg = s; seg * 8 < data.size(); seg += 3)
      for (std::size_t b = seg * 8; b < std::min(data.size(), seg * 8 + 8); ++b)
        expect.push_back(data[b]);
    EXPECT_EQ(read_raw(sp.far[s]), expect) << "stripe " << s;
  }
}

TEST(striped_connection, reads_segments_in_stripe_order) {
  auto monitor = std::make_shared<readiness_monitor>();
  socket_pairs sp(2);
  striped_connection conn(monitor, socket_pairs::stripes(sp.near, "s"), "rank 1 (test)", 4);
  // Stripe 1's segment arrives first: nothing may be read until stripe 0's.
  ASSERT_EQ(::send(sp.far[1], "4567", 4, 0), 4);
  char buf[16] = {};
  auto r = conn.read_some(buf, sizeof buf);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_FALSE(r.closed);
  ASSERT_EQ(::send(sp.far[0], "0123", 4, 0), 4);
  ASSERT_EQ(::send(sp.far[0], "89", 2, 0), 2);
  r = conn.read_some(buf, sizeof buf);
  ASSERT_EQ(r.bytes, 10u);
  EXPECT_EQ(std::string(buf, 10), "0123456789");
  // A read shorter than the segment continues where it stopped.
  ASSERT_EQ(::send(sp.far[0], "ab", 2, 0), 2);
  r = conn.read_some(buf, 1);
  ASSERT_EQ(r.bytes, 1u);
  EXPECT_EQ(buf[0], 'a');
  r = conn.read_some(buf, sizeof buf);
  ASSERT_EQ(r.bytes, 1u);
  EXPECT_EQ(buf[0], 'b');
}

// Two striped ends over small socket buffers, random gather and read sizes:
// every write and read is partial somewhere, and the bytes arrive intact.
TEST(striped_connection, partial_reads_and_writes_keep_the_stream_intact) {
  for (int k : {2, 3, 4}) {
    auto monitor = std::make_shared<readiness_monitor>();
    socket_pairs sp(k, 4096);
    striped_connection tx(monitor, socket_pairs::stripes(sp.near, "tx"), "tx", 1000);
    striped_connection rx(monitor, socket_pairs::stripes(sp.far, "rx"), "rx", 1000);
    auto data = stream_bytes(std::size_t{1} << 20);
    std::vector<uint8_t> got(data.size());
    std::mt19937 rng(k);
    std::size_t sent = 0, received = 0;
    int partial_writes = 0;
    while (received < data.size()) {
      if (sent < data.size()) {
        // Up to three gathered pieces of random sizes.
        iovec iov[3];
        int n = 0;
        std::size_t at = sent;
        for (; n < 3 && at < data.size(); ++n) {
          auto len = std::min<std::size_t>(data.size() - at, 1 + rng() % 9000);
          iov[n] = {data.data() + at, len};
          at += len;
        }
        auto r = tx.write_some(iov, n);
        ASSERT_TRUE(r.error.empty()) << r.error;
        partial_writes += r.bytes < at - sent;
        sent += r.bytes;
      }
      auto want = std::min<std::size_t>(data.size() - received, 1 + rng() % 5000);
      auto r = rx.read_some(got.data() + received, want);
      ASSERT_FALSE(r.closed) << r.error;
      received += r.bytes;
    }
    EXPECT_EQ(got, data) << k << " stripes";
    EXPECT_GT(partial_writes, 0) << "the socket buffers never filled: the test lost its point";
  }
}

TEST(striped_connection, a_stripe_closed_mid_stream_names_the_stripe) {
  auto monitor = std::make_shared<readiness_monitor>();
  socket_pairs sp(3);
  striped_connection conn(monitor, socket_pairs::stripes(sp.near, "10.0.0.2:4000"), "rank 2", 4);
  ASSERT_EQ(::send(sp.far[0], "abcd", 4, 0), 4);
  ::close(sp.far[1]);
  sp.far[1] = -1;
  char buf[16];
  auto r = conn.read_some(buf, sizeof buf);
  EXPECT_EQ(r.bytes, 4u); // what arrived before the failure first
  EXPECT_FALSE(r.closed);
  r = conn.read_some(buf, sizeof buf);
  EXPECT_TRUE(r.closed);
  EXPECT_NE(r.error.find("stripe 1 of 3 (10.0.0.2:4000-1)"), std::string::npos) << r.error;

  // Writing: the segment for the closed stripe fails, naming it.
  auto data = stream_bytes(12);
  iovec iov{data.data(), data.size()};
  auto w = conn.write_some(&iov, 1);
  EXPECT_FALSE(w.error.empty());
  EXPECT_NE(w.error.find("stripe 1 of 3"), std::string::npos) << w.error;
}

TEST(striped_connection, poll_fd_follows_the_read_stripe) {
  auto monitor = std::make_shared<readiness_monitor>();
  socket_pairs sp(2);
  striped_connection conn(monitor, socket_pairs::stripes(sp.near, "s"), "rank 1", 4);
  ASSERT_EQ(::send(sp.far[1], "4567", 4, 0), 4);
  EXPECT_FALSE(readable(conn.poll_fd())) << "bytes on a stripe the stream does not wait on";
  ASSERT_EQ(::send(sp.far[0], "0123", 4, 0), 4);
  EXPECT_TRUE(readable(conn.poll_fd()));
  char buf[8];
  ASSERT_EQ(conn.read_some(buf, 4).bytes, 4u);
  EXPECT_TRUE(readable(conn.poll_fd())) << "stripe 1's segment is next and has arrived";
  ASSERT_EQ(conn.read_some(buf, 4).bytes, 4u);
  EXPECT_FALSE(readable(conn.poll_fd()));
  ASSERT_EQ(::send(sp.far[1], "cdef", 4, 0), 4);
  EXPECT_FALSE(readable(conn.poll_fd())) << "the stream waits on stripe 0 again";
  ASSERT_EQ(::send(sp.far[0], "89ab", 4, 0), 4);
  EXPECT_TRUE(readable(conn.poll_fd()));
}

TEST(striped_connection, poll_fd_reports_a_blocked_write_becoming_possible) {
  auto monitor = std::make_shared<readiness_monitor>();
  socket_pairs sp(2, 4096);
  striped_connection conn(monitor, socket_pairs::stripes(sp.near, "s"), "rank 1", 1 << 20);
  auto data = stream_bytes(std::size_t{1} << 20);
  iovec iov{data.data(), data.size()};
  auto r = conn.write_some(&iov, 1);
  ASSERT_LT(r.bytes, data.size()) << "stripe 0 should be full";
  EXPECT_FALSE(readable(conn.poll_fd()));
  while (!read_raw(sp.far[0]).empty()) {
  }
  EXPECT_TRUE(readable(conn.poll_fd())) << "stripe 0 has room again";
}

// A notification asked for after the stream moved on waits on the stripe
// the stream reached, not the one it was on.
TEST(striped_connection, notification_waits_on_the_stripe_the_stream_reached) {
  auto monitor = std::make_shared<readiness_monitor>();
  socket_pairs sp(2);
  striped_connection conn(monitor, socket_pairs::stripes(sp.near, "s"), "rank 1", 4);
  ASSERT_EQ(::send(sp.far[0], "0123", 4, 0), 4);
  char buf[4];
  ASSERT_EQ(conn.read_some(buf, 4).bytes, 4u); // now waiting on stripe 1
  std::promise<void> fired;
  auto done = fired.get_future();
  conn.notify_when_ready(false, [&] { fired.set_value(); });
  ASSERT_EQ(::send(sp.far[0], "zzzz", 4, 0), 4); // not what the stream waits for
  EXPECT_EQ(done.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  ASSERT_EQ(::send(sp.far[1], "4567", 4, 0), 4);
  EXPECT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

TEST(striped_connection, notify_after_close_fires_at_once) {
  auto monitor = std::make_shared<readiness_monitor>();
  socket_pairs sp(2);
  striped_connection conn(monitor, socket_pairs::stripes(sp.near, "s"), "rank 1", 4);
  conn.close();
  bool called = false;
  conn.notify_when_ready(false, [&] { called = true; });
  EXPECT_TRUE(called);
}
