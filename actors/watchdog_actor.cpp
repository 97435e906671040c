#include "actors/watchdog_actor.hpp"

#include "actors/comm_core.hpp"

#include <caf/all.hpp>

#include <map>

namespace mccl::actors {

namespace {

/// The first tick after a communicator registers; later ones come when
/// the communicators ask (comm_core::health_interval).
constexpr auto first_tick = std::chrono::milliseconds(20);

struct watchdog_state {
  std::map<uint64_t, core_ref> watched;
  bool ticking = false;
  static inline const char* name = "mccl.watchdog";
};

using watchdog_self = watchdog_handle::stateful_pointer<watchdog_state>;

void schedule(watchdog_self self, std::chrono::milliseconds interval) {
  self->state.ticking = true;
  self->delayed_send(self, interval, tick_atom::value);
}

void tick(watchdog_self self) {
  self->state.ticking = false;
  auto interval = std::chrono::milliseconds::max();
  auto& watched = self->state.watched;
  for (auto i = watched.begin(); i != watched.end();) {
    auto core = i->second.lock();
    if (!core) {
      i = watched.erase(i);
      continue;
    }
    core->check();
    interval = std::min(interval, core->health_interval());
    ++i;
  }
  if (!watched.empty())
    schedule(self, interval);
}

watchdog_handle::behavior_type watchdog_actor(watchdog_self self) {
  return {
    [self](watch_atom, uint64_t key, core_ref& core) {
      self->state.watched[key] = std::move(core);
      if (!self->state.ticking)
        schedule(self, first_tick);
    },
    [self](unwatch_atom, uint64_t key) { self->state.watched.erase(key); },
    [self](tick_atom) { tick(self); },
    [self](shutdown_atom) {
      self->state.watched.clear();
      self->quit();
    },
  };
}

} // namespace

watchdog_handle spawn_watchdog_actor(caf::actor_system& sys) {
  return sys.spawn(watchdog_actor);
}

} // namespace mccl::actors
