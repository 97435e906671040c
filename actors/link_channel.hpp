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
///   itself, so what it still has to say (an ABORT) goes out.

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

private:
  struct peer_entry {
    std::shared_ptr<peer_link> link; ///< until its link actor takes it
    link_actor_ref actor;
    bool moved = false; ///< the last turn's answer (link_turn::moved)
  };
  driving_unit& unit_;
  engine* engine_ = nullptr;
  std::vector<peer_entry> by_peer_;
};

} // namespace mccl::actors
