// Tagged send / recv between ranks in one process, over the simulated
// network, under CAF's deterministic test coordinator (see sim_world.hpp).
//
// Matching rule (collectives/engine/p2p_matcher.hpp): a receive for tag t from
// rank s takes the lowest-numbered message with tag t that s sent us, once
// every message s sent us before it has been seen: per tag, messages are
// received in the order they were sent (MPI's non-overtaking rule). Here
// the ranks' engines run the rule end to end, with their progress actors
// in random order and bytes delivered in several orders, byte by byte
// included; frames of a later message arriving first are covered frame by
// frame in tests/unit/p2p_matcher_test.cpp. Some receives are posted before
// any byte moves, others only after every message has arrived (and waits
// as unexpected).

#include <mccl/types.hpp>

#include <gtest/gtest-spi.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "sim_world.hpp" // last: includes the CAF test DSL

using namespace mccl;
using namespace mccl::sim_test;

namespace {

struct send_spec {
  int from;
  int to;
  uint32_t tag;
  std::size_t count; ///< int32 elements
};

struct recv_spec {
  int rank;
  int from;
  uint32_t tag;
  std::size_t count;
  bool early; ///< posted before any delivery; else once every message arrived
  std::size_t want; ///< index of the send it must receive
};

/// Payload of send k: distinct across sends and positions.
int32_t value(std::size_t k, std::size_t i) {
  return static_cast<int32_t>((k + 1) * 1000000 + i + 1);
}

// Rank 0 sends rank 1 tags 5, 5, 9, 5 (40, 9000, 16 and 5000 bytes: one,
// three, one and two 4 KiB chunks). Rank 1 posts tag 9 and the first tag 5
// before anything moves, the other two tag 5 receives after everything
// arrived.
const std::vector<send_spec> two_rank_sends = {
  {0, 1, 5, 10},
  {0, 1, 5, 2250},
  {0, 1, 9, 4},
  {0, 1, 5, 1250},
};
const std::vector<recv_spec> two_rank_recvs = {
  {1, 0, 9, 4, true, 2},
  {1, 0, 5, 10, true, 0},
  {1, 0, 5, 2250, false, 1},
  {1, 0, 5, 1250, false, 3},
};

// The same from rank 0, with a send to rank 2 between them (message
// numbers are per peer), and rank 2 also sending rank 1 tags 5, 9, 5 (an
// empty message first, then 12000 and 132 bytes). Rank 1 takes rank 2's
// tag 9 first, which has to wait until rank 2's empty message was seen.
const std::vector<send_spec> three_rank_sends = {
  {0, 1, 5, 10},   // 0
  {0, 2, 5, 100},  // 1
  {0, 1, 5, 2250}, // 2
  {0, 1, 9, 4},    // 3
  {0, 1, 5, 1250}, // 4
  {2, 1, 5, 0},    // 5
  {2, 1, 9, 3000}, // 6
  {2, 1, 5, 33},   // 7
};
const std::vector<recv_spec> three_rank_recvs = {
  {1, 0, 9, 4, true, 3},     {1, 2, 9, 3000, true, 6},  {1, 0, 5, 10, true, 0},
  {2, 0, 5, 100, true, 1},   {1, 2, 5, 0, false, 5},    {1, 0, 5, 2250, false, 2},
  {1, 0, 5, 1250, false, 4}, {1, 2, 5, 33, false, 7},
};

enum class order {
  round_robin,
  byte_by_byte,
  random_1,
  random_2,
  random_3,
  highest_pipe_first,
  random_actors_1, ///< random actor interleaving, random deliveries
  random_actors_2,
};

const char* name_of(order o) {
  switch (o) {
    case order::round_robin: return "RoundRobin";
    case order::byte_by_byte: return "ByteByByte";
    case order::random_1: return "Random1";
    case order::random_2: return "Random2";
    case order::random_3: return "Random3";
    case order::highest_pipe_first: return "HighestPipeFirst";
    case order::random_actors_1: return "RandomActorOrder1";
    case order::random_actors_2: return "RandomActorOrder2";
  }
  return "?";
}

using p2p_param = std::tuple<int, order>; // world, order

std::string p2p_param_name(const ::testing::TestParamInfo<p2p_param>& info) {
  return std::to_string(std::get<0>(info.param)) + "Ranks_" + name_of(std::get<1>(info.param));
}

class P2PMatchingSim : public sim_world_fixture<::testing::TestWithParam<p2p_param>> {};

TEST_P(P2PMatchingSim, PerTagInSendOrderWhateverTheArrivalOrder) {
  auto [world, o] = GetParam();
  const auto& sends = world == 2 ? two_rank_sends : three_rank_sends;
  const auto& recvs = world == 2 ? two_rank_recvs : three_rank_recvs;
  auto& w = make_world(world, sim_config());

  delivery_policy policy;
  switch (o) {
    case order::round_robin: policy = round_robin(); break;
    case order::byte_by_byte: policy = byte_by_byte(); break;
    case order::random_1: policy = random_order(1); break;
    case order::random_2: policy = random_order(2); break;
    case order::random_3: policy = random_order(3); break;
    case order::highest_pipe_first: policy = highest_pipe_first(); break;
    case order::random_actors_1:
      w.set_random_actor_order(1);
      policy = random_order(11);
      break;
    case order::random_actors_2:
      w.set_random_actor_order(2);
      policy = random_order(12);
      break;
  }

  std::vector<std::vector<int32_t>*> payload;
  std::vector<work_ptr> send_works;
  for (std::size_t k = 0; k < sends.size(); ++k) {
    const auto& s = sends[k];
    auto& b = w.alloc<int32_t>(s.count);
    for (std::size_t i = 0; i < s.count; ++i)
      b[i] = value(k, i);
    payload.push_back(&b);
    send_works.push_back(w.send(s.from, b.data(), s.count, dtype::int32, s.to, s.tag));
  }
  std::vector<std::vector<int32_t>*> out(recvs.size());
  std::vector<work_ptr> recv_works(recvs.size());
  auto post = [&](std::size_t j) {
    const auto& r = recvs[j];
    out[j] = &w.alloc<int32_t>(r.count, -1);
    recv_works[j] = w.recv(r.rank, out[j]->data(), r.count, dtype::int32, r.from, r.tag);
  };
  std::vector<work_ptr> early, late;
  for (std::size_t j = 0; j < recvs.size(); ++j)
    if (recvs[j].early) {
      post(j);
      early.push_back(recv_works[j]);
    }
  ASSERT_TRUE(w.settle());

  // Phase 1: the early receives complete.
  ASSERT_TRUE(w.drive(early, policy)) << policy.name;
  // Phase 2: every byte arrives; the late receives' messages wait as
  // unexpected (none of those receives is posted yet).
  ASSERT_TRUE(w.drain(policy));
  for (auto& s : send_works)
    EXPECT_TRUE(s->done()) << "a send whose bytes all left is not done";
  // Phase 3: the late receives match at once, with nothing in flight.
  for (std::size_t j = 0; j < recvs.size(); ++j)
    if (!recvs[j].early) {
      post(j);
      late.push_back(recv_works[j]);
    }
  ASSERT_TRUE(w.settle());
  for (std::size_t j = 0; j < recvs.size(); ++j)
    EXPECT_TRUE(recv_works[j]->done()) << "receive " << j << " (posted after its message arrived)";
  auto all = send_works;
  all.insert(all.end(), recv_works.begin(), recv_works.end());
  ASSERT_TRUE(w.drive(all, policy)) << policy.name;

  for (std::size_t k = 0; k < sends.size(); ++k) {
    SCOPED_TRACE("send " + std::to_string(k));
    EXPECT_EQ(outcome(send_works[k]), "ok");
    auto m = send_works[k]->metrics();
    EXPECT_EQ(m.op, "send");
    EXPECT_EQ(m.algorithm, "p2p");
  }
  // Message numbers are per (sender, receiver), in submission order.
  std::map<std::pair<int, int>, uint64_t> next;
  for (std::size_t k = 0; k < sends.size(); ++k) {
    auto want = next[std::make_pair(sends[k].from, sends[k].to)]++;
    EXPECT_EQ(send_works[k]->metrics().seq, want) << "send " << k;
  }
  for (std::size_t j = 0; j < recvs.size(); ++j) {
    const auto& r = recvs[j];
    SCOPED_TRACE("receive " + std::to_string(j) + " on rank " + std::to_string(r.rank) + " from rank "
                 + std::to_string(r.from) + " tag " + std::to_string(r.tag));
    EXPECT_EQ(outcome(recv_works[j]), "ok");
    EXPECT_EQ(recv_works[j]->metrics().op, "recv");
    EXPECT_EQ(recv_works[j]->metrics().algorithm, "p2p");
    EXPECT_TRUE(*out[j] == *payload[r.want])
      << "did not get the payload of send " << r.want << " (first element "
      << (out[j]->empty() ? std::string("-") : std::to_string(out[j]->front())) << ")";
  }
  EXPECT_TRUE(w.net().pending().empty());
}

INSTANTIATE_TEST_SUITE_P(
  Orders, P2PMatchingSim,
  ::testing::Combine(::testing::Values(2, 3),
                     ::testing::Values(order::round_robin, order::byte_by_byte, order::random_1,
                                       order::random_2, order::random_3, order::highest_pipe_first,
                                       order::random_actors_1, order::random_actors_2)),
  p2p_param_name);

// ---- the non-overtaking rule, frame by frame ------------------------------------

class P2POrderSim : public sim_world_fixture<> {
protected:
  /// Rank 0 sends two tag 5 messages of 10 int32 each; rank 1 posts one
  /// tag 5 receive. Returns the works: send a, send b, the receive.
  std::vector<work_ptr> start(sim_world& w, std::vector<int32_t>*& got) {
    a = &w.alloc<int32_t>(10);
    b = &w.alloc<int32_t>(10);
    for (std::size_t i = 0; i < 10; ++i) {
      (*a)[i] = value(0, i);
      (*b)[i] = value(1, i);
    }
    got = &w.alloc<int32_t>(10, -1);
    auto sa = w.send(0, a->data(), 10, dtype::int32, 1, 5);
    auto sb = w.send(0, b->data(), 10, dtype::int32, 1, 5);
    auto r = w.recv(1, got->data(), 10, dtype::int32, 0, 5);
    return {sa, sb, r};
  }

