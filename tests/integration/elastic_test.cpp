// Elastic membership: shrink that excludes the rank serving the rendezvous
// store, grow (old ranks keep theirs, newcomers join), reconfigure (all or
// nothing, retried with a new uuid), and the errors of bad handles. Each
// rank is a thread with a runtime of its own, as a process would have, so
// its standby store (api/communicator/standby_store.hpp) goes when it does; ranks
// rendezvous through the default TCP store on a free loopback port.
// tests/python/test_elastic.py does the same with processes and SIGKILL.
#include <mccl/mccl.hpp>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0
      || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("no free port");
  ::close(fd);
  return ntohs(a.sin_port);
}

mccl::config_overrides settings() {
  mccl::config_overrides o;
  o.set("MCCL_TIMEOUT_MS", "10000");
  o.set("MCCL_CONNECT_TIMEOUT_MS", "8000");
  return o;
}

/// One rank: its own runtime (its "process") and its world communicator.
struct rank_process {
  std::unique_ptr<mccl::runtime> rt = std::make_unique<mccl::runtime>(settings());
  mccl::communicator world;
};

/// Runs fn(rank) on `n` threads and joins them; an exception in one is a
/// test failure naming the rank.
void on_threads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << r << ": " << e.what();
      }
    });
  for (auto& t : threads)
    t.join();
}

mccl::communicator world_of(mccl::runtime& rt, int rank, int world, int port,
                            const mccl::config_overrides& overrides = settings()) {
  mccl::comm_options o;
  o.rank = rank;
  o.world_size = world;
  o.master_addr = "127.0.0.1";
  o.master_port = port;
  o.overrides = overrides;
  return rt.create_communicator(o);
}

/// Counts arrivals; wait_for(n) returns once n have arrived. A rank that
/// leaves waits for the others to be done with it, as a process would
/// before it exits.
class arrivals {
public:
  void arrive() {
    std::lock_guard<std::mutex> g{m_};
    ++n_;
    cv_.notify_all();
  }
  void wait_for(int n) {
    std::unique_lock<std::mutex> g{m_};
    cv_.wait(g, [&] { return n_ >= n; });
  }

private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_ = 0;
};

/// Every member allreduces `mine`; each checks the sum it expects.
void expect_sum(mccl::communicator& c, int64_t mine, int64_t expected, const std::string& what) {
  std::vector<int64_t> v(4099, mine);
  c.allreduce(v.data(), v.size()).wait();
  for (auto x : v)
    ASSERT_EQ(x, expected) << what << ", rank " << c.rank();
}

// ---- shrink without the store's host -------------------------------------------

TEST(Elastic, ShrinkExcludingRankZeroMeetsInTheLowestSurvivorsStandbyStore) {
  const int world = 4;
  int port = free_port();
  std::vector<rank_process> ranks(world);
  std::promise<void> zero_gone;
  auto gone = zero_gone.get_future().share();
  arrivals before, after;
  on_threads(world, [&](int r) {
    ranks[r].world = world_of(*ranks[r].rt, r, world, port);
    expect_sum(ranks[r].world, r + 1, 10, "before");
    before.arrive();
    if (r == 0) {
      // Rank 0's process goes, and with it the store at MASTER_PORT.
      before.wait_for(world);
      ranks[0].world.finalize();
      ranks[0].rt.reset();
      zero_gone.set_value();
      return;
    }
    gone.wait();
    auto start = clock_type::now();
    auto small = ranks[r].world.shrink({0});
    auto took = clock_type::now() - start;
    EXPECT_LT(took, 3s) << "rank " << r;
    EXPECT_EQ(small.size(), 3);
    EXPECT_EQ(small.rank(), r - 1);
    expect_sum(small, r + 1, 2 + 3 + 4, "after shrink");
    after.arrive();
    // The store moved to old rank 1's process: shrink again without it.
    if (r == 1) {
      after.wait_for(world - 1);
      small.finalize();
      ranks[1].world.finalize();
      ranks[1].rt.reset();
      return;
    }
    auto two = small.shrink({0});
    EXPECT_EQ(two.size(), 2);
    expect_sum(two, r + 1, 3 + 4, "after the second shrink");
    two.finalize();
    small.finalize();
    ranks[r].world.finalize();
  });
}

