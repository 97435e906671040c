// Liveness on simulated ranks (sim_world.hpp) with a virtual clock: a peer
// is declared dead only when nothing at all arrives from it for
// MCCL_HEARTBEAT_MS x MCCL_HEARTBEAT_MISSES, however long an op runs and
// whichever pairs of ranks it leaves without data.
//
// The old failure, simulated: recursive doubling on 4 ranks exchanges data
// between ranks 0-1 and 2-3, then 0-2 and 1-3; ranks 0-3 and 1-2 never
// exchange a byte of it. Bytes trickle through the network so that the op
// runs eight times the liveness limit. Every rank must stay alive: the
// engines send heartbeats on the silent directions, whoever drives them.
// And the control: a rank whose bytes stop arriving altogether is named,
// by every peer, within the limit plus the watchdog's tick.

#include "collectives/engine/engine.hpp"
#include <mccl/types.hpp>

#include <string>
#include <vector>

#include "sim_world.hpp" // last: includes the CAF test DSL

using namespace mccl;
using namespace mccl::sim_test;
using namespace std::chrono_literals;

namespace {

constexpr auto heartbeat = 100ms;
constexpr int misses = 5;
constexpr auto limit = heartbeat * misses;
constexpr auto step = 20ms;
/// Per pipe and step: 1 KiB, so 256 KiB per rank and round take 256 steps.
constexpr std::size_t trickle = 1024;
constexpr std::size_t count = 65536; // float32 per rank: 256 KiB

config liveness_config() {
  auto cfg = sim_config("allreduce=rd", 16384);
  cfg.heartbeat = heartbeat;
  cfg.heartbeat_misses = misses;
  return cfg;
}

class LivenessSim : public sim_world_fixture<> {
protected:
  /// One step of virtual time: the timers that are due fire (the
  /// watchdog's tick runs a pass: heartbeats, deadlines, silences), then
  /// every pipe not in `frozen_from` moves up to `trickle` bytes.
  void advance(sim_world& w, int frozen_from = -1) {
    sched.advance_time(step);
    ASSERT_TRUE(w.settle());
    for (const auto& p : w.net().pending())
      if (p.from != frozen_from)
        w.net().deliver(p.from, p.to, trickle);
    ASSERT_TRUE(w.settle());
    elapsed += step;
  }

  std::vector<work_ptr> start_allreduce(sim_world& w) {
    std::vector<work_ptr> works;
    for (int r = 0; r < w.size(); ++r) {
      auto& b = w.alloc<float>(count, static_cast<float>(r + 1));
      works.push_back(w.allreduce(r, b.data(), b.data(), count, dtype::float32));
      bufs.push_back(&b);
    }
    return works;
  }

  std::chrono::milliseconds elapsed{0};
  std::vector<std::vector<float>*> bufs;
};

TEST_F(LivenessSim, APairWithoutDataDuringALongOpStaysAlive) {
  auto& w = make_world(4, liveness_config());
  auto works = start_allreduce(w);
  for (int i = 0; i < 2000; ++i) {
    bool all = true;
    for (auto& x : works)
      all &= x->done();
    if (all)
      break;
    advance(w);
  }
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(works[r]->done()) << "not done after " << elapsed.count() << " ms";
    EXPECT_EQ(outcome(works[r]), "ok");
    EXPECT_EQ(works[r]->metrics().algorithm, "rd");
    EXPECT_EQ((*bufs[r])[count - 1], 10.0f); // 1 + 2 + 3 + 4
  }
  // Long enough that a silent pair would have been declared dead several
  // times over.
  EXPECT_GT(elapsed, 8 * limit) << "the op was too short to show anything";
}

TEST_F(LivenessSim, ARankWhoseBytesStopArrivingIsNamedByEveryPeer) {
  auto& w = make_world(4, liveness_config());
  auto works = start_allreduce(w);
  for (int i = 0; i < 10; ++i)
    advance(w); // the op is well under way
  auto frozen_at = elapsed;
  for (int i = 0; i < 200 && !(works[0]->done() && works[1]->done() && works[2]->done()); ++i)
    advance(w, 3);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(works[r]->done()) << "rank 3 frozen for " << (elapsed - frozen_at).count()
                                  << " ms and nobody noticed";
    auto f = works[r]->failure();
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->code(), errc::peer_lost) << f->what();
    EXPECT_NE(std::string(f->what()).find("lost rank 3"), std::string::npos) << f->what();
  }
  // The limit, plus a heartbeat interval (the last bytes rank 3 sent may be
  // that old), plus the watchdog's tick.
  EXPECT_LE(elapsed - frozen_at, limit + heartbeat + 2 * step);
  EXPECT_GE(elapsed - frozen_at, limit - heartbeat) << "declared dead before the limit";
}

TEST_F(LivenessSim, TheWatchdogTicksAsOftenAsTheShortestOpTimeoutAndTheHeartbeatAsk) {
  auto cfg = liveness_config();
  cfg.heartbeat = 1000ms;
  auto& w = make_world(2, cfg);
  auto& core = w.core(0);
  // Idle: a quarter heartbeat interval.
  EXPECT_EQ(core.health_interval(), 250ms);
  // Busy under the configured timeout (an hour): no more often than idle.
  std::vector<float> buf(4);
  auto recv = [&](std::chrono::milliseconds timeout) {
    op_request r;
    r.kind = op_kind::recv;
    r.recv = buf.data();
    r.count = buf.size();
    r.type = dtype::float32;
    r.root = 1;
    r.tag = 7;
    r.timeout = timeout;
    return w.submit(0, std::move(r)); // rank 1 never sends: it stays in flight
  };
  auto first = recv(0ms);
  ASSERT_TRUE(w.settle());
  EXPECT_EQ(core.health_interval(), 250ms);
  // An op that may take 5 s fails at most 100 ms late.
  auto second = recv(5000ms);
  ASSERT_TRUE(w.settle());
  EXPECT_EQ(core.health_interval(), 100ms);
  // Never more often than every 20 ms.
  auto third = recv(200ms);
  ASSERT_TRUE(w.settle());
  EXPECT_EQ(core.health_interval(), 20ms);
  // And it fails within its timeout plus that tick.
  for (int i = 0; i < 20 && !third->done(); ++i) {
    sched.advance_time(20ms);
    ASSERT_TRUE(w.settle());
  }
  ASSERT_TRUE(third->done());
  ASSERT_TRUE(third->failure().has_value());
  EXPECT_EQ(third->failure()->code(), errc::timeout) << third->failure()->what();
}

} // namespace
