#include "actors/op_actor.hpp"

#include "actors/in_place_actor.hpp"

#include "collectives/observability/metrics_registry.hpp"

#include <caf/sec.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <exception>
#include <typeinfo>

namespace mccl::actors {
namespace {

/// Marks its slot's actor as inside one of its handlers while it lives.
class in_handler {
public:
  explicit in_handler(op_slot& s) : slot_(s) { slot_.running = true; }
  ~in_handler() { slot_.running = false; }
  in_handler(const in_handler&) = delete;
  in_handler& operator=(const in_handler&) = delete;

private:
  op_slot& slot_;
};

/// One op actor. Its behaviour is the five handlers below (the interface
/// CAF checks op_handle against), and it matches a message to them itself
/// (in_place_actor.hpp): every message an op actor gets is one of these
/// five types, from the engine or the board's runner on the driving
/// thread, never a request, so CAF's general consume() does nothing here
/// that the op needs. It cost 420 instructions a message more
/// (callgrind, rank 0 of a 2-rank 4 B sendrecv over shared memory: 1,860
/// instructions a message in CAF's activate() with the handler, 1,440 with
/// this one; docs/performance.md, "The op actors against the engine before
/// them"), and CAF's element match, which the type_info comparison below
/// replaced, about 100 more. CAF 0.17's own raw_event_based_actor overrides
/// consume() too, to skip the system messages. What is not one of the five
/// (an exit or down message, say) goes to CAF's consume(). What a handler
/// throws runs the exception handler and ends the actor.
class op_actor final : public in_place_actor<op_actor, op_handle::base> {
  friend class in_place_actor<op_actor, op_handle::base>;

public:
  op_actor(caf::actor_config& cfg, op_slot* slot) : in_place_actor(cfg), slot_(slot) {
    // The op's own guard (op_session) turns what its algorithm throws into
    // the op's failure. Anything that escapes a handler anyway ends the
    // actor with an error: its op fails first, naming it, so the engine
    // aborts the communicator as for any failed op, and the supervisor that
    // monitors the actor hears of it; the pool does not take it back.
    set_exception_handler(
      [this](caf::scheduled_actor*, std::exception_ptr& x) -> caf::error { return failed_with(x); });
  }

  const char* name() const override { return "mccl.op"; }

  behavior_type make_behavior() override {
    started();
    return {
      [this](transport::received_frame& f) { on(f); },
      [this](op_binding& b) { on(b); },
      [this](const frame_left& f) { on(f); },
      [this](const op_failure& f) { on(f); },
      [this](board_binding& b) { on(b); },
    };
  }

private:
  /// Runs the handler of `m` when it is one value of one of the five types
  /// (CAF's type number 0: a custom type, named by its type_info); false
  /// when it is not.
  bool handled(const one_value& m) {
    if (m.type == nullptr)
      return false;
    switch (which(*m.type)) { // the chunk first: the most frequent
      case 0: on(m.as<transport::received_frame>()); return true;
      case 1: on(m.as<op_binding>()); return true;
      case 2: on(m.as<frame_left>()); return true;
      case 3: on(m.as<op_failure>()); return true;
      case 4: on(m.as<board_binding>()); return true;
      default: return false;
    }
  }

  /// What escaped a handler: its op fails, naming it, and the actor ends
  /// with the error returned.
  caf::error failed_with(const std::exception_ptr& x) {
    slot_->failed = true;
    slot_->running = false;
    auto what = what_escaped(x);
    if (board_ != nullptr)
      board_->fail(errc::internal, "its op actor failed: " + what);
    else if (op_ != nullptr)
      op_->fail(errc::internal, "its op actor failed: " + what);
    return caf::make_error(caf::sec::runtime_error, "op actor: " + what);
  }

  /// Which of the five types `t` is (in the order of make_behavior()), or
  /// -1. The type_info objects are compared by address first: within
  /// libmccl each type has one, so that settles it without a name
  /// comparison (a strcmp per type tried: about 100 instructions for the
  /// fifth); by name only when none is the same object.
  static int which(const std::type_info& t) {
    static const std::type_info* const types[] = {&typeid(transport::received_frame), &typeid(op_binding),
                                                  &typeid(frame_left), &typeid(op_failure), &typeid(board_binding)};
    for (int i = 0; i < 5; ++i)
      if (&t == types[i])
        return i;
    for (int i = 0; i < 5; ++i)
      if (t == *types[i])
        return i;
    return -1;
  }

  /// A chunk of the op's.
  void on(transport::received_frame& f) {
    in_handler running{*slot_};
    if (op_ != nullptr)
      op_->deliver(f);
  }
  /// Start: the op it hosts from now on.
  void on(op_binding& b) {
    in_handler running{*slot_};
    op_ = b.op;
    b.op->start_op(b.early);
  }
  void on(const frame_left& f) {
    in_handler running{*slot_};
    if (op_ != nullptr)
      op_->frame_sent(f.peer, f.step, f.chunk);
  }
  void on(const op_failure& f) {
    in_handler running{*slot_};
    if (op_ != nullptr)
      op_->fail(f.code, f.why);
  }
  /// A board op, start to end.
  void on(board_binding& b) {
    in_handler running{*slot_};
    board_ = b.op;
    b.op->run();
    board_ = nullptr;
  }

