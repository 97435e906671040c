#pragma once
/// N ranks of mccl in one process, over the simulated network
/// (transport/sim/sim_network.hpp), run by CAF's deterministic test
/// coordinator: the production engine, actors and wiring.
///
/// Per rank: a watchdog actor and a comm_core (actors/comm_core.hpp: the
/// engine over the rank's connections of sim_network::mesh(N), its progress
/// and link actors), exactly as a communicator builds it, with the op
/// thread and the calling-thread path off (MCCL_OP_THREAD_BYTES=0,
/// MCCL_INLINE_BYTES=0): every op is driven by its rank's progress actor,
/// so nothing moves unless the test delivers bytes and runs the scheduler,
/// and every interleaving is one the test chose:
///
/// - delivery: a delivery_policy picks the next pipe and how many of its
///   in-flight bytes become readable (round robin, seeded random with random
///   amounts that split headers, starving one pipe, byte by byte);
/// - actors: settle() runs the scheduler to quiescence, FIFO (sched.run())
///   or, with set_random_actor_order(seed), one message at a time by a
///   randomly chosen actor (the ranks' progress actors interleave at
///   random);
/// - drive(works, policy): "while a work is not done: deliver by the policy,
///   settle()", bounded: a stall (nothing in flight, work not done) or too
///   many rounds fails the test instead of hanging.
///
/// Include this header LAST (it includes caf_gtest_dsl.hpp, which defines
/// function-like macros named expect, allow, inject).
///
/// Pitfalls: drive the scheduler with sched.run(), never the fixture's
/// run() (a live link re-arms its heartbeat timer for ever); the buffer pool
/// and the network must outlive the actor system (sim_env is a base listed
/// before test_coordinator_fixture); the engine parks at once (MCCL_SPIN_US
/// 0) and moves only on notifications. Buffers handed to ops are allocated
/// from the sim_world (alloc()), so they outlive the engines that may still
/// point into them: the world finalizes every rank before it frees them.
///
/// Timers fire only when a test advances the virtual clock
/// (sched.advance_time): heartbeats, deadlines and liveness verdicts run
/// on that clock then (see liveness_sim_test.cpp).

