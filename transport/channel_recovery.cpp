// The channel's recovery from a damaged or lost stream: CRC32C checks,
// NACKs, retransmissions and acknowledgements (MCCL_TRANSPORT_CRC, whose
// bookkeeping is crc_recovery.hpp), and resuming a lost connection
// (MCCL_RECONNECT_MS). The rest of the channel is channel.cpp.

#include "transport/channel.hpp"

#include "config/log.hpp"

namespace mccl::transport {

namespace {
std::string chunk_text(const wire::frame_header& h) {
  return std::string(h.flags & wire::flag_p2p ? "message " : "seq ") + std::to_string(h.seq)
         + ", step " + std::to_string(h.step) + ", chunk " + std::to_string(h.chunk);
}
} // namespace

// ---- CRC recovery --------------------------------------------------------------------

void channel::on_crc_frame(received_frame f) {
  if (crc_failed_ || aborted_)
    return;
  // A corrupted payload may have landed in the op's memory already (receive
  // in place); its retransmission arrives in pooled memory (a spot is
  // claimed once) and the algorithm copies it over.
  const auto h = f.header;
  bool ok = wire::frame_crc(h, f.payload(), h.payload_len) == h.crc;
  auto out = crc_rx_.on_frame(std::move(f), ok);
  if (!out.fatal.empty()) {
    crc_failed_ = true;
    auto text = "CRC32C recovery failed on the link from rank " + std::to_string(opts_.peer)
                + " to rank " + std::to_string(opts_.rank) + " (" + chunk_text(h) + "): " + out.fatal;
    record("crc_budget_exhausted", &h, text);
    MCCL_LOG(error, text);
    // The communicator aborts: every rank, the sender included, learns why.
    listener_.on_fatal(opts_.peer, errc::protocol_error, text);
    return;
  }
  for (auto index : out.nacks) {
    MCCL_LOG(warn, "CRC32C mismatch on a chunk from " << name_ << " (" << chunk_text(h)
                   << ", link frame " << index << "): asking for it again");
    record("nack_sent", &h, "CRC32C mismatch; link frame " + std::to_string(index)
                              + " requested again (attempt " + std::to_string(out.attempts + 1) + ")");
    queue_control(wire::frame_kind::crc_nack, 0, {}, index);
  }
  if (out.recovered)
    record("crc_recovered", &h, "link frame " + std::to_string(out.index) + " arrived intact after "
                                  + std::to_string(out.attempts) + " retransmission(s)");
  for (auto& c : out.deliver) {
    if (state_ != state::open)
      return;
    accept_data(std::move(c));
  }
}

void channel::ack_delivered_frames() {
  if (aborted_ || crc_rx_.delivered() == crc_acked_)
    return;
  crc_acked_ = crc_rx_.delivered();
  queue_control(wire::frame_kind::crc_ack, 0, {}, crc_acked_);
}

void channel::on_crc_nack(uint64_t index) {
  if (aborted_)
    return;
  std::string why;
  auto* f = crc_tx_.on_nack(index, &why);
  if (!f) {
    fail(errc::protocol_error, name_ + " " + why + " (CRC recovery out of step)");
    return;
  }
  MCCL_LOG(warn, name_ << " found a CRC32C mismatch in " << chunk_text(f->header) << ": sending it again");
  record("retransmit", &f->header, "link frame " + std::to_string(index) + " sent again after a NACK");
  if (opts_.counters)
    opts_.counters->add(opts_.counters->retransmits, 1);
  queue_kept(*f, false, {});
}

// ---- losing and resuming the connection ----------------------------------------------

void channel::lost(const std::string& why) {
  if (state_ != state::open)
    return;
  if (said_bye_) {
    // Both ranks finalize: the peer closes as soon as it reads our BYE
    // (without answering it), which is how a finalize ends, not a loss.
    record("closed_after_bye", nullptr, why);
    close();
    return;
  }
  bool may_resume = opts_.resumable && opts_.crc && !aborted_ && !crc_failed_;
  if (!may_resume) {
    go_down(down_kind::lost, errc::peer_lost, why);
    return;
  }
  state_ = state::resuming;
  awaiting_resume_count_ = false;
  resume_cause_ = why;
  resume_started_ = clock::now();
  conn_->close();
  // Frames not (fully) written are dropped: each data frame has its copy in
  // crc_tx_, and on_resume_count sends every one the peer did not get.
  // Control frames (acks, heartbeats) are stale on a new connection.
  for (auto& item : txq_)
    if (item.data_frame)
      listener_.on_sent(opts_.peer, item.ref);
  txq_.clear();
  reset_rx(); // a half-read frame is read again from its start
  MCCL_LOG(warn, "link to " << name_ << " lost (" << why << "): re-establishing it within "
                              "MCCL_RECONNECT_MS=" << opts_.reconnect.count());
  record("reconnect", nullptr, "attempt: connection lost (" + why + "), resuming within "
                                 "MCCL_RECONNECT_MS=" + std::to_string(opts_.reconnect.count()));
  listener_.on_down(opts_.peer, down_kind::resumable, errc::peer_lost, why);
}

void channel::resume(connection_ptr fresh, clock::time_point now) {
  if (state_ != state::resuming) {
    if (fresh)
      fresh->close();
    return;
  }
  conn_ = conn_->resumed(std::move(fresh));
  state_ = state::open;
  // Tell the peer how many of its frames arrived in order; it sends the
  // rest again. Our own data waits for its count (on_resume_count).
  uint64_t in_order = crc_rx_.resume();
  crc_acked_ = in_order;
  awaiting_resume_count_ = true;
  queue_control(wire::frame_kind::crc_ack, 0, {}, in_order);
  last_rx_ = last_tx_ = now;
}

void channel::resume_failed(const std::string& why) {
  if (state_ != state::resuming)
    return;
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - resume_started_);
  record("reconnect", nullptr, "failed after " + std::to_string(waited.count()) + " ms: " + why);
  go_down(down_kind::error, errc::peer_lost, resume_cause_ + "; " + why);
}

void channel::on_resume_count(uint64_t count) {
  awaiting_resume_count_ = false;
  std::string why;
  auto* frames = crc_tx_.resume_from(count, &why);
  if (!frames) {
    fail(errc::protocol_error, name_ + " cannot resume the link: " + why);
    return;
  }
  for (const auto& f : *frames)
    queue_kept(f, false, {});
  ++resumes_;
  if (opts_.counters)
    opts_.counters->add(opts_.counters->reconnects, 1);
  auto healed = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - resume_started_);
  MCCL_LOG(warn, "link to " << name_ << " resumed after " << healed.count() << " ms; sending "
                            << frames->size() << " unacknowledged frame(s) again");
  record("reconnect", nullptr, "success: resumed after " + std::to_string(healed.count()) + " ms (resume #"
                                 + std::to_string(resumes_) + "), " + std::to_string(frames->size())
                                 + " frame(s) sent again");
}

} // namespace mccl::transport
