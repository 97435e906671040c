// The shared-memory transport inside one process: the byte ring (wrap
// around, gathered and partial writes, the arming handshake, two threads
// streaming through a small ring), the segment (opened through /proc, a
// wrong nonce refused) and the connection over it with a loopback TCP
// doorbell (a sleeping side is woken, never lost; a close is read after the
// last bytes; a peer that vanishes without closing is seen) and the host
// board (banks reused safely over many ops, mismatches seen at once, waits
// ended by deadline, stop or departure, a sleeper woken by the post). The
// board's staged collectives: board_stage_test.cpp.

#include <mccl/error.hpp>
#include "collectives/algorithms/board_collectives.hpp"
#include "reducers/reduce.hpp"
#include "transport/shm/shm_board.hpp"
#include "board_views.hpp"
#include "transport/shm/shm_connection.hpp"
#include "transport/shm/shm_ring.hpp"
#include "transport/shm/shm_segment.hpp"
#include "transport/tcp/readiness.hpp"
#include "transport/tcp/tcp_connection.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

using namespace mccl::transport;
using namespace std::chrono_literals;

namespace {

std::vector<uint8_t> pattern(std::size_t n, unsigned seed = 0) {
  std::vector<uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<uint8_t>(i * 13 + i / 509 + seed);
  return v;
}

/// A ring in ordinary memory, as one process sees both ends.
struct local_ring {
  shm_ring_control control;
  std::vector<uint8_t> data;
  shm_ring writer, reader;
  explicit local_ring(std::size_t capacity)
    : data(capacity), writer(&control, data.data(), capacity), reader(&control, data.data(), capacity) {}
};

/// Two shm_connections over one segment, as two ranks would hold them, each
/// with its end of a loopback TCP connection as the doorbell.
struct shm_pair {
  std::shared_ptr<readiness_monitor> monitor = std::make_shared<readiness_monitor>();
  std::shared_ptr<shm_connection> a, b; // a created the segment
  int b_socket = -1;                    // b's doorbell descriptor (to fake a crash)

  explicit shm_pair(std::size_t ring_bytes, std::size_t single_copy_bytes = 0) {
    namespace asio = boost::asio;
    asio::io_context io;
    asio::ip::tcp::acceptor acceptor(io, {asio::ip::address_v4::loopback(), 0});
    asio::ip::tcp::socket near(io), far(io);
    near.connect(acceptor.local_endpoint());
    acceptor.accept(far);
    b_socket = far.native_handle();
    auto seg_a = shm_segment::create(pair_segment_bytes(ring_bytes));
    shm_segment seg_b;
    auto err = shm_segment::open(::getpid(), seg_a.fd(), pair_segment_bytes(ring_bytes), seg_a.nonce(), seg_b);
    if (!err.empty())
      throw std::runtime_error(err);
    seg_a.drop_fd();
    a = std::make_shared<shm_connection>(std::move(seg_a), ring_bytes, true,
                                         std::make_shared<tcp_connection>(monitor, std::move(near), "b"),
                                         "rank 1 over shared memory", single_copy_bytes);
    b = std::make_shared<shm_connection>(std::move(seg_b), ring_bytes, false,
                                         std::make_shared<tcp_connection>(monitor, std::move(far), "a"),
                                         "rank 0 over shared memory", single_copy_bytes);
  }
};

/// Waits as the engine does: asks for the descriptor (which arms the
/// wake-up), then polls it. False when nothing woke it within `limit`.
bool wait_like_engine(connection& c, std::chrono::milliseconds limit) {
  pollfd p{c.poll_fd(), POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(limit.count())) > 0;
}

/// Moves `out` through `c` with engine-style waits, as gathered writes of
/// pieces of the sizes in `pieces` (in turn); a short write is followed by
/// the rest, as the channel does. Fails the test if a wait is never woken.
void write_all(connection& c, const std::vector<uint8_t>& out,
               const std::vector<std::size_t>& pieces = {100000}) {
  std::size_t done = 0;
  std::size_t next = 0; // the piece at `done`
  std::size_t left = 0; // of that piece, when it was written in part
  while (done < out.size()) {
    iovec v[3];
    int n = 0;
    for (std::size_t at = done; n < 3 && at < out.size(); ++n) {
      auto piece = n == 0 && left > 0 ? left : pieces[(next + n) % pieces.size()];
      v[n] = {const_cast<uint8_t*>(out.data() + at), std::min(out.size() - at, piece)};
      at += v[n].iov_len;
    }
    auto r = c.write_some(v, n);
    ASSERT_FALSE(r.closed) << r.error;
    done += r.bytes;
    for (std::size_t i = 0, rest = r.bytes; i < static_cast<std::size_t>(n) && rest > 0; ++i) {
      if (rest >= v[i].iov_len) {
        rest -= v[i].iov_len;
        ++next;
        left = 0;
      } else {
        left = v[i].iov_len - rest;
        rest = 0;
      }
    }
    if (r.bytes == 0) {
      ASSERT_TRUE(wait_like_engine(c, 5000ms)) << "a writer waiting for room was never woken, at " << done;
    }
  }
}

std::vector<uint8_t> read_all(connection& c, std::size_t n) {
  std::vector<uint8_t> in(n);
  std::size_t done = 0;
  while (done < n) {
    auto r = c.read_some(in.data() + done, std::min<std::size_t>(n - done, 70001));
    EXPECT_FALSE(r.closed) << r.error;
    if (r.closed)
      break;
    done += r.bytes;
    if (r.bytes == 0 && !wait_like_engine(c, 5000ms)) {
      ADD_FAILURE() << "a reader waiting for bytes was never woken, at " << done;
      break;
    }
  }
  return in;
}

} // namespace

