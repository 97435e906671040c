#include "actors/comm_core.hpp"
#include "collectives/observability/metrics_registry.hpp"

#include "actors/link_actor.hpp"
#include "actors/progress_actor.hpp"
#include "actors/supervisor_actor.hpp"
#include "collectives/algorithms/board_collectives.hpp"
#include "config/log.hpp"

#include <caf/all.hpp>

#include <future>
#include <thread>

namespace mccl::actors {

namespace {
/// The longest a driver blocks in one wait, so it looks at its deadline
/// (and a stop request) at least this often.
constexpr auto wait_slice = std::chrono::milliseconds(100);
/// How long finalize tries to take the engine from a thread that leads it.
constexpr auto finalize_lead_wait = std::chrono::seconds(2);
/// How long revoke() waits for the supervisor to take it.
constexpr auto revoke_answer = std::chrono::milliseconds(500);

std::atomic<uint64_t> next_watch_key{1};

/// The passes pass() adds for the actors' mail, and kick()'s rounds, at
/// most: a bound on the time a stream of messages can hold a thread.
constexpr int max_extra_passes = 8;

bool is_p2p(op_kind k) noexcept { return k == op_kind::send || k == op_kind::recv; }
} // namespace

std::shared_ptr<comm_core> comm_core::create(comm_core_init init) {
  std::shared_ptr<comm_core> core(new comm_core(std::move(init)));
  core->start_actors();
  return core;
}

int comm_core::ranks_on_this_host() const {
  const auto& host_of = init_.cfg.host_of;
  if (host_of.size() != static_cast<std::size_t>(init_.world))
    return init_.world; // not known: count every rank
  auto mine = host_of[static_cast<std::size_t>(init_.rank)];
  return static_cast<int>(std::count(host_of.begin(), host_of.end(), mine));
}

comm_core::comm_core(comm_core_init init) : init_(std::move(init)) {
  init_.cfg.spin = resolved_spin(init_.cfg.spin, ranks_on_this_host());
  flight_ = std::make_shared<flight_recorder>(init_.cfg.flight_recorder);
  if (!init_.cfg.trace.empty())
    trace_ = std::make_shared<trace_recorder>(init_.cfg.trace, init_.rank, init_.comm_id);
  for (std::size_t k = 0; k < algo_named_.size(); ++k)
    algo_named_[k] = init_.cfg.algo.rules.count(to_string(static_cast<op_kind>(k))) > 0;
  next_message_.assign(static_cast<std::size_t>(init_.world), 0);
  engine_options eo;
  eo.rank = init_.rank;
  eo.world = init_.world;
  eo.comm_id = init_.comm_id;
  eo.cfg = init_.cfg;
  eo.pool = init_.pool;
  eo.resumable = init_.resumer && init_.cfg.transport_crc && init_.cfg.reconnect.count() > 0;
  eo.faults = init_.faults;
  eo.scenario = init_.scenario;
  eo.flight = flight_;
  eo.trace = trace_;
  // The communicator's actors run on its driving unit, drained by the
  // thread that leads the engine (pass()); start_actors() says what a
  // message from another thread does.
  unit_ = std::make_shared<driving_unit>(*init_.system);
  idle_unit_ = std::make_shared<driving_unit>(*init_.system);
  shortest_timeout_ms_.store(init_.cfg.timeout.count());
  // Op actors are monitored by the supervisor (spawned below, before any
  // op): one message per actor of the pool, not per op.
  auto supervise = [this](const op_handle& a) {
    if (supervisor_)
      caf::anon_send(supervisor_, supervise_atom::value, caf::actor_cast<caf::actor>(a));
  };
  op_actors_ = std::make_unique<op_actors>(*unit_, supervise);
  eo.runners = op_actors_.get();
  // A message queued for a board op actor from elsewhere (its monitor's
  // system messages) runs at the next board op, or now if nobody runs the
  // board.
  board_unit_ = std::make_unique<driving_unit>(*init_.system, [this] {
    std::unique_lock<std::mutex> board_guard{board_mutex_, std::try_to_lock};
    if (board_guard.owns_lock())
      board_unit_->drain();
  });
  board_actors_ = std::make_unique<op_actors>(*board_unit_, supervise);
  link_channels_ = std::make_unique<link_channels>(init_.world, *unit_);
  eo.links = link_channels_.get();
  if (init_.simulated_time) {
    auto* sys = init_.system;
    eo.now = [sys] { return sys->clock().now(); };
  } // else engine_options' default: steady_clock
  engine_listener& listener = *this;
  engine_ = std::make_unique<engine>(std::move(eo), init_.conns, listener);
  link_channels_->serve(*engine_);
  init_.conns.clear(); // the engine's channels own them now
  if (init_.cfg.op_thread_bytes > 0 && init_.world > 1) {
    op_thread::hooks h;
    h.busy = [this] { return !engine_->idle() && !engine_->callers_driving(); };
    h.idle = [this] { return engine_->idle(); };
    h.drive = [this](const std::function<bool()>& stop) {
      // A caller that waits drives the engine itself: leave it to it.
      return drive(driver_kind::op_thread,
                   [&] { return stop() || engine_->idle() || engine_->callers_driving(); },
                   clock::time_point::max());
    };
    h.wake_leader = [this] { engine_->wake(); };
    op_thread_ = std::make_unique<op_thread>(std::move(h), init_.cfg.helper_cpus);
  }
}

comm_core::~comm_core() {
  finalize();
  // An actor finalize did not wait for may still get a message: it runs on
  // a CAF worker from now on.
  unit_->detach();
  idle_unit_->detach();
}

void comm_core::start_actors() {
  auto& sys = *init_.system;
  core_ref self = weak_from_this();
  links_.resize(static_cast<std::size_t>(init_.world));
  for (int r = 0; r < init_.world; ++r) // epoch 0, the ranks themselves, until a change says otherwise
    members_.members.push_back(r);
  // A message for the communicator's actors from a thread that is not
  // draining their unit (the supervisor's revoke from the API, a link's exit
  // or the resumer's answer from elsewhere, a request's timeout from CAF's
  // clock) runs here if nobody leads the engine, else by the leader after
  // its pass. Held weakly: a unit may outlive its communicator by a little.
  unit_->set_wake([weak = core_ref(self)] {
    if (auto core = weak.lock())
      core->actors_have_mail();
  });
  // The supervisor and the link actors run on the driving unit; they start
  // here, on this thread, before any op (no leader drains the unit yet).
  {
    driving_unit::driver_scope driving{*unit_};
    for (int peer = 0; peer < init_.world; ++peer) {
      if (peer == init_.rank || init_.world == 1)
        continue;
      link_init li;
      li.core = self;
      li.peer = peer;
      if (init_.resumer && init_.cfg.transport_crc) {
        li.resumer = init_.resumer;
        li.reconnect = std::min(init_.cfg.reconnect, init_.cfg.timeout); // never beyond the op deadline
      }
      li.link = link_channels_->take(peer);
      auto actor = spawn_link_actor(*unit_, std::move(li));
      links_[peer] = actor.handle;
      link_channels_->attach(peer, actor);
    }
    progress_ = spawn_progress_actor(sys, self);
    supervisor_ = spawn_supervisor_actor(*unit_, self, links_, progress_);
    unit_->drain();
  }
  if (init_.watchdog) {
    watch_key_ = next_watch_key.fetch_add(1);
    caf::anon_send(init_.watchdog, watch_atom::value, watch_key_, self);
  }
}

comm_core::clock::time_point comm_core::now() const {
  return init_.simulated_time ? init_.system->clock().now() : clock::now();
}

// ---- issuing ops ----------------------------------------------------------------

void comm_core::submit(op_ptr op, const std::shared_ptr<work_state>& work) {
  auto bytes = op->selection_bytes(init_.world);
  op->done = work;
  // An op without a deadline of its own (one not issued through a
  // communicator) runs under MCCL_TIMEOUT_MS.
  if (op->timeout.count() <= 0)
    op->timeout = init_.cfg.timeout;
  auto on_board = board_algorithm_for(*op);
  if (!on_board.empty()) {
    // Above MCCL_INLINE_BYTES the call returns at once, as over the links.
    if (bytes > init_.cfg.inline_bytes && bytes > init_.board->slot_bytes())
      return post_to_board(op, work, on_board);
    return run_on_board(op, work, on_board);
  }
  op->background = op_thread_ && bytes <= init_.cfg.op_thread_bytes ? driver_kind::op_thread
                                                                      : driver_kind::actor;
  // A small collective runs to its end here: no thread hand-off at all.
  // Point-to-point ops never do: a receive may wait for a send this caller
  // issues next.
  bool small = !is_p2p(op->kind) && bytes <= init_.cfg.inline_bytes && init_.cfg.inline_bytes > 0;
  if (small)
    engine_->caller_arrived(); // before the post: no background driver takes it meanwhile
  {
    std::lock_guard<std::mutex> guard{submit_mutex_};
    op->id = next_id_++;
    if (op->timeout.count() < shortest_timeout_ms_.load(std::memory_order_relaxed))
      shortest_timeout_ms_.store(op->timeout.count(), std::memory_order_relaxed); // under submit_mutex_
    if (op->kind == op_kind::send)
      op->seq = next_message_[static_cast<std::size_t>(op->root)]++;
    else if (op->kind != op_kind::recv) {
      op->seq = next_seq_++;
      if (init_.board) // a peer waiting on the board at this seq learns what we issued
        init_.board->note(op->seq, board_tag_of(*op, init_.world));
    }
    engine_->post(op);
  }
  // Captures no more than fits in std::function's own storage: no
  // allocation per op.
  std::weak_ptr<comm_core> self = weak_from_this();
  work->set_driver([self](const work_state& state, clock::time_point deadline) {
    auto c = self.lock();
    return c && c->drive(driver_kind::caller, [&] { return state.done(); }, deadline);
  });
  if (small) {
    bool led = lead_until(driver_kind::caller, [&] { return work->done(); },
                          now() + op->timeout + std::chrono::seconds(1));
    engine_->caller_left();
    engine_->hand_off();
    if (led)
      return;
  }
  // Left to a background driver until someone waits for it.
  if (op->background == driver_kind::op_thread) {
    if (op_thread_->posted())
      metrics_registry::count_thread_wakeup();
  } else {
    caf::anon_send(progress_, drive_atom::value);
  }
}

bool comm_core::drive(driver_kind who, const std::function<bool()>& done, clock::time_point deadline) {
  bool caller = who == driver_kind::caller;
  if (caller)
    engine_->caller_arrived();
  bool led = lead_until(who, done, deadline);
  if (caller)
    engine_->caller_left();
  engine_->hand_off(); // work left that nobody drives now goes to a background driver
  return led;
}

bool comm_core::lead_until(driver_kind who, const std::function<bool()>& done, clock::time_point deadline) {
  bool led = false;
  auto idle_since = now();
  while (!done()) {
    auto lead = engine_->try_lead(who);
    if (!lead && who != driver_kind::caller)
      break; // another thread leads: it finishes the work or hands it off
    if (!lead) {
      // Another thread leads: a tick's single pass, a background driver
      // that lets go once it sees a caller (woken for that), or another
      // caller. Take over as soon as it lets go (spinning first: that is
      // usually microseconds away), unless it completes our work first.
      engine_->wake();
      for (auto until = now() + init_.cfg.spin; !lead && !done() && now() < until;) {
        std::this_thread::yield();
        lead = engine_->try_lead(who);
      }
      if (!lead) {
        if (now() >= deadline)
          break;
        engine_->await_release(std::min(deadline, now() + wait_slice));
        continue;
      }
    }
    led = true;
    for (;;) {
      bool moved = pass(lead);
      auto t = now();
      // Letting go completes what ended; then look at `done` again. (It
      // may hold already: another leader completed the work between our
      // last look and taking the lead.)
      if (engine_->completions_pending(lead) || done() || t >= deadline)
        break;
      if (moved) {
        idle_since = t;
        continue;
      }
      // Nothing moved: the peers' frames are on their way. What waits for
      // an idle moment (a batch of metrics to fold) runs in that wait.
      if (idle_unit_->drain() > 0)
        continue;
      // The peers' frames are usually microseconds away: spin briefly,
      // yielding so a peer that shares this core can run, then sleep in
      // the kernel until a connection is ready.
      if (t - idle_since < init_.cfg.spin) {
        std::this_thread::yield();
        continue;
      }
      engine_->wait(lead, std::min({deadline, engine_->next_due(lead), t + wait_slice}));
    }
    let_go(lead);
    if (now() >= deadline)
      break;
  }
  return led;
}

comm_core::actor_turn comm_core::drive_as_actor(const std::function<void()>& wake,
                                                clock::time_point& idle_since) {
  actor_turn turn;
  auto lead = engine_->try_lead(driver_kind::actor);
  if (!lead)
    return turn; // another thread leads; it hands off when it lets go
  auto t = now();
  bool moved = false;
  // A bounded turn, so the worker serves other actors in between.
  for (int passes = 0; passes < 16; ++passes) {
    bool m = pass(lead);
    moved |= m;
    if (!m || engine_->completions_pending(lead))
      break;
  }
  if (!moved)
    idle_unit_->drain(); // as in lead_until()
  t = now();
  if (moved)
    idle_since = t;
  turn.more = !engine_->quiet(lead);
  turn.next = t;
  if (turn.more && !moved && t - idle_since >= init_.cfg.spin) {
    engine_->arm(lead, wake);
    turn.next = engine_->next_due(lead);
  }
  let_go(lead);
  return turn;
}

bool comm_core::pass(engine::leadership& lead) {
  auto resumes = unit_->resumes();
  bool moved = engine_->progress(lead);
  // What the pass told the communicator's actors (the engine's findings
  // for a link actor or the supervisor), and what came for them from other
  // threads, they handle now, on this thread. What they post to the engine
  // (a revoke, a resume) the next pass takes at once, also when they ran
  // within the pass (a link's turn drains the unit). When nothing is
  // queued (every op's pass), this reads three words. Bounded, so a
  // stream of mail cannot keep the leader from its own op's deadline: what
  // is left, the leader's next pass (or let_go()) takes.
  for (int extra = 0; extra < max_extra_passes
                      && (unit_->drain() > 0 || (unit_->resumes() != resumes && engine_->has_posted()));
       ++extra) {
    resumes = unit_->resumes();
    moved |= engine_->progress(lead);
  }
  return moved;
}

void comm_core::let_go(engine::leadership& lead) {
  lead.release(false);
  // A message for the actors queued by a thread that found the engine led
  // just now (actors_have_mail) was left to this leader: if it let go
  // before draining it, it runs here. (The fence pairs with the queuing
  // thread's: one of the two sees the other.)
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (unit_->foreign_jobs_waiting())
    kick();
}

void comm_core::kick() {
  // A handler of the communicator's actors, which the leader runs in its
  // pass (pass()): what it posted, the leader's next pass takes.
  if (engine_->led_by_this_thread())
    return;
  // Again while mail came as it let go, a few times at most: mail that
  // keeps coming is the next leader's (or the watchdog's next tick's).
  for (int round = 0; round < max_extra_passes; ++round) {
    auto lead = engine_->try_lead(driver_kind::actor);
    if (!lead)
      return;
    pass(lead);
    idle_unit_->drain(); // nobody led: an idle moment (the watchdog's tick, say)
    lead.release();
    std::atomic_thread_fence(std::memory_order_seq_cst); // as in let_go()
    if (!unit_->foreign_jobs_waiting())
      return;
  }
}

void comm_core::actors_have_mail() {
  // Called on the thread that queued it, outside the unit's lock.
  if (engine_->led_by_this_thread())
    return; // the engine's listener, inside a pass: pass() drains after it
  std::atomic_thread_fence(std::memory_order_seq_cst); // as in let_go()
  // Nobody leads: it runs here, this thread leading for the while.
  kick();
  // Another thread leads: it drains after its pass, or in let_go(); if it
  // sleeps in the engine's wait, this knock wakes it.
  engine_->wake();
}

void comm_core::check() {
  engine_->post_check();
  kick();
}

std::chrono::milliseconds comm_core::health_interval() const {
  using ms = std::chrono::milliseconds;
  auto idle = std::max(init_.cfg.heartbeat / 4, ms(1));
  if (engine_->idle())
    return idle;
  auto busy = ms(shortest_timeout_ms_.load(std::memory_order_relaxed) / 50);
  return std::max(std::min(busy, idle), std::min(idle, ms(20)));
}

void comm_core::abort(const std::string& reason) {
  if (finalized_.load())
    return;
  engine_->post_abort(errc::aborted, "rank " + std::to_string(init_.rank) + " called abort: " + reason,
                      init_.rank);
  kick();
}

void comm_core::revoke(const std::string& reason) {
  if (finalized_.load())
    return;
  // The supervisor performs it. Bounded: when CAF's workers cannot run it
  // within revoke_answer (or its clock is a test's), this thread posts the
  // revoke itself, so revoked() holds when revoke() returns either way.
  bool done = false;
  if (supervisor_ && !init_.simulated_time) {
    caf::scoped_actor self{*init_.system};
    self->request(supervisor_, revoke_answer, revoke_atom::value, reason)
      .receive([&](bool) { done = true; },
               [this](caf::error& e) {
                 MCCL_LOG(warn, "rank " << init_.rank << ": the supervisor did not take the revoke ("
                                        << caf::to_string(e) << "); revoking without it");
               });
  }
  if (!done)
    engine_->post_revoke(init_.rank, reason);
  kick(); // begins here unless a thread leads (which begins it within its pass)
}

std::vector<int> comm_core::probe(uint32_t tag) {
  auto answer = std::make_shared<std::promise<std::vector<int>>>();
  auto result = answer->get_future();
  engine_->post_task([this, tag, answer] {
    std::vector<int> ready;
    for (int peer = 0; peer < init_.world; ++peer)
      if (engine_->has_unclaimed_message(peer, tag))
        ready.push_back(peer);
    answer->set_value(std::move(ready));
  });
  kick(); // runs it here unless a thread leads (which runs it within a pass)
  if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready)
    throw error(errc::internal, "probe on rank " + std::to_string(init_.rank)
                                  + ": the engine did not answer within 5 s");
  return result.get();
}

