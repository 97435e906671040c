// The actor of include/mccl/comm_actor.hpp: one per communicator an
// embedding program asked for. Each request issues one op and keeps its
// response promise; the op's completion (on an mccl thread) comes back as a
// message, and the handler answers. An abort comes back the same way and
// ends the actor with it.

#include <mccl/comm_actor.hpp>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <map>
#include <utility>

namespace mccl {

namespace {

/// The category of mccl's errors inside CAF (caf::error's category).
constexpr caf::atom_value mccl_category = caf::atom("mccl");

using op_done_atom = caf::atom_constant<caf::atom("opdone")>;
using comm_aborted_atom = caf::atom_constant<caf::atom("commabort")>;

struct comm_actor_state {
  communicator comm;
  struct pending_op {
    work handle;
    caf::typed_response_promise<op_metrics> promise;
  };
  uint64_t next_id = 0;
  std::map<uint64_t, pending_op> pending; ///< by issue order
  std::optional<error> aborted;
  static inline const char* name = "mccl.comm_actor";
};

using self_ptr = caf::stateful_actor<comm_actor_state>*;

/// Sends `xs...` to the actor behind `weak` if it still lives; from any
/// thread (an mccl thread, in practice).
template <class... Ts>
void tell(const caf::weak_actor_ptr& weak, Ts&&... xs) {
  if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(weak))
    caf::anon_send(caf::actor_cast<caf::actor>(strong), std::forward<Ts>(xs)...);
}

/// Issues the op `issue` makes on the actor's communicator and answers the
/// request once it is done (op_done_atom).
template <class Issue>
caf::result<op_metrics> start(self_ptr self, Issue&& issue) {
  auto& st = self->state;
  if (st.aborted)
    return to_caf_error(*st.aborted);
  work handle;
  try {
    handle = issue(st.comm);
  } catch (const error& e) {
    // Refused before it started (bad arguments, a closed communicator):
    // only this request fails.
    return to_caf_error(e);
  }
  auto id = st.next_id++;
  auto promise = self->make_response_promise<op_metrics>();
  st.pending.emplace(id, comm_actor_state::pending_op{handle, promise});
  caf::weak_actor_ptr weak{self->ctrl()};
  handle.on_complete([weak, id] { tell(weak, op_done_atom::value, id); });
  return promise;
}

caf::behavior comm_actor_impl(self_ptr self, communicator comm) {
  self->state.comm = std::move(comm);
  caf::weak_actor_ptr weak{self->ctrl()};
  self->state.comm.on_abort([weak](const error& e) {
    tell(weak, comm_aborted_atom::value, static_cast<int>(e.code()), e.message());
  });
  return {
    [self](allreduce_atom, buffer_view v, redop op) {
      return start(self, [&](communicator& c) { return c.allreduce(v.data, v.data, v.count, v.type, op); });
    },
    [self](broadcast_atom, buffer_view v, int root) {
      return start(self, [&](communicator& c) { return c.broadcast(v.data, v.data, v.count, v.type, root); });
    },
    [self](allgather_atom, buffer_view send, buffer_view recv) {
      return start(self, [&](communicator& c) { return c.allgather(send.data, recv.data, send.count, send.type); });
    },
    [self](reduce_scatter_atom, buffer_view send, buffer_view recv, redop op) {
      return start(self,
                   [&](communicator& c) { return c.reduce_scatter(send.data, recv.data, recv.count, recv.type, op); });
    },
    [self](barrier_atom) { return start(self, [](communicator& c) { return c.barrier(); }); },
    [self](op_done_atom, uint64_t id) {
      auto& pending = self->state.pending;
      auto it = pending.find(id);
      if (it == pending.end())
        return; // answered already (the abort came first)
      auto [handle, promise] = std::move(it->second);
      pending.erase(it);
      if (auto failure = handle.failure())
        promise.deliver(to_caf_error(*failure));
      else
        promise.deliver(handle.metrics());
    },
    [self](comm_aborted_atom, int code, const std::string& why) {
      error e{static_cast<errc>(code), why};
      self->state.aborted = e;
      auto reason = to_caf_error(e);
      // Ops in flight fail with the abort too; answer them now rather than
      // leave their requesters waiting for completions after the exit.
      for (auto& [id, op] : self->state.pending)
        op.promise.deliver(reason);
      self->state.pending.clear();
      self->quit(reason);
    },
  };
}

} // namespace

comm_actor spawn_comm_actor(caf::actor_system& system, communicator comm) {
  if (!comm.valid())
    throw error(errc::invalid_argument, "spawn_comm_actor: the communicator is empty (split with a negative "
                                        "color, or default-constructed)");
  // Detached: a small op runs to its end inside the call that issues it
  // (as for any caller of the communicator), which must not hold up CAF's
  // workers and the program's other actors meanwhile.
  return caf::actor_cast<comm_actor>(system.spawn<caf::detached>(comm_actor_impl, std::move(comm)));
}

caf::error to_caf_error(const error& e) {
  return caf::error(static_cast<uint8_t>(e.code()), mccl_category, caf::make_message(e.message()));
}

std::optional<error> from_caf_error(const caf::error& e) {
  if (e.category() != mccl_category)
    return std::nullopt;
  std::string message;
  if (e.context().match_elements<std::string>())
    message = e.context().get_as<std::string>(0);
  return error(static_cast<errc>(e.code()), message);
}

std::string describe(const caf::error& e) {
  if (auto mine = from_caf_error(e))
    return mine->what();
  return caf::to_string(e);
}

} // namespace mccl
