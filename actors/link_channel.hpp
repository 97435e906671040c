#pragma once
/// The links of one communicator (collectives/engine/peer_link.hpp: each
/// peer's channel, the chunks held for ops not started yet and the
/// point-to-point matching) between the engine and the link actors
/// (link_actor.hpp):
///
/// - on their way from the engine, which builds them over the connections
///   it is given, to the link actors, whose state keeps them (adopt(),
///   take()); the engine keeps references, and reaches a peer only through
///   its link;
/// - each pass's turns (move()): the engine's leader asks here for a
///   peer's link to be moved, and the peer's link actor does it in its
///   handler, the turn dispatched to it in place (driving_unit::dispatch:
///   about 250 instructions around the handler), or through its mailbox
///   when messages of its own wait there. A link whose actor ended (its
///   peer lost, or the communicator finalized) is moved by the leader
///   itself, so what it still has to say (an ABORT) goes out;
/// - the frames ops hand their links (hand()): a chunk message to the
///   peer's link actor, sent from the op's handler and dispatched in place
///   inside it (driving_unit.hpp, nesting). While the link's own turn runs
///   (the op's handler runs nested in it: a 2-rank ring answers on the
///   link it read from), the chunk waits here, in order, and is handled in
///   place right after the turn: where CAF's mailbox would run it, for
///   some 400 instructions instead of 2,100. Behind mail of its own it
///   goes through the mailbox; to a link whose actor ended, the leader
///   queues it itself (the closed channel refuses it).

#include "actors/driving_unit.hpp"
#include "actors/link_actor.hpp"
#include "collectives/engine/peer_link.hpp"

#include <memory>
#include <vector>

namespace mccl::actors {

class link_channels final : public link_hosts {
public:
  link_channels(int world, driving_unit& unit);

  void adopt(int peer, std::shared_ptr<peer_link> link) override;
  /// The link to `peer`, for its link actor; null when there is none (this
  /// rank) or it was taken already.
  std::shared_ptr<peer_link> take(int peer);

  /// The engine whose passes give the turns, and `peer`'s link actor that
  /// takes them. Before the first pass.
  void serve(engine& e) { engine_ = &e; }
  void attach(int peer, const link_actor_ref& actor);

  bool move(int peer) override;
  void hand(int peer, const outgoing_chunk& chunk) override;

private:
  struct peer_entry {
    std::shared_ptr<peer_link> link; ///< until its link actor takes it
    link_actor_ref actor;
    bool moved = false; ///< the last turn's answer (link_turn::moved)
    /// Chunks handed while the actor's handler ran in place, in order.
    std::vector<outgoing_chunk> waiting;
    bool flushing = false; ///< run_in_place() sends those waiting now
  };
  /// Dispatches `xs...` to `entry`'s actor in place, then the chunks
  /// handed to it meanwhile.
  template <class... Ts>
  void run_in_place(int peer, peer_entry& entry, Ts&&... xs);
  /// A chunk message to `entry`'s actor, which no handler of its runs now.
  void send_chunk(int peer, peer_entry& entry, const outgoing_chunk& chunk);
  driving_unit& unit_;
  engine* engine_ = nullptr;
  std::vector<peer_entry> by_peer_;
};

} // namespace mccl::actors