// ---- grow ---------------------------------------------------------------------

/// Rank 0 of `c` broadcasts the state; every member checks it.
void expect_state(mccl::communicator& c) {
  std::vector<float> state(1000);
  if (c.rank() == 0)
    std::iota(state.begin(), state.end(), 0.5f);
  c.broadcast(state.data(), state.size(), mccl::dtype::float32, 0).wait();
  for (std::size_t i = 0; i < state.size(); ++i)
    ASSERT_EQ(state[i], 0.5f + static_cast<float>(i)) << "rank " << c.rank() << ", element " << i;
}

TEST(Elastic, GrowTwoToFourAfterRankZeroWasShrunkAwayThenShrinkBack) {
  const int world = 3;
  int port = free_port();
  std::vector<rank_process> ranks(world + 2);
  std::promise<std::string> handle_made;
  auto handle = handle_made.get_future().share();
  arrivals formed, done;
  on_threads(world + 2, [&](int t) {
    auto& me = ranks[t];
    if (t >= world) { // a newcomer: no communicator until it joins
      auto grown = me.rt->join(handle.get(), -1); // the first free newcomer's rank
      EXPECT_EQ(grown.size(), 4);
      EXPECT_GE(grown.rank(), 2);
      expect_state(grown);
      expect_sum(grown, grown.rank() + 1, 10, "grown");
      done.arrive();
      done.wait_for(4);
      grown.finalize(); // shrink back: the newcomers leave
      return;
    }
    me.world = world_of(*me.rt, t, world, port);
    me.world.barrier().wait();
    formed.arrive();
    if (t == 0) {
      formed.wait_for(world);
      me.world.finalize();
      me.rt.reset();
      return;
    }
    auto survivors = me.world.shrink({0}); // ranks 0 and 1 (old 1 and 2)
    if (survivors.rank() == 1)
      handle_made.set_value(survivors.grow_handle(4));
    auto grown = survivors.grow(handle.get());
    EXPECT_EQ(grown.size(), 4);
    EXPECT_EQ(grown.rank(), survivors.rank()) << "an old rank keeps its rank";
    expect_state(grown);
    expect_sum(grown, grown.rank() + 1, 10, "grown");
    expect_sum(survivors, 1, 2, "the old communicator after grow");
    done.arrive();
    done.wait_for(4);
    auto back = grown.shrink({2, 3});
    EXPECT_EQ(back.size(), 2);
    expect_sum(back, 5, 10, "shrunk back");
    back.finalize();
    grown.finalize();
    survivors.finalize();
    me.world.finalize();
  });
}

TEST(Elastic, GrowWhoseNewcomerNeverComesFailsWithinTheConnectTimeoutAndTheOldCommunicatorWorks) {
  const int world = 2;
  int port = free_port();
  auto quick = settings();
  quick.set("MCCL_CONNECT_TIMEOUT_MS", "1000");
  std::vector<rank_process> ranks(world);
  std::promise<std::string> handle_made;
  auto handle = handle_made.get_future().share();
  on_threads(world, [&](int r) {
    auto& c = ranks[r].world = world_of(*ranks[r].rt, r, world, port, quick);
    if (r == 0)
      handle_made.set_value(c.grow_handle(3));
    auto start = clock_type::now();
    try {
      c.grow(handle.get());
      ADD_FAILURE() << "rank " << r << ": a grow without its newcomer succeeded";
    } catch (const mccl::error& e) {
      EXPECT_NE(std::string(e.what()).find("rank(s) 2 of WORLD_SIZE=3 never joined"), std::string::npos)
        << "names the missing rank: " << e.what();
    }
    EXPECT_LT(clock_type::now() - start, 2500ms) << "rank " << r << ": MCCL_CONNECT_TIMEOUT_MS is 1000";
    expect_sum(c, r + 1, 3, "the old communicator after the failed grow");
    c.barrier().wait();
    c.finalize();
  });
}

// ---- reconfigure --------------------------------------------------------------

