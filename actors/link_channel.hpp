#pragma once
/// The links of one communicator (collectives/engine/peer_link.hpp: each
/// peer's channel, the chunks held for ops not started yet and the
/// point-to-point matching) on their way
/// from the engine, which builds them over the connections it is given, to
/// the link actors (link_actor.hpp), whose state keeps them. The engine
/// keeps references, and reaches a peer only through its link.

#include "collectives/engine/peer_link.hpp"

#include <memory>
#include <vector>

namespace mccl::actors {

class link_channels final : public link_hosts {
public:
  explicit link_channels(int world) : by_peer_(static_cast<std::size_t>(world)) {}

  void adopt(int peer, std::shared_ptr<peer_link> link) override;
  /// The link to `peer`, for its link actor; null when there is none (this
  /// rank) or it was taken already.
  std::shared_ptr<peer_link> take(int peer);

private:
  std::vector<std::shared_ptr<peer_link>> by_peer_;
};

} // namespace mccl::actors
