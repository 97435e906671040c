// The engine's routing and failure handling, end to end on simulated ranks
// (sim_world.hpp): chunks of an op a rank has not started yet wait for it
// without holding other ops up; a connection lost without explanation fails
// ops only after the grace period in which an ABORT may explain it, naming
// every peer lost in that period; a peer
// that finalized is named by the ops that can no longer involve it; large
// collectives issued together all complete, and an abort fails those still
// waiting for their turn.

#include "collectives/engine/engine.hpp"
#include <mccl/metrics.hpp>
#include <mccl/types.hpp>

#include <optional>
#include <string>
#include <vector>

#include "sim_world.hpp" // last: includes the CAF test DSL

using namespace mccl;
using namespace mccl::sim_test;

namespace {

class EngineSim : public sim_world_fixture<> {
protected:
  /// An allreduce of `n` int32 on `rank`: element i is rank * 1000 + i.
  work_ptr allreduce_on(sim_world& w, int rank, std::size_t n, std::vector<int32_t>*& buf) {
    buf = &w.alloc<int32_t>(n);
    for (std::size_t i = 0; i < n; ++i)
      (*buf)[i] = rank * 1000 + static_cast<int32_t>(i);
    return w.allreduce(rank, buf->data(), buf->data(), n, dtype::int32);
  }

  /// Issues a small allreduce on `rank`, whose links broke without BYE or
  /// ABORT: it must not fail before the grace period ends (an ABORT from
  /// another rank may still explain the loss), and must fail with
  /// peer_lost after it. Returns its error text ("" after a failed check).
  std::string failure_after_grace(sim_world& w, int rank) {
    std::vector<int32_t>* buf;
    auto op = allreduce_on(w, rank, 10, buf);
    EXPECT_TRUE(w.settle());
    EXPECT_FALSE(op->done()) << outcome(op);
    sched.advance_time(loss_grace);
    EXPECT_TRUE(w.settle());
    auto f = op->done() ? op->failure() : std::nullopt;
    if (!f) {
      ADD_FAILURE() << "not failed after the grace period: " << outcome(op);
      return "";
    }
    EXPECT_EQ(f->code(), errc::peer_lost) << f->what();
    return f->what();
  }

  /// Breaks the link between ranks 0 and 1 and issues a small allreduce on
  /// rank 1, which waits for the loss's grace period to end; then, with
  /// nothing run by CAF's scheduler, lets the grace period pass and kicks
  /// rank 1's engine once.
  work_ptr op_on_a_lost_link_after_one_kick(sim_world& w) {
    w.net().break_link(0, 1);
    EXPECT_TRUE(w.settle());
    std::vector<int32_t>* buf;
    auto op = allreduce_on(w, 1, 10, buf);
    EXPECT_TRUE(w.settle());
    EXPECT_FALSE(op->done()) << outcome(op);
    EXPECT_FALSE(w.core(1).revoked());
    sched.advance_time(loss_grace); // timers fire into mailboxes; nothing runs them
    w.core(1).kick();
    EXPECT_TRUE(w.core(1).revoked()) << "not revoked in the pass that found the loss";
    return op;
  }

  /// `op` failed with peer_lost, naming rank 0.
  static void expect_lost_rank_0(const work_ptr& op) {
    auto f = op->failure();
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->code(), errc::peer_lost) << f->what();
    EXPECT_NE(std::string(f->what()).find("lost rank 0"), std::string::npos) << f->what();
  }

  static void expect_sum(const std::vector<int32_t>& buf, int world) {
    for (std::size_t i = 0; i < buf.size(); ++i) {
      int32_t want = 0;
      for (int r = 0; r < world; ++r)
        want += r * 1000 + static_cast<int32_t>(i);
      ASSERT_EQ(buf[i], want) << "element " << i;
    }
  }
};

