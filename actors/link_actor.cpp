#include "actors/link_actor.hpp"

#include "actors/comm_core.hpp"
#include "actors/driven_actor.hpp"
#include "actors/in_place_actor.hpp"
#include "collectives/engine/engine.hpp"
#include <mccl/comm_actor.hpp>

#include <caf/all.hpp>

#include <typeinfo>

namespace mccl::actors {

namespace {

/// One link actor. Driven (driven_actor.hpp): every message it gets, from
/// the engine's pass, its listener, the supervisor or the resumer, runs on
/// the communicator's driving unit. Its phases are behaviours (become());
/// each takes the pass's turn (link_turn) the same way.
///
/// The turn comes on every pass that visits the link while it has something
/// to do (channel::has_work), so the actor matches
/// it by type itself, from the mailbox and in place (in_place_actor.hpp);
/// every other message takes CAF's way.
class link_actor final : public in_place_actor<link_actor, driven_actor<link_handle::base>> {
  friend class in_place_actor<link_actor, driven_actor<link_handle::base>>;

public:
  link_actor(caf::actor_config& cfg, link_init init) : in_place_actor(cfg), init_(std::move(init)) {}

  const char* name() const override { return "mccl.link"; }

  behavior_type make_behavior() override {
    started();
    return connected();
  }

private:
  /// Runs the handler of `m` when it is a turn or a chunk: one value of
  /// one of those types (CAF's type number 0: a custom type, named by its
  /// type_info, compared by address before by name, as op_actor.cpp
  /// explains).
  bool handled(const one_value& m) {
    if (m.type == nullptr)
      return false;
    const std::type_info& t = *m.type;
    bool turn = &t == &typeid(link_turn);
    bool chunk = !turn && &t == &typeid(chunk_out);
    if (!turn && !chunk) {
      turn = t == typeid(link_turn);
      chunk = !turn && t == typeid(chunk_out);
    }
    if (turn)
      on(m.as<link_turn>());
    else if (chunk)
      on(m.as<chunk_out>());
    return turn || chunk;
  }

  void on(const link_turn& t) { *t.moved = t.eng->move_link(init_.peer); }
  /// Every phase queues what an op hands it: a closed channel refuses it
  /// (engine::queue_chunk says what the op then hears).
  void on(const chunk_out& c) { c.eng->queue_chunk(init_.peer, c.chunk); }

  /// What escaped a turn run in place (the channel's writes and reads, and
  /// the ops' handlers, have guards of their own): the actor ends as CAF's default
  /// exception handler would end it, and its supervisor revokes.
  static caf::error failed_with(const std::exception_ptr& x) {
    return caf::make_error(caf::sec::runtime_error, what_escaped(x));
  }

  behavior_type connected() {
    return {
      [this](const link_turn& t) { on(t); },
      [this](const chunk_out& c) { on(c); },
      [this](link_lost_atom, const std::string&) { // the engine logged why
        if (!init_.resumer || init_.reconnect.count() == 0)
          return; // the engine reports the loss itself
        link_handle me = this;
        init_.resumer->resume(init_.peer, std::chrono::steady_clock::now() + init_.reconnect,
                              [me](transport::connection_ptr conn, const std::string& reason) {
                                caf::anon_send(me, resumed_atom::value, std::move(conn), reason);
                              });
        become(resuming());
      },
      [](resumed_atom, transport::connection_ptr& conn, const std::string&) {
        if (conn)
          conn->close(); // nothing asked for it any more
      },
      [this](aborted_atom) { become(closed()); },
      [this](peer_failed_atom, errc code, std::string& why) { lost_for_good(code, std::move(why)); },
      [this](shutdown_atom) { return stop(); },
    };
  }

  behavior_type resuming() {
    return {
      [this](const link_turn& t) { on(t); },
      [this](const chunk_out& c) { on(c); },
      [](link_lost_atom, const std::string&) {
        // Already re-establishing it.
      },
      [this](resumed_atom, transport::connection_ptr& conn, std::string& why) {
        auto core = init_.core.lock();
        if (!core) {
          if (conn)
            conn->close();
          return;
        }
        if (!conn) {
          // The peer is lost for good: the link exits with why, and its
          // supervisor revokes the communicator (supervisor_actor.hpp).
          quit(to_caf_error(error(errc::peer_lost, "not re-established within MCCL_RECONNECT_MS="
                                                     + std::to_string(init_.reconnect.count()) + " (" + why + ")")));
          return;
        }
        core->eng().post_resume(init_.peer, std::move(conn), std::string{});
        core->kick();
        become(connected());
      },
      [this](aborted_atom) {
        if (init_.resumer)
          init_.resumer->cancel(init_.peer);
        become(closed());
      },
      [this](peer_failed_atom, errc code, std::string& why) { lost_for_good(code, std::move(why)); },
      [this](shutdown_atom) { return stop(); },
    };
  }

  behavior_type closed() {
    return {
      // What the abort queued (the ABORT to the peer) still goes out.
      [this](const link_turn& t) { on(t); },
      [this](const chunk_out& c) { on(c); },
      [](link_lost_atom, const std::string&) {},
      [](resumed_atom, transport::connection_ptr& conn, const std::string&) {
        if (conn)
          conn->close();
      },
      [](aborted_atom) {},
      // Aborted already: nothing is left for a revoke to end.
      [](peer_failed_atom, errc, const std::string&) {},
      [this](shutdown_atom) { return stop(); },
    };
  }

  /// Every phase ends the same way at finalize.
  bool stop() {
    if (init_.resumer)
      init_.resumer->cancel(init_.peer);
    quit();
    return true;
  }

  /// The engine found the peer lost: the link exits with why, and its
  /// supervisor revokes the communicator (supervisor_actor.hpp).
  void lost_for_good(errc code, std::string why) {
    if (init_.resumer)
      init_.resumer->cancel(init_.peer);
    quit(to_caf_error(error(code, std::move(why))));
  }

  link_init init_;
};

} // namespace

link_actor_ref spawn_link_actor(driving_unit& unit, link_init init) {
  link_actor_ref ref;
  ref.handle = unit.spawn_class<link_actor>(std::move(init));
  auto* actor = static_cast<link_actor*>(caf::actor_cast<caf::abstract_actor*>(ref.handle));
  ref.target = {actor, actor};
  return ref;
}

} // namespace mccl::actors