#include "actors/comm_core.hpp"
#include "actors/messages.hpp"
#include "actors/watchdog_actor.hpp"
#include "actors/metrics_actor.hpp"
#include "actors/work_state.hpp"
#include "transport/buffer_pool.hpp"
#include "collectives/engine/op.hpp"
#include "collectives/extension/registry.hpp"
#include <mccl/algo_spec.hpp>
#include <mccl/config.hpp>
#include "config/log.hpp"
#include "transport/wire/frame.hpp"
#include "transport/sim/sim_network.hpp"

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace mccl::sim_test {

using namespace std::chrono_literals;
using transport::sim_network;
using transport::sim_pipe_id;
using work_ptr = std::shared_ptr<work_state>;

/// What must outlive the actor system: the pool owns the memory of every
/// received chunk, the network owns the pipes. List it as a base before
/// test_coordinator_fixture, so it is destroyed after it.
struct sim_env {
  transport::buffer_pool pool;
  sim_network net;
};

/// Defaults with what these tests need: small chunks (a transfer spans
/// several), CRC on every chunk, an engine that parks at once and is driven
/// by the progress actor only, timers far apart (a test that advances the
/// clock sets its own intervals).
inline config sim_config(const std::string& algo = {}, std::size_t chunk_bytes = 4096) {
  auto cfg = resolve_config({}, {});
  cfg.chunk_bytes = chunk_bytes;
  cfg.spin = 0us;
  cfg.inline_bytes = 0;
  cfg.op_thread_bytes = 0;
  cfg.timeout = std::chrono::hours(1);
  cfg.heartbeat = std::chrono::hours(1);
  cfg.transport_crc = true;
  if (!algo.empty())
    cfg.algo = parse_algo_spec(algo);
  return cfg;
}

// ---- delivery policies ----------------------------------------------------------

/// One delivery: up to `bytes` of from -> to's in-flight bytes.
struct delivery {
  int from = 0;
  int to = 0;
  std::size_t bytes = SIZE_MAX;
};

/// Chooses the next delivery among the pipes with bytes in flight (never
/// called with an empty list). May keep state between calls.
struct delivery_policy {
  std::string name;
  std::function<delivery(const std::vector<sim_pipe_id>&)> choose;
};

/// Cycles over the pipes in (from, to) order: each call serves the next
/// pending pipe after the one served last, `bytes` at a time.
inline delivery_policy round_robin(std::size_t bytes = SIZE_MAX) {
  auto last = std::make_shared<std::pair<int, int>>(-1, -1);
  return {bytes == SIZE_MAX ? "round_robin" : "round_robin_" + std::to_string(bytes),
          [last, bytes](const std::vector<sim_pipe_id>& pending) {
            auto it = std::find_if(pending.begin(), pending.end(), [&](const sim_pipe_id& p) {
              return std::make_pair(p.from, p.to) > *last;
            });
            const auto& p = it == pending.end() ? pending.front() : *it;
            *last = {p.from, p.to};
            return delivery{p.from, p.to, bytes};
          }};
}

/// Every pipe in turn, one byte at a time: every header and payload is
/// split at every possible offset.
inline delivery_policy byte_by_byte() {
  auto p = round_robin(1);
  p.name = "byte_by_byte";
  return p;
}

/// Seeded: a random pending pipe, a random amount: 3 in 8 deliveries move
/// 1..2 headers' worth of bytes (splitting headers), 2 in 8 a random part
/// of what is in flight, 1 in 8 exactly one header, 1 in 8 up to a 4 KiB
/// chunk and its header, 1 in 8 everything.
inline delivery_policy random_order(uint64_t seed) {
  auto rng = std::make_shared<std::mt19937_64>(seed);
  return {"random_" + std::to_string(seed), [rng](const std::vector<sim_pipe_id>& pending) {
            auto& g = *rng;
            const auto& p = pending[g() % pending.size()];
            std::size_t bytes = SIZE_MAX;
            switch (g() % 8) {
              case 0:
              case 1:
              case 2:
                bytes = 1 + g() % (2 * wire::header_size);
                break;
              case 3:
              case 4:
                bytes = 1 + g() % p.bytes;
                break;
              case 5:
                bytes = wire::header_size;
                break;
              case 6:
                bytes = 1 + g() % (4096 + wire::header_size);
                break;
              default:
                break;
            }
            return delivery{p.from, p.to, bytes};
          }};
}

/// Never serves from -> to while any other pipe has bytes in flight; then
/// delivers all of it at once. Everything else goes by `inner`. The starved
/// receiver gets its peer's frames long after everything else, all at once.
inline delivery_policy starve(int from, int to, delivery_policy inner = round_robin()) {
  auto name = "starve_" + std::to_string(from) + "_to_" + std::to_string(to) + "_" + inner.name;
  return {name, [from, to, inner](const std::vector<sim_pipe_id>& pending) {
            std::vector<sim_pipe_id> others;
            for (const auto& p : pending)
              if (p.from != from || p.to != to)
                others.push_back(p);
            if (others.empty())
              return delivery{from, to, SIZE_MAX};
            return inner.choose(others);
          }};
}

/// Always the last pending pipe in (from, to) order, everything at once.
inline delivery_policy highest_pipe_first() {
  return {"highest_pipe_first", [](const std::vector<sim_pipe_id>& pending) {
            const auto& p = pending.back();
            return delivery{p.from, p.to, SIZE_MAX};
          }};
}

// ---- buffers --------------------------------------------------------------------

namespace detail {
struct any_buffer {
  virtual ~any_buffer() = default;
};
template <class T>
struct typed_buffer : any_buffer {
  explicit typed_buffer(std::size_t n, T fill) : data(n, fill) {}
  std::vector<T> data;
};
} // namespace detail

// ---- the world ------------------------------------------------------------------

class sim_world {
public:
  static constexpr uint32_t comm_id = 11;
  /// settle() gives up (and fails the test) after this many messages.
  static constexpr std::size_t max_messages_per_settle = 5'000'000;

  sim_world(caf::actor_system& sys, caf::scheduler::test_coordinator& sched, sim_env& env, int world,
            config cfg)
    : sys_(sys), sched_(sched), env_(env), world_(world), cfg_(std::move(cfg)) {
    register_builtin_algorithms();
    validate_algo_spec(cfg_);
    auto mesh = env_.net.mesh(world_);
    for (int r = 0; r < world_; ++r) {
      watchdogs_.push_back(actors::spawn_watchdog_actor(sys_));
      actors::comm_core_init ci;
      ci.rank = r;
      ci.world = world_;
      ci.comm_id = comm_id;
      ci.cfg = cfg_;
      ci.conns = std::move(mesh[static_cast<std::size_t>(r)]);
      ci.system = &sys_;
      ci.simulated_time = true;
      ci.pool = &env_.pool;
      ci.watchdog = watchdogs_.back();
      cores_.push_back(actors::comm_core::create(std::move(ci)));
    }
    settle();
  }

  ~sim_world() { shutdown(); }

  sim_world(const sim_world&) = delete;
  sim_world& operator=(const sim_world&) = delete;

  int size() const { return world_; }
  const config& cfg() const { return cfg_; }
  sim_network& net() { return env_.net; }
  caf::scheduler::test_coordinator& sched() { return sched_; }
  actors::comm_core& core(int rank) { return *cores_.at(static_cast<std::size_t>(rank)); }
  const actors::progress_handle& progress(int rank) const {
    return cores_.at(static_cast<std::size_t>(rank))->progress_actor();
  }
  const actors::link_handle& link(int rank, int peer) const {
    return cores_.at(static_cast<std::size_t>(rank))->link_actors().at(static_cast<std::size_t>(peer));
  }

  /// A buffer that lives as long as this world (longer than every actor).
  template <class T>
  std::vector<T>& alloc(std::size_t n, T fill = T{}) {
    auto b = std::make_unique<detail::typed_buffer<T>>(n, fill);
    auto& ref = b->data;
    buffers_.push_back(std::move(b));
    return ref;
  }

  // ---- ops ----------------------------------------------------------------------

  /// Submits `req` on `rank` with a fresh work_state (as
  /// communicator::impl::submit does); the op starts at the next settle().
  work_ptr submit(int rank, op_request req) {
    auto op = std::make_shared<issued_op>(std::move(req));
    auto w = std::make_shared<work_state>(cfg_.timeout,
                                          op->kind == op_kind::custom ? op->name : to_string(op->kind),
                                          metrics_, core(rank).idle_unit());
    core(rank).submit(std::move(op), w);
    return w;
  }

  work_ptr allreduce(int rank, const void* send, void* recv, std::size_t count, dtype type,
                     redop op = redop::sum) {
    op_request r;
    r.kind = op_kind::allreduce;
    r.send = send;
    r.recv = recv;
    r.count = count;
    r.type = type;
    r.op = op;
    return submit(rank, std::move(r));
  }

  work_ptr send(int rank, const void* data, std::size_t count, dtype type, int peer, uint32_t tag) {
    op_request r;
    r.kind = op_kind::send;
    r.send = data;
    r.count = count;
    r.type = type;
    r.root = peer;
    r.tag = tag;
    return submit(rank, std::move(r));
  }

  work_ptr recv(int rank, void* data, std::size_t count, dtype type, int peer, uint32_t tag) {
    op_request r;
    r.kind = op_kind::recv;
    r.recv = data;
    r.count = count;
    r.type = type;
    r.root = peer;
    r.tag = tag;
    return submit(rank, std::move(r));
  }

  // ---- scheduling ---------------------------------------------------------------

  /// From now on settle() runs one message at a time, of an actor drawn at
  /// random (seeded) from those with mail; nullopt: FIFO (sched.run()).
  void set_random_actor_order(std::optional<uint64_t> seed) {
    if (seed)
      actor_rng_ = std::make_shared<std::mt19937_64>(*seed);
    else
      actor_rng_.reset();
  }

  /// Runs the scheduler until no actor has mail (timers never fire).
  /// Returns false (after a test failure) if it does not get there within
  /// max_messages_per_settle messages.
  bool settle() {
    std::size_t n = 0;
    if (!actor_rng_) {
      n = sched_.run(max_messages_per_settle);
    } else {
      auto& g = *actor_rng_;
      while (sched_.has_job() && n < max_messages_per_settle) {
        auto i = static_cast<std::ptrdiff_t>(g() % sched_.jobs.size());
        if (i != 0)
          std::rotate(sched_.jobs.begin(), sched_.jobs.begin() + i, sched_.jobs.begin() + i + 1);
        sched_.run_once();
        ++n;
      }
    }
    if (sched_.has_job()) {
      ADD_FAILURE() << "the actors did not quiesce within " << max_messages_per_settle
                    << " messages (a livelock?)";
      return false;
    }
    return true;
  }

  /// Names of the actors with mail, in queue order (for diagnostics).
  std::string queued_actors() const {
    std::string out;
    for (auto* j : sched_.jobs) {
      auto a = dynamic_cast<caf::local_actor*>(j);
      out += (out.empty() ? "" : ", ") + std::string(a ? a->name() : "?");
    }
    return out;
  }

  // ---- delivery -----------------------------------------------------------------

  /// One delivery chosen by `policy`, then settle(). False when nothing is
  /// in flight.
  bool deliver_once(delivery_policy& policy) {
    auto pending = env_.net.pending();
    if (pending.empty())
      return false;
    auto d = policy.choose(pending);
    auto moved = env_.net.deliver(d.from, d.to, d.bytes);
    ++deliveries_;
    if (moved == 0)
      ADD_FAILURE() << "policy " << policy.name << " chose pipe " << d.from << "->" << d.to
                    << ", which has nothing in flight";
    settle();
    return true;
  }

  /// Delivers by `policy` until nothing is in flight. Returns false (after
  /// a test failure) if that takes more than max_rounds deliveries.
  bool drain(delivery_policy& policy, std::size_t max_rounds = 1'000'000) {
    for (std::size_t i = 0; i < max_rounds; ++i)
      if (!deliver_once(policy))
        return true;
    ADD_FAILURE() << "still bytes in flight after " << max_rounds << " deliveries (" << policy.name
                  << ")";
    return false;
  }

  /// Settles, then "while any work is not done: deliver by `policy`,
  /// settle". Returns false after a test failure if bytes run out while a
  /// work is not done (a stall: the ops wait for each other) or after
  /// max_rounds deliveries; the failure names the works still pending.
  bool drive(const std::vector<work_ptr>& works, delivery_policy& policy,
             std::size_t max_rounds = 1'000'000) {
    if (!settle())
      return false;
    for (std::size_t round = 0;; ++round) {
      if (std::all_of(works.begin(), works.end(), [](const work_ptr& w) { return w->done(); })) {
        // With CRC the links still ack the last frames they received: let
        // those arrive too, so nothing is left in flight.
        for (std::size_t extra = 0; !net().pending().empty() && extra < 10'000; ++extra)
          if (!deliver_once(policy))
            break;
        return true;
      }
      if (round == max_rounds) {
        ADD_FAILURE() << "works not done after " << max_rounds << " deliveries (" << policy.name
                      << "): " << describe(works);
        return false;
      }
      if (!deliver_once(policy)) {
        ADD_FAILURE() << "stall: nothing in flight, nothing to run, and works not done ("
                      << policy.name << ", after " << round << " deliveries): " << describe(works);
        return false;
      }
    }
  }

  /// Deliveries made so far.
  std::size_t deliveries() const { return deliveries_; }

  /// "#0 pending, #1 failed: ..." for diagnostics.
  static std::string describe(const std::vector<work_ptr>& works) {
    std::ostringstream out;
    for (std::size_t i = 0; i < works.size(); ++i) {
      out << (i ? "; " : "") << "#" << i << " ";
      if (!works[i]->done())
        out << "pending";
      else if (auto f = works[i]->failure())
        out << "failed: " << f->what();
      else
        out << "ok";
    }
    return out.str();
  }

  // ---- teardown -----------------------------------------------------------------

  /// Finalizes every rank (each engine fails what is in flight, says BYE
  /// and closes; its actors stop), then ends whatever is left, so that the
  /// fixture's destructor (which fires timers until none is left) returns.
  /// Idempotent; the destructor calls it.
  void shutdown() {
    if (down_)
      return;
    down_ = true;
    // Quiet: ranks finalize one after another, so later ones write their
    // BYE into connections the earlier ones closed ("broken pipe"), and ops
    // a failed test left in flight are aborted; neither says anything about
    // the test.
    auto level = log::level();
    log::set_level(log_level::off);
    for (auto& c : cores_)
      c->finalize(std::chrono::milliseconds(0), false);
    sched_.run(max_messages_per_settle);
    for (int round = 0; round < 16; ++round) {
      auto moved = env_.net.deliver_all();
      auto fired = sched_.trigger_timeouts();
      if (moved == 0 && fired == 0 && !sched_.has_job())
        break;
      sched_.run(max_messages_per_settle);
    }
    for (auto& w : watchdogs_)
      caf::anon_send(w, actors::shutdown_atom::value);
    metrics_->stop();
    sched_.run(max_messages_per_settle);
    cores_.clear();
    watchdogs_.clear();
    log::set_level(level);
  }

private:
  caf::actor_system& sys_;
  caf::scheduler::test_coordinator& sched_;
  sim_env& env_;
  int world_;
  config cfg_;
  std::vector<actors::watchdog_handle> watchdogs_;
  /// The simulated ranks' runtime's metrics actor (one process here).
  std::shared_ptr<actors::metrics_feed> metrics_ = actors::metrics_feed::start(sys_);
  std::vector<std::shared_ptr<actors::comm_core>> cores_;
  std::shared_ptr<std::mt19937_64> actor_rng_;
  std::size_t deliveries_ = 0;
  bool down_ = false;
  // Declared last, destroyed first... after the destructor body has shut
  // every rank down.
  std::deque<std::unique_ptr<detail::any_buffer>> buffers_;
};

/// "ok", or the failure's text.
inline std::string outcome(const work_ptr& w) {
  if (!w->done())
    return "pending";
  auto f = w->failure();
  return f ? std::string(f->what()) : "ok";
}

} // namespace mccl::sim_test

#include "caf_gtest_dsl.hpp" // last: defines the macros expect, allow, ...

namespace mccl::sim_test {

/// A GoogleTest fixture (Base: ::testing::Test or ::testing::TestWithParam<P>)
/// with a deterministic actor system; make_world() builds the ranks.
template <class Base = ::testing::Test>
class sim_world_fixture : public Base, public sim_env, public test_coordinator_fixture<> {
protected:
  sim_world_fixture() {
    // An actor a failed test left waiting must not make the actor system's
    // destructor wait for it for ever.
    sys.await_actors_before_shutdown(false);
  }

  ~sim_world_fixture() override {
    // Before test_coordinator_fixture's destructor: it fires timers until
    // none is left, and live links re-arm theirs.
    world_.reset();
  }

  /// Once per test: the network connects each pair of ranks only once.
  sim_world& make_world(int n, config cfg) {
    if (world_)
      throw std::logic_error("make_world: one world per test");
    world_ = std::make_unique<sim_world>(sys, sched, *this, n, std::move(cfg));
    return *world_;
  }

  std::unique_ptr<sim_world> world_;
};

} // namespace mccl::sim_test