// Rank 0 runs ops 0 and 1; rank 1 has issued op 0 only. Op 1's chunks reach
// rank 1 first and wait there; op 0 completes on both ranks regardless.
// When rank 1 issues op 1, it finds them.
TEST_F(EngineSim, ChunksOfAnOpNotStartedWaitForItWithoutHoldingOthersUp) {
  auto& w = make_world(2, sim_config("allreduce=ring"));
  std::vector<int32_t>*a0, *a1, *b0, *b1;
  auto op0_r0 = allreduce_on(w, 0, 3000, a0);
  auto op1_r0 = allreduce_on(w, 0, 5000, a1);
  auto op0_r1 = allreduce_on(w, 1, 3000, b0);
  auto policy = round_robin();
  ASSERT_TRUE(w.drive({op0_r0, op0_r1}, policy));
  EXPECT_EQ(outcome(op0_r0), "ok");
  EXPECT_EQ(outcome(op0_r1), "ok");
  expect_sum(*a0, 2);
  expect_sum(*b0, 2);
  ASSERT_TRUE(w.drain(policy));
  EXPECT_FALSE(op1_r0->done()) << "rank 0's op 1 cannot end without rank 1";
  auto op1_r1 = allreduce_on(w, 1, 5000, b1);
  ASSERT_TRUE(w.drive({op1_r0, op1_r1}, policy));
  EXPECT_EQ(outcome(op1_r0), "ok");
  EXPECT_EQ(outcome(op1_r1), "ok");
  expect_sum(*a1, 2);
  expect_sum(*b1, 2);
  EXPECT_EQ(op1_r1->metrics().seq, 1u);
}

// A connection reset without BYE or ABORT: an op that needs the peer is
// not failed at once (that would blame the peer before an ABORT from
// another rank could explain the loss), but after the grace period, naming
// the lost rank.
TEST_F(EngineSim, AnUnexplainedLossFailsOpsAfterTheGracePeriod) {
  auto& w = make_world(2, sim_config());
  auto lost_links = get_metrics().lost_links;
  w.net().break_link(0, 1);
  ASSERT_TRUE(w.settle());
  auto what = failure_after_grace(w, 1);
  EXPECT_NE(what.find("lost rank 0"), std::string::npos) << what;
  EXPECT_NE(what.find("connection reset by peer (simulated)"), std::string::npos) << what;
  // The link actor exited with the finding and the supervisor revoked.
  EXPECT_GT(get_metrics().lost_links, lost_links);
  EXPECT_TRUE(w.core(1).revoked());
  EXPECT_NE(w.core(1).why_revoked().find("lost rank 0"), std::string::npos) << w.core(1).why_revoked();
}

// Two peers lost within one grace period (a rank that left because
// another died closes at the same moment as that one; which closure a
// survivor reads first is chance): the op's failure names both, the first
// found first.
TEST_F(EngineSim, PeersLostWithinOneGracePeriodAreAllNamed) {
  auto& w = make_world(3, sim_config());
  w.net().break_link(0, 2);
  ASSERT_TRUE(w.settle());
  w.net().break_link(1, 2);
  ASSERT_TRUE(w.settle());
  auto what = failure_after_grace(w, 2);
  auto first = what.find("lost rank 0");
  auto second = what.find("lost rank 1");
  EXPECT_NE(first, std::string::npos) << what;
  EXPECT_NE(second, std::string::npos) << what;
  EXPECT_LT(first, second) << what;
}

// The same loss, with nothing run by CAF's scheduler: the link actor and
// the supervisor are driven actors (actors/driven_actor.hpp), run by the
// leader right after the pass that finds the loss, so the supervisor's
// decision (revoked, the op failed naming the peer, the lost link counted)
// comes in that one kick, however busy CAF's workers are.
TEST_F(EngineSim, TheSupervisorDecidesALossInThePassThatFindsIt) {
  auto& w = make_world(2, sim_config());
  auto lost_links = get_metrics().lost_links;
  auto op = op_on_a_lost_link_after_one_kick(w);
  ASSERT_TRUE(op->done()) << "the supervisor did not run after the pass";
  expect_lost_rank_0(op);
  EXPECT_GT(get_metrics().lost_links, lost_links) << "the link actor's exit did not reach the supervisor";
}

