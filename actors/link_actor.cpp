#include "actors/link_actor.hpp"

#include "actors/comm_core.hpp"
#include "actors/driven_actor.hpp"
#include <mccl/comm_actor.hpp>

#include <caf/all.hpp>

namespace mccl::actors {

namespace {

struct link_state {
  link_init init;
  static inline const char* name = "mccl.link";
};

/// Driven (driven_actor.hpp): every message it gets, from the engine's
/// listener, the supervisor or the resumer, runs on the communicator's
/// driving unit.
using link_self = caf::stateful_actor<link_state, driven_actor<link_handle::base>>*;

link_handle::behavior_type closed(link_self self);
link_handle::behavior_type resuming(link_self self);

/// Every phase ends the same way at finalize.
bool stop(link_self self) {
  if (self->state.init.resumer)
    self->state.init.resumer->cancel(self->state.init.peer);
  self->quit();
  return true;
}

/// The engine found the peer lost: the link exits with why, and its
/// supervisor revokes the communicator (supervisor_actor.hpp).
void lost_for_good(link_self self, errc code, std::string why) {
  if (self->state.init.resumer)
    self->state.init.resumer->cancel(self->state.init.peer);
  self->quit(to_caf_error(error(code, std::move(why))));
}

link_handle::behavior_type connected(link_self self) {
  return {
    [self](link_lost_atom, const std::string&) { // the engine logged why
      const auto& init = self->state.init;
      if (!init.resumer || init.reconnect.count() == 0)
        return; // the engine reports the loss itself
      link_handle me = self;
      init.resumer->resume(init.peer, std::chrono::steady_clock::now() + init.reconnect,
                           [me](transport::connection_ptr conn, const std::string& reason) {
                             caf::anon_send(me, resumed_atom::value, std::move(conn), reason);
                           });
      self->become(resuming(self));
    },
    [](resumed_atom, transport::connection_ptr& conn, const std::string&) {
      if (conn)
        conn->close(); // nothing asked for it any more
    },
    [self](aborted_atom) { self->become(closed(self)); },
    [self](peer_failed_atom, errc code, std::string& why) { lost_for_good(self, code, std::move(why)); },
    [self](shutdown_atom) { return stop(self); },
  };
}

link_handle::behavior_type resuming(link_self self) {
  return {
    [](link_lost_atom, const std::string&) {
      // Already re-establishing it.
    },
    [self](resumed_atom, transport::connection_ptr& conn, std::string& why) {
      auto core = self->state.init.core.lock();
      if (!core) {
        if (conn)
          conn->close();
        return;
      }
      if (!conn) {
        // The peer is lost for good: the link exits with why, and its
        // supervisor revokes the communicator (supervisor_actor.hpp).
        self->quit(to_caf_error(error(errc::peer_lost, "not re-established within MCCL_RECONNECT_MS="
                                                         + std::to_string(self->state.init.reconnect.count())
                                                         + " (" + why + ")")));
        return;
      }
      core->eng().post_resume(self->state.init.peer, std::move(conn), std::string{});
      core->kick();
      self->become(connected(self));
    },
    [self](aborted_atom) {
      if (self->state.init.resumer)
        self->state.init.resumer->cancel(self->state.init.peer);
      self->become(closed(self));
    },
    [self](peer_failed_atom, errc code, std::string& why) { lost_for_good(self, code, std::move(why)); },
    [self](shutdown_atom) { return stop(self); },
  };
}

link_handle::behavior_type closed(link_self self) {
  return {
    [](link_lost_atom, const std::string&) {},
    [](resumed_atom, transport::connection_ptr& conn, const std::string&) {
      if (conn)
        conn->close();
    },
    [](aborted_atom) {},
    // Aborted already: nothing is left for a revoke to end.
    [](peer_failed_atom, errc, const std::string&) {},
    [self](shutdown_atom) { return stop(self); },
  };
}

link_handle::behavior_type link_actor(link_self self, link_init init) {
  self->state.init = std::move(init);
  return connected(self);
}

} // namespace

link_handle spawn_link_actor(driving_unit& unit, link_init init) {
  return unit.spawn(link_actor, std::move(init));
}

} // namespace mccl::actors
