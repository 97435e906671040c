#pragma once
/// CRC32C with recovery (MCCL_TRANSPORT_CRC=1): the bookkeeping of one link,
/// both directions, with no I/O, so it is tested on its own
/// (tests/unit/crc_recovery_test.cpp) and the channel (channel.hpp) only carries out
/// what it decides.
///
/// Numbering: on a link, the CRC-checked data frames of each direction are
/// numbered 0, 1, 2, ... in the order they are first sent. The byte stream
/// keeps that order, so the number is implicit: the receiver counts. A
/// retransmission (flag_retransmit) does not take a new number.
///
/// Receiver: a frame whose CRC matches is delivered at once while nothing is
/// missing. A mismatch sends a crc_nack naming the frame's number; frames
/// after it are held back (checked, not delivered) until the retransmission
/// arrives, so chunks still reach the collectives in stream order.
/// Retransmissions come back in the order the nacks went out. A frame that
/// fails more than `retries` times ends recovery: the caller fails the op.
/// Every delivery advances the cumulative count acked back with crc_ack.
///
/// Sender: keeps its own copy of every CRC-checked frame until the peer acks
/// it, so a frame can be sent again after the op that sent it has finished
/// and the caller reused its buffer. The path without CRC never gets here.

#include "transport/received_frame.hpp"

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace mccl::transport {

class crc_sender {
public:
  /// A frame kept for retransmission; `header` has flag_crc and its CRC.
  struct kept_frame {
    uint64_t index = 0;
    wire::frame_header header;
    std::vector<uint8_t> payload;
  };

  /// Copies the payload, numbers the frame, sets flag_crc and the CRC in
  /// `h`. The returned frame stays valid (and its payload at the same
  /// address) until acked.
  const kept_frame& keep(const wire::frame_header& h, const uint8_t* data, std::size_t len);

  /// The peer has every frame below `count`.
  void on_ack(uint64_t count);

  /// The frame to send again, with flag_retransmit set and the CRC redone;
  /// null, with *why set, when `index` was never sent or was already acked.
  const kept_frame* on_nack(uint64_t index, std::string* why);

  /// Resuming a lost link (MCCL_RECONNECT_MS): the peer says it received
  /// our frames below `count` in order. Forgets those (as an ack) and
  /// returns every frame still kept, in order, to be sent again on the new
  /// connection as ordinary frames (flag_retransmit cleared, CRC redone):
  /// the peer counts them as new from `count` on. A claim below what the
  /// peer already acked or beyond what was ever sent is refused: null,
  /// with *why naming both numbers.
  const std::deque<kept_frame>* resume_from(uint64_t count, std::string* why);

  /// Frames numbered so far (the next frame's number).
  uint64_t sent() const noexcept { return next_index_; }

  std::size_t kept_bytes() const noexcept { return kept_bytes_; }
  std::size_t kept_frames() const noexcept { return kept_.size(); }
  void clear();

private:
  std::deque<kept_frame> kept_; ///< ascending index
  uint64_t next_index_ = 0;
  std::size_t kept_bytes_ = 0;
};

class crc_receiver {
public:
  explicit crc_receiver(int retries) : retries_(retries) {}

  /// What one arriving frame leads to.
  struct outcome {
    std::vector<received_frame> deliver; ///< in stream order
    std::vector<uint64_t> nacks;   ///< frame numbers to ask for again
    bool recovered = false;        ///< a retransmission filled a gap
    /// Non-empty: recovery gave up (retry budget spent, or the stream no
    /// longer matches: a retransmission nobody asked for). The link fails.
    std::string fatal;
    uint64_t index = 0;  ///< the number of the frame just handled
    int attempts = 0;    ///< retransmissions of that frame so far
  };

  /// `crc_ok`: whether the frame's CRC matched. `chunk.header` has the flags.
  outcome on_frame(received_frame chunk, bool crc_ok);

  /// A frame that arrived but is not wanted any more (its op ended while it
  /// was read, see channel::stop_landing): it keeps its number and is
  /// acked, never delivered.
  void skip();

  /// Resuming a lost link: frames after the first missing one are dropped
  /// (the peer sends them again), open nacks are forgotten, and the next
  /// frame is counted as number delivered(). Returns that count, which the
  /// resume tells the peer.
  uint64_t resume();

  /// Frames delivered so far: what to ack.
  uint64_t delivered() const noexcept { return delivered_; }
  /// Frames waiting behind a missing one.
  std::size_t held() const noexcept { return held_.size(); }

private:
  struct slot {
    uint64_t index = 0;
    bool have = false;
    bool drop = false; ///< skip(): counted, not delivered
    int attempts = 0;
    received_frame chunk;
  };
  void release(outcome& out);

  int retries_;
  uint64_t next_index_ = 0; ///< number of the next new frame
  uint64_t delivered_ = 0;
  std::deque<slot> held_;         ///< from the first missing frame on
  std::deque<uint64_t> awaited_;  ///< nacked frame numbers, in nack order
};

} // namespace mccl::transport