TEST(ShmRing, GatheredWritesWrapAroundAndStopWhenFull) {
  local_ring r(64);
  auto first = pattern(40, 1);
  iovec v{first.data(), first.size()};
  ASSERT_EQ(r.writer.write(&v, 1), 40u);
  std::vector<uint8_t> got(40);
  ASSERT_EQ(r.reader.read(got.data(), 30), 30);
  // 10 bytes left at offset 30..39; 50 more wrap past the end of the data.
  auto x = pattern(20, 2), y = pattern(40, 3);
  iovec two[2] = {{x.data(), x.size()}, {y.data(), y.size()}};
  EXPECT_EQ(r.writer.write(two, 2), 54u) << "only the room there is";
  EXPECT_EQ(r.writer.writable(), 0u);
  EXPECT_EQ(r.writer.write(two, 2), 0u);
  std::vector<uint8_t> all(64);
  ASSERT_EQ(r.reader.read(all.data(), all.size()), 64);
  std::vector<uint8_t> want(first.begin() + 30, first.end());
  want.insert(want.end(), x.begin(), x.end());
  want.insert(want.end(), y.begin(), y.begin() + 34);
  EXPECT_EQ(all, want);
  EXPECT_EQ(r.reader.read(all.data(), 1), 0);
}

TEST(ShmRing, ArmingSeesBytesAndRoomThatCameMeanwhile) {
  local_ring r(64);
  EXPECT_FALSE(r.reader.arm_reader()) << "empty: the reader may sleep";
  uint8_t byte = 7;
  iovec v{&byte, 1};
  r.writer.write(&v, 1);
  EXPECT_TRUE(r.reader.arm_reader()) << "a byte came: the reader must not sleep";
  EXPECT_FALSE(r.writer.take_reader_waiting()) << "the reader withdrew its flag";
  uint8_t got;
  r.reader.read(&got, 1);
  EXPECT_FALSE(r.reader.arm_reader());
  EXPECT_TRUE(r.writer.take_reader_waiting()) << "the writer sees the sleeper once";
  EXPECT_FALSE(r.writer.take_reader_waiting());
  auto fill = pattern(64);
  iovec f{fill.data(), fill.size()};
  ASSERT_EQ(r.writer.write(&f, 1), 64u);
  EXPECT_FALSE(r.writer.arm_writer()) << "full: the writer may sleep";
  r.reader.read(&got, 1);
  EXPECT_TRUE(r.reader.take_writer_waiting());
  EXPECT_TRUE(r.writer.arm_writer()) << "room came";
}

