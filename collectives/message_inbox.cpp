#include "collectives/message_inbox.hpp"

#include "collectives/message_outbox.hpp"

#include <algorithm>
#include <cstring>

namespace mccl {

namespace {

std::string name_of(uint32_t step, int peer) {
  return "the message of step " + std::to_string(step) + " from rank " + std::to_string(peer);
}

} // namespace

std::size_t message_inbox::frame_len(const message& m, std::size_t index) const {
  auto offset = index * frame_bytes_;
  return std::min(frame_bytes_, m.bytes - std::min(offset, m.bytes));
}

void message_inbox::ask(int peer, uint32_t step, std::size_t bytes, uint8_t* dst,
                        landing_spots* landing) {
  key k{step, peer};
  auto& m = messages_[k];
  if (m.asked)
    throw error(errc::invalid_argument, "asks twice for " + name_of(step, peer));
  m.asked = true;
  pending_.insert(k);
  m.bytes = bytes;
  m.frames = frames_of(bytes, frame_bytes_);
  m.got.assign(m.frames, false);
  // A one-frame message without a destination is handed over where the
  // link put it: no allocation, no copy.
  if (!dst && m.frames > 1) {
    m.own.reset(new uint8_t[bytes]); // uninitialised: every byte is written
    dst = m.own.get();
  }
  m.dst = dst;
  if (landing && dst)
    for (std::size_t i = 0; i < m.frames; ++i)
      landing->add(peer, step, static_cast<uint32_t>(i), dst + i * frame_bytes_, frame_len(m, i));
  auto held = std::move(m.held);
  m.held.clear();
  for (const auto& c : held)
    place(k, m, c);
}

void message_inbox::add(const incoming_chunk& c) {
  key k{c.step, c.peer};
  auto& m = messages_[k];
  if (m.delivered)
    throw error(errc::protocol_error, "frame " + std::to_string(c.chunk) + " of "
                                        + name_of(c.step, c.peer) + " came after the whole message");
  if (m.asked)
    return place(k, m, c);
  for (const auto& h : m.held)
    if (h.chunk == c.chunk)
      throw error(errc::protocol_error, "frame " + std::to_string(c.chunk) + " of "
                                          + name_of(c.step, c.peer) + " came twice");
  m.held.push_back(c); // keeps the frame's memory until asked for
}

void message_inbox::place(const key& k, message& m, const incoming_chunk& c) {
  auto what = "frame " + std::to_string(c.chunk) + " of " + name_of(k.first, k.second);
  if (c.chunk >= m.frames)
    throw error(errc::protocol_error, what + ": the message has " + std::to_string(m.frames)
                                        + " frames of " + std::to_string(m.bytes)
                                        + " bytes (same count and MCCL_CHUNK_BYTES on every rank?)");
  if (m.got[c.chunk])
    throw error(errc::protocol_error, what + " came twice");
  auto want = frame_len(m, c.chunk);
  if (c.len != want)
    throw error(errc::protocol_error, what + " has " + std::to_string(c.len) + " bytes, expected "
                                        + std::to_string(want) + " (same count and MCCL_CHUNK_BYTES on every rank?)");
  m.got[c.chunk] = true;
  if (!m.dst) {
    m.whole = c;
  } else {
    auto* at = m.dst + c.chunk * frame_bytes_;
    if (c.data != at && c.len > 0) // not read into place by the link
      std::memcpy(at, c.data, c.len);
  }
  ++m.frames_in;
}

bool message_inbox::next(step_message& out) {
  if (pending_.empty())
    return false;
  auto step = pending_.begin()->first;
  auto it = pending_.begin();
  while (it != pending_.end() && it->first == step) {
    auto& m = messages_[*it];
    if (m.frames_in == m.frames)
      break;
    ++it;
  }
  if (it == pending_.end() || it->first != step)
    return false; // the earliest step is still missing frames
  auto k = *it;
  pending_.erase(it);
  auto& m = messages_[k];
  m.delivered = true;
  out.step = k.first;
  out.peer = k.second;
  out.bytes = m.bytes;
  out.data = m.dst ? m.dst : m.whole.data;
  return true;
}

void message_inbox::release(const step_message& done) {
  auto it = messages_.find({done.step, done.peer});
  if (it == messages_.end())
    return;
  it->second.own.reset();
  it->second.whole = incoming_chunk{}; // the link's staging memory goes back to its pool
  it->second.got = {};
}

bool message_inbox::waiting_on(std::vector<int>& peers) const {
  bool found = false;
  uint32_t step = 0;
  for (const auto& k : pending_) {
    const auto& m = messages_.at(k);
    if (m.frames_in == m.frames)
      continue;
    if (found && k.first != step)
      break;
    found = true;
    step = k.first;
    peers.push_back(k.second);
  }
  return found;
}

std::string message_inbox::waiting_for() const {
  for (const auto& k : pending_) {
    const auto& m = messages_.at(k);
    if (m.frames_in < m.frames)
      return name_of(k.first, k.second) + " (" + std::to_string(m.frames_in) + " of "
             + std::to_string(m.frames) + " frames in)";
  }
  return {};
}

} // namespace mccl
