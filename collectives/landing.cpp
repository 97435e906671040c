#include "collectives/landing.hpp"

namespace mccl {

void landing_map::add(int peer, uint32_t step, uint32_t chunk, void* dst, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!adding_)
    return;
  key k{peer, step, chunk};
  // A chunk that already went by in staging memory is the algorithm's to
  // copy; a second copy of it must not land over the caller's data later.
  spots_[k] = spot{static_cast<uint8_t*>(dst), bytes, passed_.count(k) > 0};
}

void landing_map::close_additions() {
  std::lock_guard<std::mutex> lock(mutex_);
  adding_ = false;
  passed_.clear();
}

uint8_t* landing_map::claim(int peer, const wire::frame_header& h) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (spots_.empty() && !adding_)
    return nullptr;
  if (frame_signature(h, expected_) != expected_)
    return nullptr; // another op's frame: the session reports the desync
  key k{peer, h.step, h.chunk};
  auto i = spots_.find(k);
  if (i == spots_.end()) {
    if (adding_)
      passed_.insert(k);
    return nullptr;
  }
  auto& s = i->second;
  bool fits = !s.taken && s.bytes == h.payload_len;
  s.taken = true; // whatever came, later frames for this spot are not ours to land
  return fits ? s.dst : nullptr;
}

void landing_map::passed_on(int peer, const wire::frame_header& h) {
  std::lock_guard<std::mutex> lock(mutex_);
  key k{peer, h.step, h.chunk};
  auto i = spots_.find(k);
  if (i != spots_.end())
    i->second.taken = true;
  else if (adding_)
    passed_.insert(k);
}

} // namespace mccl
