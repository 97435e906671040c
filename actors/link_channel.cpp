#include "actors/link_channel.hpp"

namespace mccl::actors {

void link_channels::adopt(int peer, std::shared_ptr<peer_link> link) {
  if (peer >= 0 && static_cast<std::size_t>(peer) < by_peer_.size())
    by_peer_[static_cast<std::size_t>(peer)] = std::move(link);
}

std::shared_ptr<peer_link> link_channels::take(int peer) {
  if (peer < 0 || static_cast<std::size_t>(peer) >= by_peer_.size())
    return nullptr;
  return std::move(by_peer_[static_cast<std::size_t>(peer)]);
}

} // namespace mccl::actors
