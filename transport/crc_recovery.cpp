#include "transport/crc_recovery.hpp"

namespace mccl::transport {

// ---- sender ---------------------------------------------------------------------

const crc_sender::kept_frame& crc_sender::keep(const wire::frame_header& h, const uint8_t* data,
                                               std::size_t len) {
  kept_frame f;
  f.index = next_index_++;
  f.header = h;
  f.header.flags |= wire::flag_crc;
  f.header.payload_len = static_cast<uint32_t>(len);
  if (len > 0)
    f.payload.assign(data, data + len);
  // Over the copy: what is retransmitted later is exactly what was checked.
  f.header.crc = wire::frame_crc(f.header, f.payload.data(), len);
  kept_bytes_ += len;
  kept_.push_back(std::move(f));
  return kept_.back();
}

void crc_sender::on_ack(uint64_t count) {
  while (!kept_.empty() && kept_.front().index < count) {
    kept_bytes_ -= kept_.front().payload.size();
    kept_.pop_front();
  }
}

const crc_sender::kept_frame* crc_sender::on_nack(uint64_t index, std::string* why) {
  if (kept_.empty() || index < kept_.front().index || index > kept_.back().index) {
    *why = "asked to resend frame " + std::to_string(index) + ", which "
           + (index >= next_index_ ? "was never sent" : "was already acknowledged");
    return nullptr;
  }
  auto& f = kept_[static_cast<std::size_t>(index - kept_.front().index)];
  f.header.flags |= wire::flag_retransmit;
  f.header.crc = wire::frame_crc(f.header, f.payload.data(), f.payload.size());
  return &f;
}

const std::deque<crc_sender::kept_frame>* crc_sender::resume_from(uint64_t count,
                                                                   std::string* why) {
  uint64_t acked = kept_.empty() ? next_index_ : kept_.front().index;
  if (count < acked || count > next_index_) {
    *why = "the peer claims to have received " + std::to_string(count)
           + " frame(s) in order, but " + std::to_string(next_index_) + " were sent and "
           + std::to_string(acked) + " already acknowledged";
    return nullptr;
  }
  on_ack(count);
  for (auto& f : kept_) {
    f.header.flags &= static_cast<uint16_t>(~wire::flag_retransmit);
    f.header.crc = wire::frame_crc(f.header, f.payload.data(), f.payload.size());
  }
  return &kept_;
}

void crc_sender::clear() {
  kept_.clear();
  kept_bytes_ = 0;
}

// ---- receiver -------------------------------------------------------------------

crc_receiver::outcome crc_receiver::on_frame(received_frame chunk, bool crc_ok) {
  outcome out;
  bool retransmit = chunk.header.flags & wire::flag_retransmit;
  if (!retransmit) {
    out.index = next_index_++;
    if (crc_ok && held_.empty()) {
      ++delivered_;
      out.deliver.push_back(std::move(chunk));
      return out;
    }
    if (!crc_ok && retries_ == 0) {
      out.fatal = "CRC32C did not match (MCCL_CRC_RETRIES=0: no retransmission)";
      return out;
    }
    slot s;
    s.index = out.index;
    s.have = crc_ok;
    if (crc_ok) {
      s.chunk = std::move(chunk);
    } else {
      awaited_.push_back(out.index);
      out.nacks.push_back(out.index);
    }
    held_.push_back(std::move(s));
    return out;
  }
  // A retransmission answers the oldest nack still open.
  if (awaited_.empty()) {
    out.fatal = "a retransmitted frame arrived that was not asked for (the stream is out of step)";
    return out;
  }
  out.index = awaited_.front();
  awaited_.pop_front();
  auto& s = held_[static_cast<std::size_t>(out.index - held_.front().index)];
  out.attempts = ++s.attempts;
  if (!crc_ok) {
    if (s.attempts >= retries_) {
      out.fatal = "CRC32C still did not match after " + std::to_string(s.attempts)
                  + " retransmission(s) (MCCL_CRC_RETRIES=" + std::to_string(retries_) + ")";
      return out;
    }
    awaited_.push_back(out.index);
    out.nacks.push_back(out.index);
    return out;
  }
  s.have = true;
  s.chunk = std::move(chunk);
  out.recovered = true;
  release(out);
  return out;
}

void crc_receiver::skip() {
  auto index = next_index_++;
  if (held_.empty()) {
    ++delivered_;
    return;
  }
  slot s;
  s.index = index;
  s.have = true;
  s.drop = true;
  held_.push_back(std::move(s));
}

uint64_t crc_receiver::resume() {
  // held_ starts at the first missing frame: everything in it is sent again.
  held_.clear();
  awaited_.clear();
  next_index_ = delivered_;
  return delivered_;
}

void crc_receiver::release(outcome& out) {
  while (!held_.empty() && held_.front().have) {
    ++delivered_;
    if (!held_.front().drop)
      out.deliver.push_back(std::move(held_.front().chunk));
    held_.pop_front();
  }
}

} // namespace mccl::transport