// A loss no supervisor hears of (the peer's link actor ended already, as
// after finalize): the communicator is revoked in the pass that finds the
// loss, and the op fails supervisor_window later all the same, with the
// same text, from whoever drives the engine.
TEST_F(EngineSim, ALossNoSupervisorHearsOfFailsOpsAfterTheSupervisorWindow) {
  auto& w = make_world(2, sim_config());
  caf::anon_send_exit(caf::actor_cast<caf::actor>(w.link(1, 0)), caf::exit_reason::user_shutdown);
  ASSERT_TRUE(w.settle());
  auto op = op_on_a_lost_link_after_one_kick(w);
  EXPECT_FALSE(op->done()) << "failed before the supervisor's window ended: " << outcome(op);
  sched.advance_time(supervisor_window);
  w.core(1).kick();
  ASSERT_TRUE(op->done()) << "the op waits on a supervisor that never hears of the loss";
  expect_lost_rank_0(op);
  ASSERT_TRUE(w.settle());
  EXPECT_TRUE(w.core(1).revoked());
}

// Rank 0 finalizes after one op: its BYE says it issued one, so rank 1's
// next op fails at once naming rank 0 instead of waiting for it.
TEST_F(EngineSim, AfterAByeOpsTheDepartedRankNeverIssuedFailNamingIt) {
  auto& w = make_world(2, sim_config());
  std::vector<int32_t>*a, *b, *c;
  auto r0 = allreduce_on(w, 0, 100, a);
  auto r1 = allreduce_on(w, 1, 100, b);
  auto policy = round_robin(7);
  ASSERT_TRUE(w.drive({r0, r1}, policy));
  EXPECT_EQ(outcome(r1), "ok");
  expect_sum(*b, 2);
  w.core(0).finalize(std::chrono::milliseconds(0), false);
  ASSERT_TRUE(w.drain(policy));
  auto later = allreduce_on(w, 1, 100, c);
  ASSERT_TRUE(w.settle());
  ASSERT_TRUE(later->done());
  auto f = later->failure();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->code(), errc::peer_lost) << f->what();
  // Refused at its start, or failed as soon as the BYE was read.
  std::string why = f->what();
  EXPECT_TRUE(why.find("rank 0 has already finalized") != std::string::npos
              || why.find("rank 0 finalized after issuing 1 collective(s); it never issued this one")
                   != std::string::npos)
    << why;
}

// Large collectives issued together run one after the other (the engine
// holds the later ones back): every one completes with the right sums, in
// issue order on both ranks, also when the ranks issue them at different
// times.
TEST_F(EngineSim, LargeCollectivesIssuedTogetherAllComplete) {
  auto& w = make_world(2, sim_config("allreduce=ring"));
  constexpr std::size_t n = 300'000; // 1.2 MB each: larger than the window
  std::vector<std::vector<int32_t>*> a(3), b(3);
  std::vector<work_ptr> works;
  for (int i = 0; i < 3; ++i)
    works.push_back(allreduce_on(w, 0, n, a[i]));
  auto policy = round_robin(64 << 10);
  ASSERT_TRUE(w.drain(policy));
  for (int i = 0; i < 3; ++i)
    works.push_back(allreduce_on(w, 1, n, b[i]));
  ASSERT_TRUE(w.drive(works, policy));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(outcome(works[i]), "ok");
    EXPECT_EQ(outcome(works[3 + i]), "ok");
    EXPECT_EQ(works[i]->metrics().seq, static_cast<uint64_t>(i));
    expect_sum(*a[i], 2);
    expect_sum(*b[i], 2);
  }
}

// An abort while large collectives wait for their turn fails every one of
// them, the waiting ones included: none is left hanging.
TEST_F(EngineSim, AnAbortFailsCollectivesWaitingForTheirTurn) {
  auto& w = make_world(2, sim_config("allreduce=ring"));
  std::vector<int32_t>* buf;
  std::vector<work_ptr> works;
  for (int i = 0; i < 3; ++i)
    works.push_back(allreduce_on(w, 0, 300'000, buf));
  ASSERT_TRUE(w.settle());
  for (auto& op : works)
    EXPECT_FALSE(op->done()) << "rank 1 issued nothing yet";
  w.core(0).abort("test stops here");
  ASSERT_TRUE(w.settle());
  for (auto& op : works) {
    ASSERT_TRUE(op->done());
    auto f = op->failure();
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->code(), errc::aborted) << f->what();
    EXPECT_NE(std::string(f->what()).find("test stops here"), std::string::npos) << f->what();
  }
}

} // namespace
