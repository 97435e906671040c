#include "collectives/extension/message_outbox.hpp"

#include <algorithm>
#include <string>

namespace mccl {

std::size_t frames_of(std::size_t bytes, std::size_t frame_bytes) noexcept {
  return bytes == 0 ? 1 : (bytes + frame_bytes - 1) / frame_bytes;
}

message_outbox::outgoing* message_outbox::find(int peer, uint32_t step) {
  for (auto i = messages_.size(); i-- > 0;)
    if (messages_[i].peer == peer && messages_[i].step == step)
      return &messages_[i];
  return nullptr;
}

void message_outbox::send(collective_io& io, int peer, uint32_t step, const uint8_t* data,
                          std::size_t bytes, std::shared_ptr<const void> owner) {
  if (find(peer, step))
    throw error(errc::invalid_argument, "sends a second message to rank " + std::to_string(peer)
                                          + " in step " + std::to_string(step)
                                          + " (one message per peer and step)");
  auto frames = frames_of(bytes, frame_bytes_);
  // Counted before the first send: a frame may be reported sent at once.
  messages_.push_back(outgoing{peer, step, std::move(owner), frames});
  for (std::size_t k = 0; k < frames; ++k) {
    auto offset = k * frame_bytes_;
    io.send(peer, step, static_cast<uint32_t>(k), data + offset,
            std::min(frame_bytes_, bytes - std::min(offset, bytes)));
  }
}

void message_outbox::sent(int peer, uint32_t step) {
  auto* m = find(peer, step);
  if (!m || m->frames_left == 0)
    return;
  // The entry stays (a second send to the same key is still caught); only
  // the memory goes.
  if (--m->frames_left == 0)
    m->owner.reset();
}

} // namespace mccl
