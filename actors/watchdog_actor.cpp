#include "actors/watchdog_actor.hpp"

#include <caf/all.hpp>

namespace mccl::actors {

namespace {
/// Deadlines are checked this often; an op fails at most this late.
constexpr auto tick_interval = std::chrono::milliseconds(20);
} // namespace

watchdog_actor::watchdog_actor(caf::actor_config& cfg) : caf::event_based_actor(cfg) {
}

caf::behavior watchdog_actor::make_behavior() {
  set_default_handler(caf::drop);
  return {
    [this](watch_atom, int64_t deadline_ticks, caf::actor& who) {
      using tp = std::chrono::steady_clock::time_point;
      watched_[who.id()] = entry{who, tp(tp::duration(deadline_ticks))};
      if (!ticking_) {
        ticking_ = true;
        delayed_send(this, tick_interval, tick_atom::value);
      }
    },
    [this](unwatch_atom, caf::actor& who) { watched_.erase(who.id()); },
    [this](tick_atom) { tick(); },
    [this](shutdown_atom) { quit(); },
  };
}

void watchdog_actor::tick() {
  auto now = std::chrono::steady_clock::now();
  for (auto i = watched_.begin(); i != watched_.end();) {
    if (i->second.deadline <= now) {
      send(i->second.who, timeout_atom::value);
      i = watched_.erase(i);
    } else {
      ++i;
    }
  }
  ticking_ = !watched_.empty();
  if (ticking_)
    delayed_send(this, tick_interval, tick_atom::value);
}

} // namespace mccl::actors
