#pragma once
/// A peer's link: the channel to that peer (transport/channel.hpp: frames
/// out and in, heartbeats, CRC NACK and retransmit, resume), the chunks
/// the peer sent for collectives this rank has not started yet, held until
/// the op starts, and the peer's point-to-point messages matched to this
/// rank's receives by tag (p2p_matcher.hpp), held until a receive is
/// posted; both bounded by the engine (engine::check_kept).
///
/// Who holds it: the peer's link actor (actors/link_actor.hpp), whose state
/// keeps it for the communicator's lifetime; the engine keeps a table of
/// references to the links (engine_options::links), never channels of its
/// own. Without actors (the simulator, the engine's unit tests) the
/// engine's references are the only ones.
///
/// Threading: as the channel's, the engine's leader only.

#include "collectives/engine/p2p_matcher.hpp"
#include "transport/channel.hpp"
#include "transport/received_frame.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace mccl {

class peer_link final : public transport::channel {
public:
  using transport::channel::channel;

  /// Keeps `f`, a chunk of collective `f.header.seq`, which has not started
  /// here yet.
  void hold_early(transport::received_frame f) {
    held_bytes_ += f.header.payload_len;
    ++held_frames_;
    early_[f.header.seq].push_back(std::move(f));
  }
  /// Moves the chunks held for collective `seq` to the end of `out`, in the
  /// order they came; returns their payload bytes.
  std::size_t take_early(uint64_t seq, std::vector<transport::received_frame>& out) {
    if (held_frames_ == 0)
      return 0;
    auto i = early_.find(seq);
    if (i == early_.end())
      return 0;
    std::size_t bytes = 0;
    for (const auto& f : i->second)
      bytes += f.header.payload_len;
    held_frames_ -= i->second.size();
    held_bytes_ -= bytes;
    if (out.empty()) {
      out = std::move(i->second); // the usual case: no copy, no allocation
    } else {
      for (auto& f : i->second)
        out.push_back(std::move(f));
    }
    early_.erase(i);
    return bytes;
  }
  /// Drops every chunk held (the communicator aborted).
  void drop_early() {
    early_.clear();
    held_bytes_ = 0;
    held_frames_ = 0;
  }
  std::size_t early_bytes() const noexcept { return held_bytes_; }

  /// The peer's point-to-point messages and this rank's receives from it.
  p2p_matcher& matcher() noexcept { return matcher_; }
  const p2p_matcher& matcher() const noexcept { return matcher_; }

private:
  p2p_matcher matcher_;
  std::map<uint64_t, std::vector<transport::received_frame>> early_; ///< by seq
  std::size_t held_bytes_ = 0;
  std::size_t held_frames_ = 0;
};

/// A data frame an op hands its peer's link (engine::send_frame): its
/// header and a view of its payload, which stays the op's until the link
/// reports it sent (channel::send says when).
struct outgoing_chunk {
  wire::frame_header header;
  const uint8_t* data = nullptr;
  std::size_t len = 0;
  transport::frame_ref ref;
};

/// Who keeps a communicator's links besides the engine, and moves them in
/// its passes: its link actors (actors/link_channel.hpp). Null in
/// engine_options: the engine alone.
class link_hosts {
public:
  virtual ~link_hosts() = default;
  /// `link`, this rank's link to `peer`, built over its connection: the
  /// host keeps it for the peer's link actor.
  virtual void adopt(int peer, std::shared_ptr<peer_link> link) = 0;
  /// The leader's pass gives `peer`'s link its turn: the host has the
  /// link's keeper run engine::move_link(peer) (the link actor, in its
  /// handler) and says whether bytes moved. On the leader's thread.
  virtual bool move(int peer) = 0;
  /// An op's handler hands `chunk` to `peer`'s link: the host has the
  /// link's keeper run engine::queue_chunk(peer, chunk) (the link actor,
  /// in its handler of a chunk message), now or, while the link's turn
  /// runs, right after it. On the leader's thread.
  virtual void hand(int peer, const outgoing_chunk& chunk) = 0;
};

} // namespace mccl
