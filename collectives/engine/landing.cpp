#include "collectives/engine/landing.hpp"

namespace mccl {

void landing_map::add(int peer, uint32_t step, uint32_t chunk, void* dst, std::size_t bytes) {
  if (adding_)
    spots_[key{peer, step, chunk}] = spot{static_cast<uint8_t*>(dst), bytes, false};
}

uint8_t* landing_map::claim(int peer, const wire::frame_header& h) {
  if (spots_.empty())
    return nullptr;
  if (frame_signature(h, expected_) != expected_)
    return nullptr; // another op's frame: the session reports the desync
  auto i = spots_.find(key{peer, h.step, h.chunk});
  if (i == spots_.end())
    return nullptr;
  auto& s = i->second;
  bool fits = !s.taken && s.bytes == h.payload_len;
  s.taken = true; // whatever came, later frames for this spot are not ours to land
  return fits ? s.dst : nullptr;
}

void landing_map::passed_on(int peer, const wire::frame_header& h) {
  auto i = spots_.find(key{peer, h.step, h.chunk});
  if (i != spots_.end())
    i->second.taken = true;
}

} // namespace mccl
