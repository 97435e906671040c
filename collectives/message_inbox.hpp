#pragma once
/// The receiving half of a step collective's host (step_host.cpp): frames
/// of one (peer, step) are joined into a whole message, and held until the
/// collective asks for it. Messages are handed out in step order: one of
/// step s once it was asked for, all its frames are in, and every message
/// asked for of an earlier step was handed out. A collective may so ask
/// for all its messages at the start (and have them read in place)
/// without seeing a later step's before an earlier one's.

#include <mccl/step_collective.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace mccl {

class message_inbox {
public:
  explicit message_inbox(std::size_t frame_bytes) : frame_bytes_(frame_bytes) {}

  /// The collective asks for (peer, step), `bytes` long, assembled at `dst`
  /// (null: in memory of the inbox's). With `landing`, the link may read
  /// its frames straight into place. Frames held for it are placed now.
  /// Throws mccl::error(protocol_error) when one of them does not fit.
  void ask(int peer, uint32_t step, std::size_t bytes, uint8_t* dst, landing_spots* landing);

  /// A frame from a peer. Throws mccl::error(protocol_error) for a frame
  /// that does not fit the message asked for, or came twice.
  void add(const incoming_chunk& c);

  /// The next message in step order, if it is complete; its memory stays
  /// valid until release(m).
  bool next(step_message& m);
  void release(const step_message& m);

  /// Appends the peers of the earliest step with a message asked for and
  /// not yet complete; false when no such message exists.
  bool waiting_on(std::vector<int>& peers) const;

  /// "the message of step 2 from rank 1 (3 of 4 frames in)", or "".
  std::string waiting_for() const;

private:
  using key = std::pair<uint32_t, int>; ///< (step, peer): step order first
  struct message {
    bool asked = false;
    bool delivered = false;
    std::size_t bytes = 0;
    std::size_t frames = 0;
    std::size_t frames_in = 0;
    uint8_t* dst = nullptr;            ///< where it is assembled
    std::unique_ptr<uint8_t[]> own;    ///< dst when the collective named none
    incoming_chunk whole;              ///< a one-frame message, as it came
    std::vector<bool> got;             ///< by frame index
    std::vector<incoming_chunk> held;  ///< frames that came before ask()
  };

  void place(const key& k, message& m, const incoming_chunk& c);
  std::size_t frame_len(const message& m, std::size_t index) const;

  std::size_t frame_bytes_;
  std::map<key, message> messages_;
  std::set<key> pending_; ///< asked for, not handed out yet
};

} // namespace mccl
