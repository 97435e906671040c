#include "actors/progress_actor.hpp"

#include "actors/comm_core.hpp"
#include "config/log.hpp"

#include <caf/all.hpp>

namespace mccl::actors {

namespace {

/// How long a parked actor waits at most before it looks again.
constexpr auto park_limit = std::chrono::milliseconds(100);

struct progress_state {
  core_ref core;
  /// A drive message it sent itself is queued: another is not.
  bool spin_queued = false;
  /// Its timer is set, for this time: one timer at a time, the earliest.
  bool timer_set = false;
  comm_core::clock::time_point timer_due{};
  comm_core::clock::time_point idle_since{};
  static inline const char* name = "mccl.progress";
};

using progress_self = progress_handle::stateful_pointer<progress_state>;

/// One turn: lead while bytes move, then come back soon (spinning through
/// the mailbox), or park until a connection is ready or the timer fires.
void drive(progress_self self) {
  auto core = self->state.core.lock();
  if (!core)
    return;
  progress_handle me = self;
  auto wake = [me] { caf::anon_send(me, drive_atom::value); };
  auto& st = self->state;
  auto turn = core->drive_as_actor(wake, st.idle_since);
  if (!turn.more)
    return;
  auto now = core->now();
  if (turn.next <= now) {
    if (!st.spin_queued) {
      st.spin_queued = true;
      self->send(self, drive_atom::value);
    }
    return;
  }
  auto due = std::min(turn.next, now + park_limit);
  if (st.timer_set && st.timer_due <= due)
    return;
  st.timer_set = true;
  st.timer_due = due;
  self->delayed_send(self, due - now, tick_atom::value);
}

progress_handle::behavior_type progress_actor(progress_self self, core_ref core) {
  self->state.core = std::move(core);
  return {
    [self](drive_atom) {
      self->state.spin_queued = false;
      drive(self);
    },
    [self](tick_atom) {
      auto& st = self->state;
      auto core = st.core.lock();
      if (!core || !st.timer_set || core->now() < st.timer_due)
        return; // an earlier timer, replaced
      st.timer_set = false;
      drive(self);
    },
    [self](shutdown_atom) {
      self->quit();
      return true;
    },
  };
}

} // namespace

progress_handle spawn_progress_actor(caf::actor_system& sys, core_ref core) {
  return sys.spawn(progress_actor, std::move(core));
}

} // namespace mccl::actors
