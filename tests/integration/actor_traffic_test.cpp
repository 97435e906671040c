// Every op the engine runs is an op actor's state machine, and its path
// crosses no thread (actors/op_actor.hpp, docs/ARCHITECTURE.md): the
// per-op counts of metrics_summary::actor_messages and thread_wakeups,
// taken as the difference between a run of N ops and one of 2N (so that
// setting up and finalizing the communicators cancels out).

#include "rank_threads.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

using mccl_test::run_ranks;

namespace {

struct per_op {
  double messages = 0;
  double wakeups = 0;
};

/// Both ranks (threads of this process, so the counters hold both) run
/// `ops` allreduces of `count` floats, each waited for by its caller.
mccl::actor_traffic run(int ops, std::size_t count) {
  mccl::runtime rt;
  mccl::config_overrides o;
  o.set("MCCL_CONNECT_TIMEOUT_MS", 10000);
  // Over TCP: the engine's path. (Ranks of one host over shared memory
  // run ops up to MCCL_SHM_BOARD_BYTES on the host board, which is not
  // an op actor yet.)
  o.set("MCCL_TRANSPORT", "tcp");
  auto before = mccl::get_actor_traffic();
  run_ranks(rt, 2, o, [&](mccl::communicator& comm) {
    std::vector<float> v(count);
    for (int i = 0; i < ops; ++i) {
      std::fill(v.begin(), v.end(), static_cast<float>(comm.rank() + i));
      comm.allreduce(v.data(), v.size()).wait();
      ASSERT_EQ(v[count - 1], static_cast<float>(1 + 2 * i)) << "op " << i;
    }
  });
  auto after = mccl::get_actor_traffic();
  return {after.actor_messages - before.actor_messages, after.thread_wakeups - before.thread_wakeups};
}

per_op measure(int ops, std::size_t count) {
  auto once = run(ops, count);
  auto twice = run(2 * ops, count);
  double n = 2.0 * ops; // both ranks ran `ops` more ops
  return {(static_cast<double>(twice.actor_messages) - static_cast<double>(once.actor_messages)) / n,
          (static_cast<double>(twice.thread_wakeups) - static_cast<double>(once.thread_wakeups)) / n};
}

} // namespace

TEST(ActorTraffic, ASmallAllreduceIsThreeMessagesToItsActorAndNoWakeUp) {
  // 16 floats, 2 ranks (oneshot): start, its peer's chunk in, its own
  // chunk sent. The caller drives it to its end: no thread is woken.
  auto p = measure(100, 16);
  EXPECT_DOUBLE_EQ(p.messages, 3.0);
  EXPECT_LE(p.wakeups, 0.05);
}

TEST(ActorTraffic, ALargeAllreduceSendsAChunkMessagePerChunkAndWakesNoThread) {
  // 16 MiB: many chunks each way, each a chunk message in and a sent
  // message out, all on the caller's thread.
  auto p = measure(4, 4u << 20);
  EXPECT_GT(p.messages, 20.0);
  EXPECT_LE(p.wakeups, 0.5);
}