  static constexpr std::size_t frame = wire::header_size + 40;
  std::vector<int32_t>* a = nullptr;
  std::vector<int32_t>* b = nullptr;
};

// Control: in submission order the first frame on the wire is message 0,
// and it alone completes the receive.
TEST_F(P2POrderSim, InOrderTheFirstFrameCompletesTheReceive) {
  auto& w = make_world(2, sim_config());
  std::vector<int32_t>* got = nullptr;
  auto works = start(w, got);
  ASSERT_TRUE(w.settle());
  ASSERT_EQ(w.net().in_flight(0, 1), 2 * frame);
  EXPECT_EQ(w.net().deliver(0, 1, frame), frame);
  ASSERT_TRUE(w.settle());
  ASSERT_TRUE(works[2]->done());
  EXPECT_EQ(outcome(works[2]), "ok");
  EXPECT_TRUE(*got == *a);
}

// A receive posted while its message is half way: the first chunk has
// arrived (unexpected), the second is split in the middle, the third is
// still in flight. The receive takes the chunk that waited, and the rest
// goes straight to it.
TEST_F(P2POrderSim, ReceivePostedWhileItsMessageIsHalfWay) {
  auto& w = make_world(2, sim_config());
  auto& data = w.alloc<int32_t>(2250); // 9000 bytes: chunks of 4096, 4096, 808
  for (std::size_t i = 0; i < data.size(); ++i)
    data[i] = value(3, i);
  auto s = w.send(0, data.data(), data.size(), dtype::int32, 1, 5);
  ASSERT_TRUE(w.settle());
  ASSERT_EQ(w.net().in_flight(0, 1), 3 * wire::header_size + 9000);
  w.net().deliver(0, 1, wire::header_size + 4096 + wire::header_size + 1000);
  ASSERT_TRUE(w.settle());
  auto& got = w.alloc<int32_t>(2250, -1);
  auto r = w.recv(1, got.data(), got.size(), dtype::int32, 0, 5);
  ASSERT_TRUE(w.settle());
  EXPECT_FALSE(r->done());
  auto policy = round_robin(333);
  ASSERT_TRUE(w.drive({s, r}, policy));
  EXPECT_EQ(outcome(s), "ok");
  EXPECT_EQ(outcome(r), "ok");
  EXPECT_TRUE(got == data);
}

// ---- size mismatch -------------------------------------------------------------

class P2PSizeMismatchSim : public sim_world_fixture<::testing::TestWithParam<std::size_t>> {};

// Rank 0 sends 10 int32 (40 bytes); rank 1 receives `count` int32. The
// receive fails with invalid_argument naming both sizes; the communicator
// aborts, and rank 0 learns why from rank 1's ABORT frame.
TEST_P(P2PSizeMismatchSim, FailsNamingBothSizes) {
  auto count = GetParam();
  auto& w = make_world(2, sim_config());
  auto& data = w.alloc<int32_t>(10, 7);
  auto& into = w.alloc<int32_t>(count, -1);
  auto s = w.send(0, data.data(), 10, dtype::int32, 1, 5);
  auto r = w.recv(1, into.data(), count, dtype::int32, 0, 5);
  auto policy = round_robin(7); // the header in pieces too
  ASSERT_TRUE(w.drive({s, r}, policy));
  EXPECT_EQ(outcome(s), "ok");
  auto f = r->failure();
  ASSERT_TRUE(f.has_value()) << "the receive succeeded";
  EXPECT_EQ(f->code(), errc::invalid_argument) << f->what();
  std::string why = f->what();
  EXPECT_NE(why.find("sends 40 bytes"), std::string::npos) << why;
  EXPECT_NE(why.find("expects " + std::to_string(4 * count) + " bytes"), std::string::npos) << why;
  EXPECT_TRUE(std::all_of(into.begin(), into.end(), [](int32_t x) { return x == -1; }))
    << "bytes landed in the receive buffer";

  // Rank 1's ABORT frame reaches rank 0; rank 0's next op fails with the
  // same code and names rank 1. (A receive: a send with CRC is done once
  // its bytes are copied, possibly before the ABORT waiting in the socket
  // was read.)
  ASSERT_TRUE(w.drain(policy));
  auto& back = w.alloc<int32_t>(10, -1);
  auto later = w.recv(0, back.data(), 10, dtype::int32, 1, 5);
  ASSERT_TRUE(w.settle());
  ASSERT_TRUE(later->done());
  auto lf = later->failure();
  ASSERT_TRUE(lf.has_value()) << "rank 0 did not learn of the abort";
  EXPECT_EQ(lf->code(), errc::invalid_argument) << lf->what();
  EXPECT_NE(std::string(lf->what()).find("rank 1 aborted"), std::string::npos) << lf->what();
}

INSTANTIATE_TEST_SUITE_P(Counts, P2PSizeMismatchSim, ::testing::Values(4, 16));

// ---- the harness itself ----------------------------------------------------------

class SimWorldHarness : public sim_world_fixture<> {};

// A receive nobody sends to: drive() reports a stall instead of hanging.
TEST_F(SimWorldHarness, DriveReportsAStallInsteadOfHanging) {
  auto& w = make_world(2, sim_config());
  auto& into = w.alloc<int32_t>(4);
  auto r = w.recv(1, into.data(), 4, dtype::int32, 0, 5);
  auto policy = round_robin();
  ::testing::TestPartResultArray failures;
  bool ok = true;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
      ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    ok = w.drive({r}, policy);
  }
  EXPECT_FALSE(ok);
  ASSERT_EQ(failures.size(), 1);
  EXPECT_NE(std::string(failures.GetTestPartResult(0).message()).find("stall"), std::string::npos)
    << failures.GetTestPartResult(0).message();
  EXPECT_FALSE(r->done());
}

} // namespace
