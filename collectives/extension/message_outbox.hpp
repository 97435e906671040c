#pragma once
/// The sending half of a step collective's host (step_host.cpp): a whole
/// message goes out as frames of at most `frame_bytes`, and the memory it
/// came from is held until its last frame has left.

#include <mccl/collective.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace mccl {

/// How many frames a message of `bytes` travels in: at least one, so an
/// empty message still arrives. Sender and receiver derive it alike.
std::size_t frames_of(std::size_t bytes, std::size_t frame_bytes) noexcept;

class message_outbox {
public:
  explicit message_outbox(std::size_t frame_bytes) : frame_bytes_(frame_bytes) {}

  /// Sends (peer, step) through `io`, frame by frame; `owner` is released
  /// once every frame has left. Throws mccl::error(invalid_argument) when
  /// (peer, step) was sent before: the receiver could not tell them apart.
  void send(collective_io& io, int peer, uint32_t step, const uint8_t* data, std::size_t bytes,
            std::shared_ptr<const void> owner);

  /// One frame of (peer, step) has left.
  void sent(int peer, uint32_t step);

private:
  struct outgoing {
    int peer = -1;
    uint32_t step = 0;
    std::shared_ptr<const void> owner;
    std::size_t frames_left = 0;
  };
  outgoing* find(int peer, uint32_t step);

  std::size_t frame_bytes_;
  /// Few per op (steps x peers): a vector searched from the back, where
  /// the latest sends are, beats a map's allocations.
  std::vector<outgoing> messages_;
};

} // namespace mccl