TEST(ShmRing, SplicesComeInStreamOrderAndAreReportedAsTheReaderTakesThem) {
  local_ring r(4096);
  r.writer.enable_splices(1000);
  EXPECT_EQ(r.reader.probe_splices(), 1) << std::strerror(errno);
  EXPECT_EQ(r.reader.probe_splices(), 0) << "decided once";
  // header, payload, header, payload, ... as the channel writes frames:
  // the payloads (>= 1000 bytes) are posted as splices, the rest is copied.
  std::vector<std::vector<uint8_t>> parts;
  for (int i = 0; i < 2 * (max_splices + 2); ++i)
    parts.push_back(pattern(i % 2 ? 1500 + i : 56, static_cast<uint8_t>(i)));
  std::vector<iovec> iov;
  std::vector<uint8_t> want;
  for (auto& p : parts) {
    iov.push_back({p.data(), p.size()});
    want.insert(want.end(), p.begin(), p.end());
  }
  // Only the first header can be reported: the first payload is open. The
  // writer stops at max_splices open ones.
  ASSERT_EQ(r.writer.write(iov.data(), static_cast<int>(iov.size())), 56u);
  EXPECT_FALSE(r.writer.arm_writer()) << "nothing taken yet: the writer may sleep";
  std::vector<uint8_t> got(want.size());
  std::size_t read = 0, reported = 56;
  std::size_t first_iov = 1, skip = 0; // where the unreported rest starts
  while (read < want.size()) {
    auto n = r.reader.read(got.data() + read, std::min<std::size_t>(700, want.size() - read));
    ASSERT_GE(n, 0) << std::strerror(errno);
    if (n == 0) {
      // The reader waits for more: the writer passes its rest again.
      std::vector<iovec> rest(iov.begin() + static_cast<long>(first_iov), iov.end());
      rest[0].iov_base = static_cast<uint8_t*>(rest[0].iov_base) + skip;
      rest[0].iov_len -= skip;
      auto w = r.writer.write(rest.data(), static_cast<int>(rest.size()));
      ASSERT_GT(w, 0u) << "the reader took bytes, so the writer reports some, at " << read;
      reported += w;
      for (skip += w; first_iov < iov.size() && skip >= iov[first_iov].iov_len; ++first_iov)
        skip -= iov[first_iov].iov_len;
      continue;
    }
    read += static_cast<std::size_t>(n);
    EXPECT_LE(reported, read + 56 * (max_splices + 2)) << "reported only behind the reader";
  }
  EXPECT_EQ(got, want);
  EXPECT_GE(r.reader.spliced(), (max_splices + 2) * 1500u);
  EXPECT_FALSE(r.reader.arm_reader()) << "all read";
}

TEST(ShmRing, ARevokedSpliceIsNeverReadAsData) {
  local_ring r(4096);
  r.writer.enable_splices(1000);
  ASSERT_EQ(r.reader.probe_splices(), 1);
  auto head = pattern(56, 1), payload = pattern(5000, 2);
  iovec v[2] = {{head.data(), head.size()}, {payload.data(), payload.size()}};
  ASSERT_EQ(r.writer.write(v, 2), 56u);
  EXPECT_TRUE(r.writer.unreported());
  std::vector<uint8_t> got(8000);
  ASSERT_EQ(r.reader.read(got.data(), 56), 56);
  ASSERT_EQ(r.reader.read(got.data(), 1000), 1000) << "the reader starts on the payload";
  r.writer.revoke_splices(); // the writer's caller lets its buffers go
  std::fill(payload.begin(), payload.end(), 0xEE);
  errno = 0;
  EXPECT_EQ(r.reader.read(got.data(), 4000), -1);
  EXPECT_EQ(errno, ECANCELED) << "what it copied after the revocation is not data";
}

TEST(ShmRing, TwoThreadsStreamThroughASmallRing) {
  local_ring r(4096);
  auto out = pattern(16 << 20);
  std::vector<uint8_t> in(out.size());
  std::thread writer([&] {
    std::size_t done = 0;
    while (done < out.size()) {
      iovec v{out.data() + done, std::min<std::size_t>(out.size() - done, 3000)};
      done += r.writer.write(&v, 1);
    }
  });
  std::size_t done = 0;
  while (done < in.size())
    done += r.reader.read(in.data() + done, std::min<std::size_t>(in.size() - done, 5000));
  writer.join();
  EXPECT_TRUE(in == out);
}

TEST(ShmSegment, OpensThroughProcAndRefusesAnotherNonce) {
  auto seg = shm_segment::create(1 << 16);
  shm_segment other;
  auto err = shm_segment::open(::getpid(), seg.fd(), 1 << 16, seg.nonce() + 1, other);
  EXPECT_NE(err.find("is not the peer's segment"), std::string::npos) << err;
  err = shm_segment::open(::getpid(), seg.fd(), 1 << 17, seg.nonce(), other);
  EXPECT_NE(err.find("size differs"), std::string::npos) << err;
  err = shm_segment::open(::getpid(), seg.fd(), 1 << 16, seg.nonce(), other);
  EXPECT_EQ(err, "");
  int fd = seg.fd();
  seg.drop_fd();
  err = shm_segment::open(::getpid(), fd, 1 << 16, seg.nonce(), other);
  EXPECT_NE(err.find("open /proc/"), std::string::npos) << "a dropped descriptor cannot be opened: " << err;
}

