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

template <class... Ts>
void link_channels::run_in_place(int peer, peer_entry& entry, Ts&&... xs) {
  // Its handler hosts messages to op actors: a turn's reads hand frames to
  // their ops, and a chunk's op hears at once that a small payload left
  // its memory (nesting).
  unit_.dispatch(entry.actor.target, nesting::op_messages, std::forward<Ts>(xs)...);
  if (entry.flushing || entry.waiting.empty())
    return; // none waits, or the flush below runs already and takes them
  // The chunks handed to it while the handler ran, each now, in order.
  // Until all have gone, every chunk handed to it joins them (hand()), so
  // none overtakes another: a chunk's op may hand it the next one while
  // the chunk's handler runs. (The batch takes the vector's capacity and
  // gives it back: no allocation once it has grown.)
  struct flush_scope {
    bool& flag;
    explicit flush_scope(bool& f) : flag(f) { flag = true; }
    ~flush_scope() { flag = false; }
  } flushing{entry.flushing};
  while (!entry.waiting.empty()) {
    std::vector<outgoing_chunk> batch;
    batch.swap(entry.waiting);
    for (const auto& chunk : batch)
      send_chunk(peer, entry, chunk);
    batch.clear();
    if (entry.waiting.empty())
      entry.waiting.swap(batch);
  }
}

bool link_channels::move(int peer) {
  auto& entry = by_peer_[static_cast<std::size_t>(peer)];
  auto* self = entry.actor.target.self;
  bool idle = unit_.can_dispatch(entry.actor.target, nesting::none); // the usual case; an idle actor is alive
  if (!idle && (self == nullptr || self->mailbox().closed()))
    return engine_->move_link(peer); // no link actor (any more): no message
  metrics_registry::count_link_turn();
  entry.moved = false;
  if (idle) {
    run_in_place(peer, entry, link_turn{engine_, &entry.moved});
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

void link_channels::hand(int peer, const outgoing_chunk& chunk) {
  auto& entry = by_peer_[static_cast<std::size_t>(peer)];
  const auto& target = entry.actor.target;
  if ((target.handler != nullptr && target.handler->running_in_place()) || entry.flushing) {
    entry.waiting.push_back(chunk); // after its handler, behind those that wait already
    return;
  }
  send_chunk(peer, entry, chunk);
}

void link_channels::send_chunk(int peer, peer_entry& entry, const outgoing_chunk& chunk) {
  metrics_registry::count_link_chunk();
  const auto& target = entry.actor.target;
  if (unit_.can_dispatch(target, nesting::link_chunks)) {
    run_in_place(peer, entry, chunk_out{engine_, chunk});
    return;
  }
  if (target.self == nullptr || target.self->mailbox().closed()) {
    engine_->queue_chunk(peer, chunk); // no link actor (any more): no message
    return;
  }
  {
    // Behind mail of its own, or sent from a handler that hosts no chunk
    // message: the mailbox, in order.
    driving_unit::driver_scope driving{unit_};
    unit_.deliver(entry.actor.handle, chunk_out{engine_, chunk});
  }
  unit_.drain();
}

} // namespace mccl::actors
