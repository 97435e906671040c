#include "actors/supervisor_actor.hpp"

#include "actors/comm_core.hpp"
#include "actors/driven_actor.hpp"
#include "collectives/observability/metrics_registry.hpp"
#include "config/log.hpp"
#include <mccl/comm_actor.hpp>

#include <caf/all.hpp>

namespace mccl::actors {

namespace {

/// How long finalize waits for a link or the progress actor to confirm
/// it stopped.
constexpr auto reply_timeout = std::chrono::seconds(2);

struct supervisor_state {
  core_ref core;
  std::vector<link_handle> links; ///< by peer; null at this rank and once exited
  progress_handle progress;
  /// The membership (members_atom): the epoch, and by rank the member's
  /// rank in the communicator this one was made from (at creation: 0 and
  /// the ranks themselves).
  uint64_t epoch = 0;
  std::vector<int> members;
  static inline const char* name = "mccl.supervisor";
};

/// Driven (driven_actor.hpp): the links' exits, the engine's findings, the
/// API's revokes and its own requests' timeouts all run on the
/// communicator's driving unit.
using supervisor_self = caf::stateful_actor<supervisor_state, driven_actor<supervisor_handle::base>>*;

/// The peer whose link actor is `who`, or -1.
int peer_of(const supervisor_state& st, const caf::actor_addr& who) {
  for (std::size_t p = 0; p < st.links.size(); ++p)
    if (st.links[p] && st.links[p].address() == who)
      return static_cast<int>(p);
  return -1;
}

/// A link exited. With an error, its peer is a lost member, and the
/// supervisor revokes the communicator: the engine fails every op in flight
/// naming the peer (with its own finding when it made one: the link exited
/// because the engine said so) and sends every peer an ABORT that revokes
/// the communicator there too. A normal exit (or user_shutdown) is
/// finalize's.
void on_link_exit(supervisor_self self, caf::exit_msg& msg) {
  auto& st = self->state;
  int peer = peer_of(st, msg.source);
  if (peer < 0)
    return;
  st.links[static_cast<std::size_t>(peer)] = nullptr;
  if (!msg.reason || msg.reason == caf::exit_reason::user_shutdown)
    return;
  auto core = st.core.lock();
  if (!core)
    return;
  // An mccl error: the engine's finding, or a connection not re-established
  // (the channel, waiting in "resuming", fails with why). Anything else (an
  // exception in a handler, a kill): the peer can no longer be kept alive.
  auto lost = mccl::from_caf_error(msg.reason);
  auto code = lost ? lost->code() : errc::peer_lost;
  auto why = lost ? lost->message()
                  : "the link actor of rank " + std::to_string(core->rank()) + " to rank " + std::to_string(peer)
                      + " exited: " + mccl::describe(msg.reason);
  metrics_registry::count_lost_link();
  int member = peer < static_cast<int>(st.members.size()) ? st.members[static_cast<std::size_t>(peer)] : peer;
  MCCL_LOG(warn, "rank " << core->rank() << ": supervisor of communicator " << core->init().comm_id << " (epoch "
                         << st.epoch << "): the link to rank " << peer << " (member " << member
                         << ") exited; revoking the communicator: " << why);
  core->eng().post_member_lost(peer, code, std::move(why));
  core->kick();
}

/// An op actor it monitors ended. With an error (its handler threw what
/// its op's guard does not catch) the op has failed already, naming the
/// reason; the communicator aborts, if it has not, saying so. Ends
/// without an error (unreachable: its communicator let go of it) are
/// normal.
void on_op_actor_down(supervisor_self self, caf::down_msg& msg) {
  if (!msg.reason || msg.reason == caf::exit_reason::unreachable
      || msg.reason == caf::exit_reason::user_shutdown)
    return;
  auto core = self->state.core.lock();
  if (!core)
    return;
  auto why = "an op actor of rank " + std::to_string(core->rank()) + " failed: " + mccl::describe(msg.reason);
  MCCL_LOG(error, why);
  core->eng().post_abort(errc::internal, why, core->rank());
  core->kick();
}

/// Stops the links, then the progress actor; `done` once all confirmed
/// (or did not answer within reply_timeout).
void stop_all(supervisor_self self, std::function<void()> done) {
  auto& st = self->state;
  auto pending = std::make_shared<std::size_t>(1); // the progress actor
  for (auto& l : st.links)
    if (l)
      ++*pending;
  auto one_done = [pending, done]() mutable {
    if (--*pending == 0)
      done();
  };
  for (auto& l : st.links) {
    if (!l)
      continue;
    self->request(l, reply_timeout, shutdown_atom::value)
      .then([one_done](bool) mutable { one_done(); }, [one_done](caf::error&) mutable { one_done(); });
  }
  st.links.clear();
  if (!st.progress) {
    one_done();
    return;
  }
  self->request(st.progress, reply_timeout, shutdown_atom::value)
    .then([one_done](bool) mutable { one_done(); }, [one_done](caf::error&) mutable { one_done(); });
  st.progress = nullptr;
}

supervisor_handle::behavior_type supervisor_actor(supervisor_self self, core_ref core,
                                                  std::vector<link_handle> links, progress_handle progress) {
  auto& st = self->state;
  st.core = std::move(core);
  st.links = std::move(links);
  st.progress = std::move(progress);
  for (std::size_t r = 0; r < st.links.size(); ++r) // as comm_core starts out too
    st.members.push_back(static_cast<int>(r));
  for (auto& l : st.links)
    if (l)
      self->link_to(l);
  self->set_exit_handler([self](caf::exit_msg& msg) { on_link_exit(self, msg); });
  self->set_down_handler([self](caf::down_msg& msg) { on_op_actor_down(self, msg); });
  return {
    [self](supervise_atom, caf::actor& op_actor) { self->monitor(op_actor); },
    [self](aborted_atom, errc, const std::string&, int) {
      // Nothing is re-established for an aborted communicator.
      for (auto& l : self->state.links)
        if (l)
          self->send(l, aborted_atom::value);
    },
    [self](link_lost_atom, int peer, std::string& why) {
      auto& links = self->state.links;
      if (peer >= 0 && peer < static_cast<int>(links.size()) && links[static_cast<std::size_t>(peer)])
        self->send(links[static_cast<std::size_t>(peer)], link_lost_atom::value, std::move(why));
    },
    [self](revoke_atom, std::string& reason) {
      // revoked() holds once post_revoke returns; the caller's thread
      // (or the next pass of whoever leads) begins the agreement.
      if (auto core = self->state.core.lock()) {
        MCCL_LOG(info, "rank " << core->rank() << ": supervisor of communicator " << core->init().comm_id
                               << " (epoch " << self->state.epoch << ") revokes it: " << reason);
        core->eng().post_revoke(core->rank(), std::move(reason));
      }
      return true;
    },
    [self](members_atom, uint64_t epoch, std::vector<int>& members) {
      auto& st = self->state;
      auto core = st.core.lock();
      if (!core || epoch == st.epoch || members.size() != static_cast<std::size_t>(core->world()))
        return false;
      st.epoch = epoch;
      st.members = std::move(members);
      MCCL_LOG(info, "rank " << core->rank() << ": communicator " << core->init().comm_id << " is epoch " << epoch
                             << " of its group (" << st.members.size() << " members)");
      core->set_members({st.epoch, st.members});
      return true;
    },
    [self](shutdown_atom) -> caf::typed_response_promise<bool> {
      auto rp = self->make_response_promise<bool>();
      stop_all(self, [self, rp]() mutable {
        rp.deliver(true);
        self->quit();
      });
      return rp;
    },
  };
}

} // namespace

supervisor_handle spawn_supervisor_actor(driving_unit& unit, core_ref core, std::vector<link_handle> links,
                                         progress_handle progress) {
  return unit.spawn(supervisor_actor, std::move(core), std::move(links), std::move(progress));
}

} // namespace mccl::actors