TEST(Elastic, ReconfigureFailsEverywhereWhenAMemberNeverCallsThenSucceedsWithANewUuid) {
  const int world = 3;
  int port = free_port();
  std::vector<rank_process> ranks(world + 1);
  std::vector<std::string> handles(world + 1);
  std::promise<void> first_done;
  auto first = first_done.get_future().share();
  std::atomic<int> first_failures{0};
  std::atomic<int> handles_ready{0};
  on_threads(world + 1, [&](int t) {
    auto& me = ranks[t];
    bool newcomer = t == world;
    if (!newcomer)
      me.world = world_of(*me.rt, t, world, port);
    handles[t] = newcomer ? me.rt->get_reconfigure_handle() : me.world.get_reconfigure_handle();
    ++handles_ready;
    while (handles_ready.load() < world + 1)
      std::this_thread::sleep_for(1ms);
    if (!newcomer) {
      EXPECT_EQ(me.world.get_reconfigure_handle(), handles[t]) << "a member's handle is stable";
      // The newcomer is listed but never calls: nobody gets a communicator.
      auto start = clock_type::now();
      try {
        me.world.reconfigure("attempt-1", handles, 1500ms);
        ADD_FAILURE() << "rank " << t << ": a reconfigure missing a member committed";
      } catch (const mccl::error& e) {
        ++first_failures;
        EXPECT_NE(std::string(e.what()).find("not committed"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("retry with a new uuid"), std::string::npos) << e.what();
      }
      EXPECT_LT(clock_type::now() - start, 2500ms) << "rank " << t << ": the timeout is 1500 ms";
      expect_sum(me.world, t + 1, 6, "the old communicator after the failed reconfigure");
      if (t == 0)
        first_done.set_value();
      auto next = me.world.reconfigure("attempt-2", handles, 8000ms);
      EXPECT_EQ(next.size(), world + 1);
      EXPECT_EQ(next.rank(), t);
      expect_sum(next, 1, world + 1, "reconfigured");
      EXPECT_THROW(me.world.reconfigure("attempt-2", handles, 1000ms), mccl::error) << "a used uuid";
      next.finalize();
      me.world.finalize();
    } else {
      first.wait();
      auto next = me.rt->reconfigure(handles[t], "attempt-2", handles, 8000ms);
      EXPECT_EQ(next.rank(), world);
      expect_sum(next, 1, world + 1, "reconfigured");
      next.finalize();
    }
  });
  EXPECT_EQ(first_failures.load(), world);
}

// ---- bad input ----------------------------------------------------------------

void expect_error(const std::function<void()>& fn, const std::string& words) {
  try {
    fn();
    ADD_FAILURE() << "accepted; expected an error saying " << words;
  } catch (const mccl::error& e) {
    EXPECT_EQ(e.code(), mccl::errc::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(Elastic, BadHandlesAreErrorsNamingTheOpAndTheField) {
  const int world = 2;
  int port = free_port();
  std::vector<rank_process> ranks(world);
  on_threads(world, [&](int r) {
    auto& c = ranks[r].world = world_of(*ranks[r].rt, r, world, port);
    expect_error([&] { c.grow_handle(2); }, "new size 2 must exceed the current size 2");
    expect_error([&] { c.grow("hello"); }, "grow on rank " + std::to_string(r) + ": handle \"hello\" does not start");
    auto h = c.grow_handle(3);
    expect_error([&] { ranks[r].rt->join(h, 1); }, "a newcomer's rank is in 2..2");
    auto other = h;
    other.replace(other.find("old=2"), 5, "old=5");
    expect_error([&] { c.grow(other); }, "grows 5 ranks to 3");
    auto mine = c.get_reconfigure_handle();
    auto stranger = ranks[r].rt->get_reconfigure_handle();
    expect_error([&] { c.reconfigure("u", {stranger}, 1000ms); }, "this member's handle");
    expect_error([&] { c.reconfigure("u", {mine, mine}, 1000ms); }, "members 0 and 1 have the same handle");
    expect_error([&] { c.reconfigure("has space", {mine}, 1000ms); }, "without spaces");
    c.barrier().wait();
    c.finalize();
  });
}

} // namespace