TEST(ShmConnection, StreamsBothWaysWakingSleepersThroughTheDoorbell) {
  shm_pair p(1 << 16); // much smaller than the stream: writers fill the ring and sleep
  auto ab = pattern(8 << 20, 1), ba = pattern(6 << 20, 2);
  auto a_reads = std::async(std::launch::async, [&] { return read_all(*p.a, ba.size()); });
  auto b_writes = std::async(std::launch::async, [&] { write_all(*p.b, ba); });
  auto b_reads = std::async(std::launch::async, [&] { return read_all(*p.b, ab.size()); });
  write_all(*p.a, ab);
  b_writes.get();
  EXPECT_TRUE(a_reads.get() == ba);
  EXPECT_TRUE(b_reads.get() == ab);
}

TEST(ShmConnection, LargeBuffersAreCopiedOnceStraightFromThePeersMemory) {
  shm_pair p(1 << 16, 32 << 10);
  // Small pieces through the ring between large ones read from the
  // writer's memory: the stream must come out in order all the same.
  std::vector<std::size_t> pieces{56, 100000, 3, 40000, 70000, 31 << 10};
  auto ab = pattern(8 << 20, 3), ba = pattern(6 << 20, 4);
  auto a_reads = std::async(std::launch::async, [&] { return read_all(*p.a, ba.size()); });
  auto b_writes = std::async(std::launch::async, [&] { write_all(*p.b, ba, pieces); });
  auto b_reads = std::async(std::launch::async, [&] { return read_all(*p.b, ab.size()); });
  write_all(*p.a, ab, pieces);
  b_writes.get();
  EXPECT_TRUE(a_reads.get() == ba);
  EXPECT_TRUE(b_reads.get() == ab);
  // Pieces of 32K and more are 210000 of every 241115 bytes; all but the
  // first few (before the reader proved it can read the writer) go once.
  EXPECT_GT(p.b->single_copy_bytes(), ab.size() / 2);
  EXPECT_GT(p.a->single_copy_bytes(), ba.size() / 2);
  // Without single copy, every byte goes through the ring.
  shm_pair q(1 << 16);
  auto c = pattern(1 << 20, 5);
  auto q_reads = std::async(std::launch::async, [&] { return read_all(*q.b, c.size()); });
  write_all(*q.a, c, pieces);
  EXPECT_TRUE(q_reads.get() == c);
  EXPECT_EQ(q.b->single_copy_bytes(), 0u);
}

TEST(ShmConnection, AnAbortWithAPayloadInFlightFailsTheLinkOnBothEnds) {
  shm_pair p(1 << 16, 32 << 10);
  // The reader accepts single copy at its first read.
  uint8_t byte;
  ASSERT_EQ(p.b->read_some(&byte, 1).bytes, 0u);
  auto payload = pattern(100000, 6);
  iovec v{payload.data(), payload.size()};
  auto w = p.a->write_some(&v, 1);
  ASSERT_FALSE(w.closed) << w.error;
  ASSERT_EQ(w.bytes, 0u) << "posted, not taken yet";
  EXPECT_FALSE(p.b->peer_abort()) << "no note before an abort";
  // The channel aborts and drops the frame; its ABORT cannot follow the
  // cut stream, so it waits beside it.
  p.a->release_buffers({2, static_cast<uint32_t>(mccl::errc::peer_lost), "lost rank 1: declared dead"});
  auto again = p.a->write_some(&v, 1);
  EXPECT_TRUE(again.closed);
  EXPECT_NE(again.error.find("single copy"), std::string::npos) << again.error;
  std::vector<uint8_t> in(payload.size());
  auto r = p.b->read_some(in.data(), in.size());
  EXPECT_TRUE(r.closed) << "the peer never takes a payload that was let go";
  EXPECT_NE(r.error.find("dropped a payload"), std::string::npos) << r.error;
  auto note = p.b->peer_abort();
  ASSERT_TRUE(note) << "the reader learns why the stream ended";
  EXPECT_EQ(note->origin, 2);
  EXPECT_EQ(note->code, static_cast<uint32_t>(mccl::errc::peer_lost));
  EXPECT_EQ(note->reason, "lost rank 1: declared dead");
  EXPECT_FALSE(p.a->peer_abort()) << "a note goes one way";
  // Without a payload in flight, an abort leaves the link as it is (the
  // note waits beside it all the same); the first note stays.
  shm_pair q(1 << 16, 32 << 10);
  q.a->release_buffers({0, static_cast<uint32_t>(mccl::errc::timeout), "first"});
  q.a->release_buffers({1, static_cast<uint32_t>(mccl::errc::aborted), "second"});
  ASSERT_TRUE(q.b->peer_abort());
  EXPECT_EQ(q.b->peer_abort()->reason, "first");
  auto small = pattern(100, 7);
  iovec s{small.data(), small.size()};
  EXPECT_EQ(q.a->write_some(&s, 1).bytes, small.size());
}