bool comm_core::status(std::vector<engine::op_status>& out, std::chrono::milliseconds timeout) {
  if (finalized_.load())
    return true; // nothing in flight
  auto answer = std::make_shared<std::promise<std::vector<engine::op_status>>>();
  auto result = answer->get_future();
  engine_->post_task([this, answer] { answer->set_value(engine_->running_ops()); });
  kick();
  {
    std::lock_guard<std::mutex> guard{board_status_mutex_};
    if (board_op_) {
      engine::op_status s;
      s.op = describe(*board_op_);
      s.seq = board_op_->seq;
      s.algorithm = board_op_algorithm_;
      s.where = "on the host's shared-memory board, waiting for every rank to arrive";
      s.running_ms = std::chrono::duration<double, std::milli>(clock::now() - board_op_started_).count();
      out.push_back(std::move(s));
    }
  }
  if (result.wait_for(timeout) != std::future_status::ready)
    return false;
  auto engine_ops = result.get();
  out.insert(out.end(), engine_ops.begin(), engine_ops.end());
  return true;
}

// ---- finalize -------------------------------------------------------------------

void comm_core::finalize(std::chrono::milliseconds flush, bool await_actors) {
  std::lock_guard<std::mutex> guard{finalize_mutex_};
  if (finalized_.exchange(true))
    return;
  {
    // Finalizing is not an abort: the callbacks never run, and what they
    // hold goes now.
    std::lock_guard<std::mutex> abort_guard{abort_mutex_};
    abort_callbacks_.clear();
  }
  if (op_thread_)
    op_thread_->stop();
  // A thread that leads for its own op lets go once that op ended; finalize
  // ends it (as for any op in flight) if it does not let go soon.
  auto start = clock::now();
  bool asked = false;
  engine::leadership lead;
  while (!(lead = engine_->try_lead(driver_kind::caller)) && clock::now() < start + finalize_lead_wait) {
    if (!asked && clock::now() > start + std::chrono::milliseconds(50)) {
      engine_->post_abort(errc::finalized,
                          "rank " + std::to_string(init_.rank) + " finalized the communicator with ops in flight",
                          init_.rank);
      asked = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (lead) {
    uint64_t issued;
    {
      std::lock_guard<std::mutex> no_submissions{submit_mutex_};
      issued = next_seq_;
    }
    if (init_.board) // peers waiting on the board for an op we never issue fail now
      init_.board->depart(issued);
    engine_->shutdown(lead, issued, now() + flush);
    // What the shutdown told the actors (an abort for the ops it ended)
    // they take now, before the supervisor stops them.
    while (unit_->drain() > 0) {
    }
    let_go(lead);
  } else {
    MCCL_LOG(warn, "finalize of rank " << init_.rank << ": a thread kept leading the engine for "
                                       << finalize_lead_wait.count() << " s; closing without BYE");
  }
  stop_board_thread();
  if (init_.watchdog)
    caf::anon_send(init_.watchdog, unwatch_atom::value, watch_key_);
  // The supervisor stops the links and the progress actor, then itself.
  if (supervisor_ && !await_actors) {
    caf::anon_send(supervisor_, shutdown_atom::value);
  } else if (supervisor_) {
    caf::scoped_actor self{*init_.system};
    self->request(supervisor_, std::chrono::seconds(3), shutdown_atom::value)
      .receive([](bool) {},
               [this](caf::error& e) {
                 MCCL_LOG(warn, "finalize of rank " << init_.rank << ": supervisor actor did not confirm: "
                                                    << caf::to_string(e));
               });
    supervisor_ = nullptr;
    progress_ = nullptr;
  }
  {
    std::lock_guard<std::mutex> guard{links_mutex_}; // peer_failed() may run on a leader finalize did not stop
    links_.clear();
  }
  if (trace_) {
    try {
      auto path = trace_->write();
      MCCL_LOG(info, "rank " << init_.rank << ": trace of communicator " << init_.comm_id
                             << " written to " << path);
    } catch (const error& e) {
      MCCL_LOG(error, e.what());
    }
  }
}

// ---- engine_listener ------------------------------------------------------------

void comm_core::needs_driver(driver_kind who) {
  // Counted when a thread is really called in: the op thread is not woken
  // while callers drive their ops (op_thread.hpp), which is what a
  // sendrecv's caller does between its send and its receive.
  if (who == driver_kind::op_thread && op_thread_) {
    if (op_thread_->needed())
      metrics_registry::count_thread_wakeup();
  } else if (progress_) {
    metrics_registry::count_thread_wakeup();
    caf::anon_send(progress_, drive_atom::value);
  }
}

void comm_core::aborted(errc code, const std::string& why, int origin) {
  if (supervisor_)
    caf::anon_send(supervisor_, aborted_atom::value, code, why, origin);
  std::vector<std::function<void(const error&)>> callbacks;
  error e{code, why};
  {
    std::lock_guard<std::mutex> guard{abort_mutex_};
    aborted_with_ = e;
    callbacks.swap(abort_callbacks_);
  }
  for (auto& cb : callbacks)
    cb(e);
}

void comm_core::on_abort(std::function<void(const error&)> cb) {
  std::unique_lock<std::mutex> lock{abort_mutex_};
  if (!aborted_with_) {
    abort_callbacks_.push_back(std::move(cb));
    return;
  }
  auto e = *aborted_with_;
  lock.unlock();
  cb(e);
}

void comm_core::link_lost(int peer, const std::string& why) {
  if (supervisor_)
    caf::anon_send(supervisor_, link_lost_atom::value, peer, why);
}

void comm_core::peer_failed(int peer, errc code, const std::string& why) {
  // To the peer's link actor, which exits with it; its supervisor revokes
  // (supervisor_actor.hpp). Without one (finalized), the engine revokes
  // by itself after supervisor_window.
  std::lock_guard<std::mutex> guard{links_mutex_};
  if (peer >= 0 && peer < static_cast<int>(links_.size()) && links_[static_cast<std::size_t>(peer)])
    caf::anon_send(links_[static_cast<std::size_t>(peer)], peer_failed_atom::value, code, why);
}

void comm_core::announce_members(uint64_t epoch, std::vector<int> members) {
  if (finalized_.load())
    return;
  if (supervisor_ && init_.simulated_time) {
    // A deterministic test's scheduler delivers it when the test runs it.
    caf::anon_send(supervisor_, members_atom::value, epoch, std::move(members));
    return;
  }
  bool answered = false;
  if (supervisor_) {
    caf::scoped_actor self{*init_.system};
    self->request(supervisor_, revoke_answer, members_atom::value, epoch, members)
      .receive([&](bool) { answered = true; },
               [this](caf::error& e) {
                 MCCL_LOG(warn, "rank " << init_.rank << ": the supervisor did not take the membership ("
                                        << caf::to_string(e) << "); kept without it");
               });
  }
  if (!answered)
    set_members({epoch, std::move(members)});
}

comm_core::membership comm_core::members() const {
  std::lock_guard<std::mutex> guard{members_mutex_};
  return members_;
}

void comm_core::set_members(membership m) {
  std::lock_guard<std::mutex> guard{members_mutex_};
  members_ = std::move(m);
}

} // namespace mccl::actors
