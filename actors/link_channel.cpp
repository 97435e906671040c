#include "actors/link_channel.hpp"

#include "collectives/engine/engine.hpp"
#include "collectives/observability/metrics_registry.hpp"

namespace mccl::actors {

link_channels::link_channels(int world, driving_unit& unit) : unit_(unit), by_peer_(static_cast<std::size_t>(world)) {
}

void link_channels::adopt(int peer, std::shared_ptr<peer_link> link) {
  if (peer >= 0 && static_cast<std::size_t>(peer) < by_peer_.size())
    by_peer_[static_cast<std::size_t>(peer)].link = std::move(link);
}

std::shared_ptr<peer_link> link_channels::take(int peer) {
  if (peer < 0 || static_cast<std::size_t>(peer) >= by_peer_.size())
    return nullptr;
  return std::move(by_peer_[static_cast<std::size_t>(peer)].link);
}

void link_channels::attach(int peer, const link_actor_ref& actor) {
  if (peer >= 0 && static_cast<std::size_t>(peer) < by_peer_.size())
    by_peer_[static_cast<std::size_t>(peer)].actor = actor;
}

bool link_channels::move(int peer) {
  auto& entry = by_peer_[static_cast<std::size_t>(peer)];
  auto* self = entry.actor.self;
  bool idle = unit_.can_dispatch(self); // the usual case; an idle actor is alive
  if (!idle && (self == nullptr || self->mailbox().closed()))
    return engine_->move_link(peer); // no link actor (any more): no message
  metrics_registry::count_link_turn();
  entry.moved = false;
  if (idle) {
    unit_.dispatch(*entry.actor.in_place, link_turn{engine_, &entry.moved});
  } else {
    // Messages of its own wait (the supervisor's, say): the turn queues
    // behind them, and the drain below runs them all, in order.
    driving_unit::driver_scope driving{unit_};
    unit_.deliver(entry.actor.handle, link_turn{engine_, &entry.moved});
  }
  // What the turn's handlers queued (an op actor's message sent from an
  // op actor's handler waits in its mailbox until that handler returns).
  unit_.drain();
  return entry.moved;
}

} // namespace mccl::actors