TEST(ShmConnection, ACloseIsReadAfterTheLastBytes) {
  shm_pair p(1 << 16);
  auto out = pattern(1000);
  iovec v{out.data(), out.size()};
  ASSERT_EQ(p.a->write_some(&v, 1).bytes, out.size());
  p.a->close();
  std::vector<uint8_t> in(out.size());
  std::size_t done = 0;
  while (done < in.size()) {
    auto r = p.b->read_some(in.data() + done, in.size() - done);
    ASSERT_FALSE(r.closed) << "closed before the last bytes were read";
    done += r.bytes;
    if (r.bytes == 0) {
      ASSERT_TRUE(wait_like_engine(*p.b, 5000ms));
    }
  }
  EXPECT_EQ(in, out);
  ASSERT_TRUE(wait_like_engine(*p.b, 5000ms)) << "the close wakes a sleeping reader";
  uint8_t byte;
  EXPECT_TRUE(p.b->read_some(&byte, 1).closed);
}

TEST(ShmConnection, APeerThatVanishesIsSeenBySleepingAndSpinningReaders) {
  shm_pair p(1 << 16);
  // As a crash does: the peer's socket goes, its ring is never closed.
  ::shutdown(p.b_socket, SHUT_RDWR);
  ASSERT_TRUE(wait_like_engine(*p.a, 5000ms)) << "a sleeping reader is woken by the lost socket";
  uint8_t byte;
  EXPECT_TRUE(p.a->read_some(&byte, 1).closed);

  shm_pair q(1 << 16);
  ::shutdown(q.b_socket, SHUT_RDWR);
  int polls = 0;
  while (!q.a->read_some(&byte, 1).closed && polls < 100000)
    ++polls;
  EXPECT_LT(polls, 1000) << "a spinning reader looks at the socket every few hundred empty polls";
}

// ---- the host board ----------------------------------------------------------

namespace {

board_tag tag(uint64_t v) {
  board_tag t;
  t.words[0] = v;
  return t;
}

shm_board::waiting patient(std::chrono::milliseconds limit = 5000ms) {
  shm_board::waiting how;
  how.spin = 50us;
  how.deadline = shm_board::clock::now() + limit;
  how.stop = [] { return false; };
  return how;
}

} // namespace

namespace {

/// `world` ranks on threads post `ops` board ops of `bytes` each (a pattern
/// of op and rank) through a board with banks of `slot`, each waiting for
/// all its peers and checking every peer's bytes: how many were wrong (a
/// bank overwritten before a rank read it, or read before it was written).
int exchange_errors(int world, std::size_t bytes, std::size_t slot, int ops) {
  board_views b(world, slot);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      std::vector<uint8_t> mine(bytes);
      for (int n = 0; n < ops; ++n) {
        for (std::size_t i = 0; i < bytes; ++i)
          mine[i] = static_cast<uint8_t>(n * 7 + r * 31 + i);
        b.ranks[r]->post(n, tag(7), mine.data(), bytes);
        if (b.ranks[r]->wait_all(n, n, tag(7), patient()).result != shm_board::wait_result::posted) {
          ++wrong;
          return;
        }
        for (int p = 0; p < world; ++p) {
          const uint8_t* theirs = b.ranks[r]->bytes_of(p, n);
          for (std::size_t i = 0; i < bytes; ++i)
            if (theirs[i] != static_cast<uint8_t>(n * 7 + p * 31 + i)) {
              ++wrong;
              break;
            }
        }
      }
    });
  for (auto& t : threads)
    t.join();
  return wrong.load();
}

} // namespace

TEST(ShmBoard, ThreeRanksExchangeManyOpsThroughTwoBanks) {
  EXPECT_EQ(exchange_errors(3, 4, 256, 2000), 0);
}