  op_slot* slot_;
  /// The op it hosts, set by each start message. While the actor waits in
  /// the pool it still names the last one, but no message reaches it then.
  op_session* op_ = nullptr;
  /// The board op it runs now (null between them), for the exception
  /// handler.
  board_session* board_ = nullptr;
};

} // namespace

/// One op actor of the pool: its handle, and what its handlers say of it
/// (op_slot, written and read on the driving thread only).
struct op_actors::slot : op_slot {
  op_handle actor;
  in_place_target target; ///< the actor itself, for dispatch (the handle keeps it)
};

template <class... Ts>
void op_actors::send(slot& to, Ts&&... xs) {
  metrics_registry::count_actor_messages(1);
  // Its handler hosts the chunk messages it sends its links (nesting).
  if (unit_.can_dispatch(to.target, nesting::op_messages)) {
    unit_.dispatch(to.target, nesting::link_chunks, std::forward<Ts>(xs)...);
  } else {
    driving_unit::driver_scope driving{unit_};
    unit_.deliver(to.actor, std::forward<Ts>(xs)...);
  }
  unit_.drain();
}

/// The engine's side of one op actor while it hosts an op; gives the
/// actor back to the pool when the engine forgets the op, unless it died.
class op_actors::runner final : public op_runner {
public:
  runner(op_actors& pool, std::unique_ptr<slot> s, op_session& op) : pool_(pool), slot_(std::move(s)), op_(op) {}
  ~runner() override {
    if (!slot_->failed)
      pool_.idle_.push_back(std::move(slot_));
  }

  void start(std::vector<transport::received_frame> early) override {
    send(op_binding{&op_, std::move(early)});
  }
  // An event the op's own handler raises for the op (a small frame it sends
  // is copied by the channel and so reported sent at once; a send to a
  // closed link fails it)
  // is an outcome of what that handler is doing: the handler, already
  // running on the op's actor, takes it in place, as a call's return
  // value, not as a message to itself. Only events from elsewhere (the
  // engine's reads and writes for the op, another op's handler, an abort)
  // are messages.
  void chunk(transport::received_frame& f) override {
    if (slot_->running)
      return op_.deliver(f);
    send(std::move(f));
  }
  void sent(int peer, uint32_t step, uint32_t chunk) override {
    if (slot_->running)
      return op_.frame_sent(peer, step, chunk);
    send(frame_left{peer, step, chunk});
  }
  void fail(errc code, const std::string& why) override {
    if (slot_->running)
      return op_.fail(code, why);
    send(op_failure{code, why});
  }

private:
  template <class... Ts>
  void send(Ts&&... xs) {
    if (slot_->failed) {
      // Its actor died and failed the op: nothing is left to tell it.
      return;
    }
    pool_.send(*slot_, std::forward<Ts>(xs)...);
  }

  op_actors& pool_;
  std::unique_ptr<slot> slot_;
  op_session& op_;
};

op_actors::op_actors(driving_unit& unit, std::function<void(const op_handle&)> supervise)
  : unit_(unit), supervise_(std::move(supervise)) {
}

op_actors::~op_actors() = default; // dropping the last handle ends an idle actor

std::unique_ptr<op_actors::slot> op_actors::take() {
  std::unique_ptr<slot> s;
  if (idle_.empty()) {
    s = std::make_unique<slot>();
    driving_unit::driver_scope driving{unit_};
    s->actor = unit_.spawn_class<op_actor>(static_cast<op_slot*>(s.get()));
    auto* actor = static_cast<op_actor*>(caf::actor_cast<caf::abstract_actor*>(s->actor));
    s->target = {actor, actor};
    if (supervise_)
      supervise_(s->actor);
    // Its first run (CAF's launch: make_behavior) now, not at the next
    // drain, so that its first message, the op's start, finds it idle and
    // is dispatched in place like any other. From its mailbox, the start's
    // handler would run with no host for its chunk messages, and the op
    // would hear by a message what a small frame's chunk tells it in place
    // (a message more for a new actor's first op). A drain already
    // running (a start sent from a handler) takes it after that handler.
    unit_.drain();
  } else {
    s = std::move(idle_.back());
    idle_.pop_back();
  }
  return s;
}

std::unique_ptr<op_runner> op_actors::runner_for(op_session& op) {
  return std::make_unique<runner>(*this, take(), op);
}

void op_actors::run(board_session& op) {
  auto s = take();
  send(*s, board_binding{&op});
  if (!s->failed) // a dead actor failed its op, and leaves the pool
    idle_.push_back(std::move(s));
}

} // namespace mccl::actors
