// The driving unit (actors/driving_unit.hpp) under a real actor system with
// CAF's workers running: actors spawned on it, and the actors they message,
// run on the thread that drains it and nowhere else; a job queued from
// another thread wakes the driver; supervision (monitor, down messages)
// works on it; jobs left at destruction go on on CAF's workers; a driven
// actor runs on its unit whoever sends it a message, until the unit is
// detached; a message is dispatched in place, nested in a running
// handler, only where that handler hosts its kind, and never into a
// handler that runs already.

#include "actors/driven_actor.hpp"
#include "actors/driving_unit.hpp"
#include "actors/in_place_actor.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/all.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <typeinfo>
#include <set>
#include <thread>
#include <vector>

using namespace mccl::actors;

namespace {

/// The message of the nesting test: its probe runs its script.
struct poke {};

} // namespace

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(poke)

namespace {

using ping_atom = caf::atom_constant<caf::atom("ping")>;
using pong_atom = caf::atom_constant<caf::atom("pong")>;

/// Where each handler ran, and how often.
struct trace {
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::atomic<int> handled{0};
  void ran() {
    std::lock_guard<std::mutex> guard{mutex};
    threads.insert(std::this_thread::get_id());
    ++handled;
  }
};

class DrivingUnit : public ::testing::Test {
protected:
  DrivingUnit() {
    cfg_.set("scheduler.max-threads", static_cast<size_t>(2));
    system_ = std::make_unique<caf::actor_system>(cfg_);
  }
  ~DrivingUnit() override {
    system_->await_all_actors_done();
  }

  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> system_;
};

/// Answers each ping with a pong to the sender.
caf::behavior ponger(caf::event_based_actor*, trace* t) {
  return {[t](ping_atom, int n) {
    t->ran();
    return caf::make_message(pong_atom::value, n);
  }};
}

/// Pings `peer` `rounds` times, one at a time, then quits.
caf::behavior pinger(caf::event_based_actor* self, caf::actor peer, int rounds, trace* t) {
  return {
    [=](ping_atom, int n) {
      t->ran();
      self->send(peer, ping_atom::value, n);
    },
    [=](pong_atom, int n) {
      t->ran();
      if (n + 1 < rounds)
        self->send(peer, ping_atom::value, n + 1);
      else
        self->quit();
    },
  };
}

TEST_F(DrivingUnit, ActorsOfTheUnitRunOnlyOnTheDrainingThread) {
  trace t;
  int wakes = 0;
  driving_unit unit{*system_, [&] { ++wakes; }};
  // This thread drives the unit, as an engine's leader does for its pass.
  driving_unit::driver_scope driving{unit};
  constexpr int rounds = 1000;
  auto pong = unit.spawn(ponger, &t);
  auto ping = unit.spawn(pinger, pong, rounds, &t);
  unit.deliver(ping, ping_atom::value, 0);
  // CAF's workers are idle and awake-able: had anything been handed to the
  // scheduler, it would run there now.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(t.handled.load(), 0) << "an actor of the unit ran before the driver drained it";
  std::size_t resumes = 0;
  while (!unit.idle())
    resumes += unit.drain();
  // ping's first message, then per round: a ping handled by pong, a pong by ping.
  EXPECT_EQ(t.handled.load(), 1 + 2 * rounds);
  ASSERT_EQ(t.threads.size(), 1u);
  EXPECT_EQ(*t.threads.begin(), std::this_thread::get_id());
  auto s = unit.stats();
  EXPECT_EQ(s.foreign_pushes, 0u) << "a message crossed threads";
  EXPECT_EQ(wakes, 0);
  EXPECT_GE(s.local_pushes, static_cast<uint64_t>(2 * rounds));
  EXPECT_EQ(s.resumes, resumes);
  caf::anon_send_exit(pong, caf::exit_reason::user_shutdown);
  while (!unit.idle())
    unit.drain();
}

TEST_F(DrivingUnit, AJobQueuedFromAnotherThreadWakesTheDriverAndRunsAtItsDrain) {
  trace t;
  std::atomic<int> wakes{0};
  driving_unit unit{*system_, [&] { ++wakes; }};
  driving_unit::driver_scope driving{unit};
  auto pong = unit.spawn(ponger, &t);
  auto ping = unit.spawn(pinger, pong, 3, &t);
  while (!unit.idle())
    unit.drain(); // the spawns' first runs
  EXPECT_EQ(wakes.load(), 0);
  std::thread other([&] { unit.deliver(ping, ping_atom::value, 0); });
  other.join();
  EXPECT_EQ(wakes.load(), 1);
  EXPECT_EQ(unit.stats().foreign_pushes, 1u);
  EXPECT_EQ(t.handled.load(), 0);
  while (!unit.idle())
    unit.drain();
  EXPECT_EQ(t.handled.load(), 1 + 2 * 3);
  ASSERT_EQ(t.threads.size(), 1u);
  EXPECT_EQ(*t.threads.begin(), std::this_thread::get_id());
  EXPECT_EQ(wakes.load(), 1) << "messages between the unit's actors woke the driver";
  caf::anon_send_exit(pong, caf::exit_reason::user_shutdown);
  while (!unit.idle())
    unit.drain();
}

TEST_F(DrivingUnit, AMonitoringActorHearsOfAnExitOnTheDrivingThread) {
  struct seen {
    std::thread::id thread;
    caf::error reason;
    bool down = false;
  } s;
  driving_unit unit{*system_};
  driving_unit::driver_scope driving{unit};
  auto worker = unit.spawn([](caf::event_based_actor* self) -> caf::behavior {
    return {[self](ping_atom, int) { self->quit(caf::sec::runtime_error); }};
  });
  auto supervisor = unit.spawn(
    [&s](caf::event_based_actor* self, caf::actor watched) -> caf::behavior {
      self->monitor(watched);
      self->set_down_handler([self, &s](caf::down_msg& msg) {
        s.down = true;
        s.reason = msg.reason;
        s.thread = std::this_thread::get_id();
        self->quit();
      });
      return {[](pong_atom) {}};
    },
    worker);
  while (!unit.idle())
    unit.drain();
  unit.deliver(worker, ping_atom::value, 0);
  while (!unit.idle())
    unit.drain();
  EXPECT_TRUE(s.down);
  EXPECT_EQ(s.reason, caf::sec::runtime_error);
  EXPECT_EQ(s.thread, std::this_thread::get_id());
  EXPECT_EQ(unit.stats().foreign_pushes, 0u);
  (void)supervisor;
}

TEST_F(DrivingUnit, AMessageWithoutAUnitLeavesForCafsWorkers) {
  // The boundary the header states: anon_send from a plain thread goes to
  // CAF's scheduler, so the actor runs on a CAF worker, not here.
  trace t;
  driving_unit unit{*system_};
  auto pong = unit.spawn(ponger, &t);
  while (!unit.idle())
    unit.drain();
  auto reply = caf::scoped_actor{*system_};
  reply->send(pong, ping_atom::value, 7);
  reply->receive([](pong_atom, int n) { EXPECT_EQ(n, 7); },
                 caf::after(std::chrono::seconds(10)) >> [] { FAIL() << "no pong from a CAF worker"; });
  ASSERT_EQ(t.threads.size(), 1u);
  EXPECT_NE(*t.threads.begin(), std::this_thread::get_id());
  EXPECT_TRUE(unit.idle());
  caf::anon_send_exit(pong, caf::exit_reason::user_shutdown);
}

TEST_F(DrivingUnit, JobsLeftAtDestructionGoOnOnCafsWorkers) {
  trace t;
  caf::actor pong;
  {
    driving_unit unit{*system_};
    pong = unit.spawn(ponger, &t);
    unit.deliver(pong, ping_atom::value, 1);
    EXPECT_FALSE(unit.idle());
  } // the queued job goes to CAF's scheduler here
  // The actor runs on (its first message and this one) and answers.
  caf::scoped_actor self{*system_};
  self->send(pong, ping_atom::value, 2);
  self->receive([](pong_atom, int) {},
                caf::after(std::chrono::seconds(10)) >> [] { FAIL() << "the actor did not run after its unit was gone"; });
  EXPECT_GE(t.handled.load(), 1);
  caf::anon_send_exit(pong, caf::exit_reason::user_shutdown);
}

/// A ponger that is a driven actor (actors/driven_actor.hpp).
using driven_self = caf::stateful_actor<caf::unit_t, driven_actor<caf::event_based_actor>>*;
caf::behavior driven_ponger(driven_self, trace* t) {
  return {[t](ping_atom, int n) {
    t->ran();
    return caf::make_message(pong_atom::value, n);
  }};
}

/// Waits up to ten seconds for `cond`.
template <class F>
bool eventually(F cond) {
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(std::chrono::milliseconds(1)))
    if (cond())
      return true;
  return cond();
}