TEST(ShmBoard, FourRanksExchangeBytesInAndBeyondTheCounterLine) {
  // 100 bytes: the first 32 share the cache line of the bank's counter,
  // the rest follow it.
  EXPECT_EQ(exchange_errors(4, 100, 128, 1000), 0);
}

TEST(ShmBoard, AnotherTagOrAnotherPathIsSeenAtOnce) {
  board_views b(2, 64);
  b.ranks[1]->post(0, tag(2), nullptr, 0);
  auto w = b.ranks[0]->wait_all(0, 0, tag(1), patient());
  EXPECT_EQ(w.result, shm_board::wait_result::other_tag);
  EXPECT_EQ(w.theirs, tag(2));
  // Rank 1 issued seq 1 on the other path (noted, not posted).
  b.ranks[1]->note(1, tag(9));
  auto t0 = std::chrono::steady_clock::now();
  w = b.ranks[0]->wait_all(1, 1, tag(1), patient());
  EXPECT_EQ(w.result, shm_board::wait_result::other_path);
  EXPECT_EQ(w.theirs, tag(9));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

TEST(ShmBoard, WaitsEndOnDeadlineStopOrDeparture) {
  board_views b(2, 64);
  int asleep = 0;
  auto how = patient(150ms);
  how.asleep = [&] { ++asleep; };
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(b.ranks[0]->wait_all(0, 0, tag(1), how).result, shm_board::wait_result::timed_out);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 150ms);
  EXPECT_LT(took, 2s);
  EXPECT_GT(asleep, 0) << "a long wait sleeps (and lets the caller read its links meanwhile)";

  std::atomic<bool> stop{false};
  auto stopping = patient();
  stopping.stop = [&] { return stop.load(); };
  std::thread stopper([&] { std::this_thread::sleep_for(50ms); stop = true; });
  EXPECT_EQ(b.ranks[0]->wait_all(0, 0, tag(1), stopping).result, shm_board::wait_result::stopped);
  stopper.join();

  b.ranks[1]->depart(0);
  auto departed = b.ranks[0]->wait_all(0, 0, tag(1), patient());
  EXPECT_EQ(departed.result, shm_board::wait_result::departed);
  EXPECT_EQ(departed.peer, 1);
  EXPECT_EQ(departed.issued, 0u);
}

TEST(ShmBoard, AWaitForAllPeersReadsThemAllAndNamesTheLowestMissing) {
  board_views b(4, 64);
  b.ranks[2]->post(0, tag(1), nullptr, 0);
  b.ranks[3]->post(0, tag(1), nullptr, 0);
  auto w = b.ranks[0]->wait_all(0, 0, tag(1), patient(100ms));
  EXPECT_EQ(w.result, shm_board::wait_result::timed_out);
  EXPECT_EQ(w.peer, 1) << "the lowest rank that has not posted";
  EXPECT_EQ(w.posted, 2) << "ranks 2 and 3 posted";
  b.ranks[1]->post(0, tag(1), nullptr, 0);
  w = b.ranks[0]->wait_all(0, 0, tag(1), patient());
  EXPECT_EQ(w.result, shm_board::wait_result::posted);
  EXPECT_EQ(w.posted, 3);
}

TEST(ShmBoard, AnotherTagFromAHigherRankIsSeenWhileALowerOneHasNotPosted) {
  board_views b(4, 64);
  b.ranks[3]->post(0, tag(5), nullptr, 0);
  auto t0 = std::chrono::steady_clock::now();
  auto w = b.ranks[0]->wait_all(0, 0, tag(1), patient());
  EXPECT_EQ(w.result, shm_board::wait_result::other_tag);
  EXPECT_EQ(w.peer, 3);
  EXPECT_EQ(w.theirs, tag(5));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s) << "not after rank 1's deadline";
}

TEST(ShmBoard, ASleepingWaiterIsWokenByThePosts) {
  // Asleep on rank 1's counter, it is woken when rank 1 posts (last).
  board_views b(3, 64);
  auto how = patient();
  how.spin = 0us; // straight to the futex
  std::thread poster([&] {
    std::this_thread::sleep_for(20ms);
    b.ranks[2]->post(0, tag(1), nullptr, 0);
    std::this_thread::sleep_for(20ms);
    b.ranks[1]->post(0, tag(1), nullptr, 0);
  });
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(b.ranks[0]->wait_all(0, 0, tag(1), how).result, shm_board::wait_result::posted);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  poster.join();
}
