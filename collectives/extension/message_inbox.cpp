#include "collectives/extension/message_inbox.hpp"

#include "collectives/extension/message_outbox.hpp"

#include <algorithm>
#include <cstring>

namespace mccl {

namespace {

std::string name_of(uint32_t step, int peer) {
  return "the message of step " + std::to_string(step) + " from rank " + std::to_string(peer);
}

} // namespace

message_inbox::message& message_inbox::find(int peer, uint32_t step) {
  for (auto i = messages_.size(); i-- > 0;)
    if (messages_[i].peer == peer && messages_[i].step == step)
      return messages_[i];
  auto& m = messages_.emplace_back();
  m.peer = peer;
  m.step = step;
  return m;
}

std::size_t message_inbox::frame_len(const message& m, std::size_t index) const {
  auto offset = index * frame_bytes_;
  return std::min(frame_bytes_, m.bytes - std::min(offset, m.bytes));
}

void message_inbox::ask(int peer, uint32_t step, std::size_t bytes, uint8_t* dst, bool parts,
                        landing_spots* landing) {
  auto& m = find(peer, step);
  if (m.asked)
    throw error(errc::invalid_argument, "asks twice for " + name_of(step, peer));
  m.asked = true;
  m.parts = parts;
  m.bytes = bytes;
  m.frames = frames_of(bytes, frame_bytes_);
  m.got.assign(m.frames, false);
  // Parts without a destination, and a one-frame message without one, are
  // handed over where the link put them: no allocation, no copy.
  if (!dst && !parts && m.frames > 1) {
    m.own.reset(new uint8_t[bytes]); // uninitialised: every byte is written
    dst = m.own.get();
  }
  m.dst = dst;
  if (landing && dst)
    for (std::size_t i = 0; i < m.frames; ++i)
      landing->add(peer, step, static_cast<uint32_t>(i), dst + i * frame_bytes_, frame_len(m, i));
  auto early = std::move(m.frames_held);
  m.frames_held.clear();
  for (const auto& c : early)
    place(m, c);
}

void message_inbox::add(const incoming_chunk& c) {
  auto& m = find(c.peer, c.step);
  if (m.delivered)
    throw error(errc::protocol_error, "frame " + std::to_string(c.chunk) + " of "
                                        + name_of(c.step, c.peer) + " came after the whole message");
  if (m.asked)
    return place(m, c);
  for (const auto& h : m.frames_held)
    if (h.chunk == c.chunk)
      throw error(errc::protocol_error, "frame " + std::to_string(c.chunk) + " of "
                                          + name_of(c.step, c.peer) + " came twice");
  m.frames_held.push_back(c); // keeps the frame's memory until asked for
}

void message_inbox::place(message& m, const incoming_chunk& c) {
  auto what = [&] { return "frame " + std::to_string(c.chunk) + " of " + name_of(m.step, m.peer); };
  if (c.chunk >= m.frames)
    throw error(errc::protocol_error, what() + ": the message has " + std::to_string(m.frames)
                                        + " frames of " + std::to_string(m.bytes)
                                        + " bytes (same count and MCCL_CHUNK_BYTES on every rank?)");
  if (m.got[c.chunk])
    throw error(errc::protocol_error, what() + " came twice");
  auto want = frame_len(m, c.chunk);
  if (c.len != want)
    throw error(errc::protocol_error, what() + " has " + std::to_string(c.len) + " bytes, expected "
                                        + std::to_string(want) + " (same count and MCCL_CHUNK_BYTES on every rank?)");
  m.got[c.chunk] = true;
  ++m.frames_in;
  if (!m.dst)
    return m.frames_held.push_back(c); // handed out as it is
  auto* at = m.dst + c.chunk * frame_bytes_;
  if (c.data != at && c.len > 0) // not read into place by the link
    std::memcpy(at, c.data, c.len);
  if (m.parts) {
    auto placed = c;
    placed.data = at;
    placed.keep = nullptr;
    m.frames_held.push_back(placed);
  }
}

bool message_inbox::earliest_step(uint32_t& step) const {
  bool found = false;
  for (const auto& m : messages_)
    if (m.asked && !m.delivered && (!found || m.step < step)) {
      step = m.step;
      found = true;
    }
  return found;
}

bool message_inbox::next(step_message& out) {
  uint32_t step = 0;
  if (!earliest_step(step))
    return false;
  for (auto& m : messages_) {
    if (!m.asked || m.delivered || m.step != step)
      continue;
    out.peer = m.peer;
    out.step = m.step;
    if (m.parts && m.handed < m.frames_held.size()) {
      const auto& c = m.frames_held[m.handed++];
      out.data = c.data;
      out.bytes = c.len;
      out.offset = c.chunk * frame_bytes_;
      out.last = m.handed == m.frames;
      m.delivered = out.last;
      return true;
    }
    if (!m.parts && m.in()) {
      out.data = m.dst ? m.dst : m.frames_held.front().data;
      out.bytes = m.bytes;
      out.offset = 0;
      out.last = true;
      m.delivered = true;
      return true;
    }
  }
  return false; // the earliest step is still missing frames
}

void message_inbox::release(const step_message& done) {
  auto& m = find(done.peer, done.step);
  if (m.parts) {
    // The part just handed out: its staging memory goes back to the link.
    if (m.handed > 0)
      m.frames_held[m.handed - 1] = incoming_chunk{};
    if (!done.last)
      return;
  }
  m.own.reset();
  m.frames_held = {};
  m.got = {};
}

bool message_inbox::waiting_on(std::vector<int>& peers) const {
  bool found = false;
  uint32_t step = 0;
  for (const auto& m : messages_)
    if (m.asked && m.frames_in < m.frames && (!found || m.step < step)) {
      step = m.step;
      found = true;
    }
  if (found)
    for (const auto& m : messages_)
      if (m.asked && m.frames_in < m.frames && m.step == step)
        peers.push_back(m.peer);
  return found;
}

std::string message_inbox::waiting_for() const {
  const message* first = nullptr;
  for (const auto& m : messages_)
    if (m.asked && m.frames_in < m.frames && (!first || m.step < first->step))
      first = &m;
  if (!first)
    return {};
  return name_of(first->step, first->peer) + " (" + std::to_string(first->frames_in) + " of "
         + std::to_string(first->frames) + " frames in)";
}

} // namespace mccl
