#pragma once
/// Point-to-point matching for the messages of one peer (MPI's rules).
///
/// A peer numbers its messages to us densely, in the order its sends were
/// issued, and tags each. A receive posted for a tag matches the
/// lowest-numbered unmatched message with that tag, once every
/// lower-numbered message has been seen (so a later message never
/// overtakes an earlier one with the same tag, whatever order frames
/// arrive in). Receives match in the order they were posted. Messages
/// nobody received yet wait as unexpected, with their frames.
///
/// No I/O and no threads: the engine's leader feeds it frames and asks it
/// where they go.

#include "transport/received_frame.hpp"

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

namespace mccl {

class p2p_matcher {
public:
  /// A receive that just matched a message: its id and the frames of that
  /// message that arrived before (oldest first).
  struct match {
    uint64_t receiver = 0;
    std::vector<transport::received_frame> frames;
  };

  /// Op `receiver` posts a receive for `tag`. Returns what matched now
  /// (this receive or, in order, earlier ones), possibly nothing.
  std::vector<match> post(uint32_t tag, uint64_t receiver);
  /// Op `receiver` ended: forget its receive and its message's route.
  void forget(uint64_t receiver);

  /// A frame of message `f.header.seq` arrived. When the message belongs to
  /// a receive already, returns its id (deliver the frame there) and
  /// *matched is empty; else the frame is kept and *matched lists the
  /// receives that matched because of it (with their frames).
  /// Returns 0 when nobody takes the frame yet.
  uint64_t on_frame(transport::received_frame& f, std::vector<match>* matched);

  /// A message with `tag` arrived that no receive has claimed (probe).
  bool has_unclaimed(uint32_t tag) const;
  /// Bytes of unexpected messages kept.
  std::size_t kept_bytes() const noexcept { return kept_bytes_; }
  /// Receives posted and not matched yet, oldest first.
  std::vector<uint64_t> waiting_receivers() const;

private:
  struct posted_recv {
    uint32_t tag;
    uint64_t receiver;
  };
  struct unexpected_message {
    uint32_t tag = 0;
    std::vector<transport::received_frame> frames;
  };
  std::vector<match> match_posted();

  std::deque<posted_recv> posted_;                    ///< oldest first
  std::map<uint64_t, unexpected_message> unexpected_; ///< by message number
  std::unordered_map<uint64_t, uint64_t> routes_;     ///< message number -> receiver
  uint64_t seen_prefix_ = 0;      ///< every message below this has been seen
  std::set<uint64_t> seen_ahead_; ///< seen messages at or above seen_prefix_
  std::size_t kept_bytes_ = 0;
};

} // namespace mccl
