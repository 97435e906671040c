#pragma once
/// The receiving half of a step collective's host (step_host.cpp): frames
/// of one (peer, step) are joined into a whole message, or handed out part
/// by part, and held until the collective asks for the message. Messages
/// are handed out in step order: a message (or a part) of step s once it
/// was asked for, is in, and every message asked for of an earlier step was
/// fully handed out. A collective may so ask for all its messages at the
/// start (and have them read in place) without seeing a later step's
/// before an earlier one's.

#include <mccl/step_collective.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mccl {

class message_inbox {
public:
  explicit message_inbox(std::size_t frame_bytes) : frame_bytes_(frame_bytes) {}

  /// The collective asks for (peer, step), `bytes` long, assembled at `dst`
  /// (null: in memory of the inbox's) or handed out in `parts`. With
  /// `landing`, the link may read its frames straight into place. Frames
  /// held for it are placed now. Throws mccl::error(protocol_error) when
  /// one of them does not fit, invalid_argument when asked for twice.
  void ask(int peer, uint32_t step, std::size_t bytes, uint8_t* dst, bool parts,
           landing_spots* landing);

  /// A frame from a peer. Throws mccl::error(protocol_error) for a frame
  /// that does not fit the message asked for, or came twice.
  void add(const incoming_chunk& c);

  /// The next message or part in step order, if it is in; its memory stays
  /// valid until release(m).
  bool next(step_message& m);
  void release(const step_message& m);

  /// Appends the peers of the earliest step with a message asked for and
  /// not yet in; false when no such message exists.
  bool waiting_on(std::vector<int>& peers) const;

  /// "the message of step 2 from rank 1 (3 of 4 frames in)", or "".
  std::string waiting_for() const;

private:
  struct message {
    int peer = -1;
    uint32_t step = 0;
    bool asked = false;
    bool parts = false;
    bool delivered = false;            ///< fully handed out
    std::size_t bytes = 0;
    std::size_t frames = 0;
    std::size_t frames_in = 0;
    uint8_t* dst = nullptr;            ///< where it is assembled (null: parts or one frame)
    std::unique_ptr<uint8_t[]> own;    ///< dst when the collective named none
    std::vector<bool> got;             ///< by frame index
    /// Before ask(): frames as they came. Asked for: whole, the one frame
    /// of a one-frame message; in parts, the parts in arrival order, from
    /// `handed` on not yet handed out.
    std::vector<incoming_chunk> frames_held;
    std::size_t handed = 0;
    bool in() const noexcept { return asked && frames_in == frames; }
  };

  message& find(int peer, uint32_t step);
  void place(message& m, const incoming_chunk& c);
  std::size_t frame_len(const message& m, std::size_t index) const;
  /// The earliest step with a message asked for and not fully handed out.
  bool earliest_step(uint32_t& step) const;

  std::size_t frame_bytes_;
  /// Few per op (steps x peers): a vector searched from the back, where
  /// the current step's messages are, beats a map's allocations.
  std::vector<message> messages_;
};

} // namespace mccl