TEST_F(DrivingUnit, ADrivenActorRunsOnItsUnitWhoeverSendsIt) {
  trace t;
  std::atomic<int> wakes{0};
  auto unit = std::make_shared<driving_unit>(*system_);
  unit->set_wake([&] { ++wakes; });
  auto pong = unit->spawn(driven_ponger, &t);
  while (!unit->idle())
    unit->drain();
  // A plain thread's anon_send, CAF's clock, an actor on a CAF worker and
  // a blocking actor: each would resume a plain actor on a CAF worker.
  caf::anon_send(pong, ping_atom::value, 1);
  caf::delayed_anon_send(pong, std::chrono::milliseconds(5), ping_atom::value, 2);
  system_->spawn([pong](caf::event_based_actor* self) { self->send(pong, ping_atom::value, 3); });
  caf::scoped_actor asker{*system_};
  asker->send(pong, ping_atom::value, 4);
  // The first message queues the actor on its unit (a wake); the others
  // join its mailbox. Nothing runs it until this thread drains.
  ASSERT_TRUE(eventually([&] { return wakes.load() >= 1 && unit->stats().foreign_pushes >= 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50)); // the clock's and the worker's messages arrive
  EXPECT_EQ(t.handled.load(), 0) << "a driven actor ran off its unit";
  ASSERT_TRUE(eventually([&] {
    unit->drain();
    return t.handled.load() == 4;
  }));
  ASSERT_EQ(t.threads.size(), 1u);
  EXPECT_EQ(*t.threads.begin(), std::this_thread::get_id());
  asker->receive([](pong_atom, int n) { EXPECT_EQ(n, 4); },
                 caf::after(std::chrono::seconds(10)) >> [] { FAIL() << "no answer from the driven actor"; });
  caf::anon_send_exit(pong, caf::exit_reason::user_shutdown);
  ASSERT_TRUE(eventually([&] {
    unit->drain();
    return unit->idle();
  }));
}

TEST_F(DrivingUnit, ADetachedUnitsDrivenActorsGoOnOnCafsWorkers) {
  trace t;
  auto unit = std::make_shared<driving_unit>(*system_, [] {});
  auto pong = unit->spawn(driven_ponger, &t);
  caf::anon_send(pong, ping_atom::value, 1); // queued on the unit, never drained
  unit->detach();                            // its owner is gone: both go to CAF's scheduler
  caf::scoped_actor asker{*system_};
  asker->send(pong, ping_atom::value, 2);
  asker->receive([](pong_atom, int n) { EXPECT_EQ(n, 2); },
                 caf::after(std::chrono::seconds(10)) >> [] { FAIL() << "the detached unit's actor did not run"; });
  EXPECT_EQ(t.handled.load(), 2);
  ASSERT_EQ(t.threads.count(std::this_thread::get_id()), 0u);
  caf::anon_send_exit(pong, caf::exit_reason::user_shutdown);
}

/// An actor dispatched to in place, as the op and link actors are
/// (in_place_actor.hpp), whose handler of `poke` runs a script.
class probe final : public in_place_actor<probe, caf::event_based_actor> {
  friend class in_place_actor<probe, caf::event_based_actor>;

public:
  probe(caf::actor_config& cfg, std::function<void()>* script) : in_place_actor(cfg), script_(script) {}

  caf::behavior make_behavior() override {
    started();
    return {[this](const poke&) { (*script_)(); }};
  }

private:
  bool handled(const one_value& m) {
    if (m.type == nullptr || *m.type != typeid(poke))
      return false;
    (*script_)();
    return true;
  }
  static caf::error failed_with(const std::exception_ptr& x) {
    return caf::make_error(caf::sec::runtime_error, what_escaped(x));
  }

  std::function<void()>* script_;
};

TEST_F(DrivingUnit, ANestedMessageRunsInPlaceOnlyWhereItsHostAllowsItAndNeverReentersAHandler) {
  auto unit = std::make_shared<driving_unit>(*system_, [] {});
  // Two link-like actors and two op-like ones; each runs its script when poked.
  std::function<void()> link_a, link_b, op_x, op_y;
  auto spawn = [&](std::function<void()>* script, in_place_target& target) {
    auto handle = unit->spawn_class<probe>(script);
    auto* self = static_cast<probe*>(caf::actor_cast<caf::abstract_actor*>(handle));
    target = {self, self};
    return caf::actor{handle};
  };
  in_place_target a, b, x, y;
  std::vector<caf::actor> keep{spawn(&link_a, a), spawn(&link_b, b), spawn(&op_x, x), spawn(&op_y, y)};
  while (!unit->idle())
    unit->drain(); // their first runs (make_behavior)
  std::vector<std::string> said;
  auto note = [&](const char* what, bool may) { said.push_back(std::string{what} + (may ? " yes" : " no")); };

  // A turn (hosts op messages) runs op X nested (hosts chunks), which hands
  // a chunk to link B nested; a chunk back to A waits: A's handler runs.
  link_a = [&] {
    note("turn: X as op message", unit->can_dispatch(x, nesting::op_messages));
    note("turn: B as chunk", unit->can_dispatch(b, nesting::link_chunks));
    note("turn: A itself", unit->can_dispatch(a, nesting::op_messages));
    unit->dispatch(x, nesting::link_chunks, poke{});
  };
  op_x = [&] {
    note("op: A as chunk", unit->can_dispatch(a, nesting::link_chunks));
    note("op: Y as op message", unit->can_dispatch(y, nesting::op_messages));
    note("op: B as chunk", unit->can_dispatch(b, nesting::link_chunks));
    unit->dispatch(b, nesting::op_messages, poke{});
  };
  link_b = [&] {
    note("chunk: X as op message", unit->can_dispatch(x, nesting::op_messages));
    note("chunk: Y as op message", unit->can_dispatch(y, nesting::op_messages));
  };
  ASSERT_TRUE(unit->can_dispatch(a, nesting::none));
  unit->dispatch(a, nesting::op_messages, poke{});
  EXPECT_EQ(said, (std::vector<std::string>{
                    "turn: X as op message yes", "turn: B as chunk no", "turn: A itself no",
                    "op: A as chunk no", "op: Y as op message no", "op: B as chunk yes",
                    "chunk: X as op message no", "chunk: Y as op message yes"}));

  // A handler run by a drain (from its mailbox) hosts nothing: what it
  // sends waits in mailboxes, as CAF would have it; a top-level message
  // that is never nested may not run inside it either.
  said.clear();
  op_y = [&] {
    note("resumed: B as chunk", unit->can_dispatch(b, nesting::link_chunks));
    note("resumed: A at top level", unit->can_dispatch(a, nesting::none));
  };
  unit->deliver(keep[3], poke{});
  EXPECT_FALSE(unit->can_dispatch(y, nesting::none)) << "an actor with mail waiting was dispatched to";
  while (!unit->idle())
    unit->drain();
  EXPECT_EQ(said, (std::vector<std::string>{"resumed: B as chunk no", "resumed: A at top level no"}));
  for (auto& actor : keep)
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  keep.clear();
  unit->detach();
}

} // namespace
