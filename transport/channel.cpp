#include "transport/channel.hpp"

#include "config/log.hpp"
#include "transport/wire/frame_queue.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace mccl::transport {

namespace {
/// Receive staging: several small frames per recv, and a partial header.
constexpr std::size_t stage_capacity = 128 * 1024;
/// The stage starts this small (a header and a control frame's payload,
/// an ABORT's reason included) and grows to stage_capacity once a read
/// fills it: a large world's algorithms talk to a few peers each, and a
/// channel to a peer that sends little costs little.
constexpr std::size_t initial_stage = 1024;
/// Bytes read per progress() call before the driver turns to other peers.
constexpr std::size_t read_budget = 8u << 20;
constexpr int max_iov = 32;
/// With CRC: frames delivered before an acknowledgement goes out on its own.
constexpr uint64_t max_owed_acks = 64;

} // namespace

channel::channel(channel_options opts, connection_ptr conn, channel_listener& listener,
                 clock::time_point now)
  : opts_(std::move(opts)), conn_(std::move(conn)), listener_(listener), name_(conn_->description()),
    last_tx_(now), stage_(initial_stage), last_rx_(now), crc_rx_(opts_.crc_retries) {
}

channel::~channel() {
  close();
}

// ---- sending ----------------------------------------------------------------------

bool channel::send(const wire::frame_header& h, const uint8_t* data, std::size_t len, frame_ref ref) {
  if (state_ == state::closed || aborted_ || crc_failed_)
    return false;
  auto hdr = h;
  hdr.kind = wire::frame_kind::data;
  hdr.comm_id = opts_.comm_id;
  hdr.payload_len = static_cast<uint32_t>(len);
  if (opts_.crc) {
    // The channel keeps its own copy until the peer acknowledges it, so a
    // frame can go again after the caller reused its buffer
    // (crc_recovery.hpp); the caller's memory is free at once.
    const auto& kept = crc_tx_.keep(hdr, data, len);
    if (state_ == state::open && !awaiting_resume_count_)
      ack_delivered_frames(); // what we owe the peer rides along in the same write
    if (state_ == state::resuming || awaiting_resume_count_) {
      // Nothing to write to yet: it goes with the others once the peer
      // says where to start again (on_resume_count).
      listener_.on_sent(opts_.peer, ref);
      return true;
    }
    queue_kept(kept, true, ref);
    return true;
  }
  // Built where it is queued: an entry is some 200 bytes, which a move
  // would copy once more.
  auto& item = txq_.emplace_back();
  wire::encode_header(hdr, item.header);
  item.len = len;
  item.ref = ref;
  // Written by progress(), the link actor's turn, which comes in the same
  // pass. A tiny payload is copied into its queue entry, so it leaves the
  // sender's memory now and the sender hears so at once (for an op actor
  // that is one message less per tiny frame: its own handler takes the
  // news in place); a larger one is reported once written.
  if (len > inline_payload_bytes) {
    item.data = data;
    item.data_frame = true;
    return true;
  }
  if (len > 0) // a frame without payload may come with no pointer at all
    std::memcpy(item.inline_payload, data, len);
  item.data = item.inline_payload;
  listener_.on_sent(opts_.peer, ref);
  return true;
}

void channel::queue_kept(const crc_sender::kept_frame& f, bool report, frame_ref ref) {
  tx_item item;
  wire::encode_header(f.header, item.header);
  item.data = f.payload.data(); // kept until acknowledged, which cannot precede its arrival
  item.len = f.payload.size();
  item.data_frame = report;
  item.ref = ref;
  txq_.push_back(std::move(item));
}

void channel::queue_control(wire::frame_kind kind, uint32_t aux, std::vector<uint8_t> payload,
                            uint64_t seq, uint32_t step) {
  tx_item item;
  wire::frame_header h;
  h.kind = kind;
  h.seq = seq;
  h.step = step;
  h.comm_id = opts_.comm_id;
  h.aux = aux;
  h.payload_len = static_cast<uint32_t>(payload.size());
  wire::encode_header(h, item.header);
  item.owned = std::move(payload);
  item.data = item.owned.data();
  item.len = item.owned.size();
  txq_.push_back(std::move(item));
}

void channel::abort(int origin, errc code, const std::string& reason, uint64_t revoke_point, bool revokes) {
  if (aborted_ || state_ == state::closed)
    return;
  aborted_ = true;
  record("abort_sent", nullptr, "ABORT (origin rank " + std::to_string(origin) + "): " + reason);
  // Drop every frame not begun; the one on the wire must finish (the stream
  // would be corrupt otherwise), from a copy of what is left of it. A
  // connection that had taken bytes of the dropped frames (single copy)
  // fails instead of sending them.
  if (conn_)
    conn_->release_buffers({origin, static_cast<uint32_t>(code) | (revokes ? wire::abort_revokes : 0u), reason,
                            revoke_point});
  if (!txq_.empty()) {
    std::deque<tx_item> kept;
    if (txq_.front().written > 0) {
      auto front = std::move(txq_.front());
      txq_.pop_front();
      if (front.owned.empty() && front.len > 0) {
        front.owned.assign(front.data, front.data + front.len);
        front.data = front.owned.data();
      }
      front.data_frame = false;
      kept.push_back(std::move(front));
    }
    // Ending a revoke, the frames the channel owns still go out before the
    // ABORT: small payloads copied when queued (their ops completed here
    // as soon as they were queued, and a peer finishing the ops below the
    // revoke point needs them) and control frames (this rank's REVOKE).
    // None points into an op's memory.
    if (code == errc::revoked)
      for (auto& item : txq_)
        if (!item.data_frame)
          kept.push_back(std::move(item));
    txq_ = std::move(kept);
  }
  crc_tx_.clear(); // after the purge: the frame on the wire was copied out of it
  if (in_payload_ && cur_land_) {
    // The rest of this payload must not reach the op's memory any more.
    cur_land_ = nullptr;
    cur_discard_ = true;
    cur_buf_ = opts_.pool->acquire(cur_.payload_len);
  }
  if (state_ == state::resuming) {
    // Nothing to send the ABORT on: the peer's own window ends, or another
    // rank's ABORT reaches it first.
    txq_.clear();
    return;
  }
  // The error code travels in the step field, so peers report the same
  // kind of failure (a desync stays a desync everywhere); a revoke's point
  // in the seq field.
  queue_control(wire::frame_kind::abort, static_cast<uint32_t>(origin), wire::encode_text(reason), revoke_point,
                static_cast<uint32_t>(code) | (revokes ? wire::abort_revokes : 0u));
}

void channel::send_bye(uint64_t issued) {
  if (state_ != state::open)
    return;
  // BYE carries how many collectives this rank issued, so the peer can tell
  // ops we completed (all our bytes precede the BYE) from ops we never issued.
  queue_control(wire::frame_kind::bye, static_cast<uint32_t>(opts_.rank), {}, issued);
  said_bye_ = true;
}

void channel::send_revoke(int origin, uint64_t point, const std::string& reason) {
  if (state_ != state::open || aborted_)
    return;
  record("revoke_sent", nullptr, "REVOKE (origin rank " + std::to_string(origin) + ", point "
                                   + std::to_string(point) + "): " + reason);
  queue_control(wire::frame_kind::revoke, static_cast<uint32_t>(origin), wire::encode_text(reason), point);
}

void channel::keep_alive(clock::time_point now) {
  // Half an interval: the peer never goes 1.5 intervals without hearing from us.
  if (state_ != state::open || aborted_ || !txq_.empty() || now - last_tx_ < opts_.heartbeat / 2)
    return;
  ack_delivered_frames();
  if (txq_.empty())
    queue_control(wire::frame_kind::heartbeat, 0, {});
}

void channel::ack_now() {
  if (state_ == state::open && opts_.crc && !awaiting_resume_count_)
    ack_delivered_frames();
}

// ---- driving ----------------------------------------------------------------------

std::size_t channel::progress(clock::time_point now) {
  if (state_ != state::open)
    return 0;
  auto moved = write_frames(now);
  if (state_ != state::open)
    return moved;
  moved += read_frames(now);
  // With CRC, what arrived is acknowledged along with our next frame (the
  // next op's data, a heartbeat), not by a frame of its own each time,
  // unless much is owed (the peer keeps a copy of every unacknowledged
  // frame): acknowledgements are about memory, not latency. A mismatch is
  // reported at once (a crc_nack, queued while reading).
  if (state_ == state::open && opts_.crc && crc_rx_.delivered() - crc_acked_ >= max_owed_acks)
    ack_delivered_frames();
  if (state_ == state::open && !txq_.empty())
    moved += write_frames(now);
  return moved;
}

std::size_t channel::write_frames(clock::time_point now) {
  std::size_t total = 0;
  while (!txq_.empty() && state_ == state::open) {
    iovec iov[max_iov];
    int n = gather_frames(txq_, iov, max_iov);
    auto r = conn_->write_some(iov, n);
    if (!r.error.empty()) {
      auto why = "sending to " + name_ + " failed: " + r.error;
      if (!opts_.resumable) {
        // Read what the peer sent before it went away (an ABORT naming the
        // real cause, or its BYE) so that is reported, not our loss.
        txq_.clear();
        read_frames(now);
      }
      lost(why);
      return total;
    }
    if (r.bytes == 0)
      break;
    total += r.bytes;
    written(r.bytes, now);
  }
  return total;
}

void channel::written(std::size_t bytes, clock::time_point now) {
  last_tx_ = now;
  if (opts_.counters)
    opts_.counters->add(opts_.counters->bytes_sent, bytes);
  account_written(txq_, bytes, [&](tx_item& done) {
    if (done.data_frame)
      listener_.on_sent(opts_.peer, done.ref);
  });
}

std::size_t channel::write_now(clock::time_point now) {
  std::size_t total = 0;
  while (state_ == state::open && !txq_.empty()) {
    iovec iov[max_iov];
    int n = gather_frames(txq_, iov, max_iov);
    auto r = conn_->write_some(iov, n);
    if (r.closed || !r.error.empty() || r.bytes == 0)
      break;
    total += r.bytes;
    written(r.bytes, now);
  }
  return total;
}

std::size_t channel::stage_read_limit() const {
  auto room = stage_.size() - stage_end_;
  bool large_frames = small_frames_in_a_row_ < small_frames_to_stage;
  auto staged = stage_end_ - stage_begin_;
  if (!large_frames || (!in_payload_ && staged >= wire::header_size))
    return room;
  // Only up to the end of the next header (after the rest of a small
  // payload): the next payload is then read straight to its destination.
  // One more recv per frame saves a copy of up to stage_capacity bytes.
  // (Mid-payload the stage is empty: what was staged went to the payload.)
  auto rest = in_payload_ ? cur_.payload_len - cur_have_ + wire::header_size : wire::header_size - staged;
  return std::min(room, rest);
}

std::size_t channel::read_frames(clock::time_point now) {
  std::size_t total = 0;
  if (stage_begin_ == stage_end_ && !conn_->maybe_readable())
    return total; // nothing staged, nothing to read: an idle peer costs no read

  // A read that returned less than it asked for emptied the socket: asking
  // again would only cost a system call that finds nothing.
  bool drained = false;
  while (state_ == state::open && total < read_budget) {
    // 1. Consume what is staged.
    while (stage_begin_ < stage_end_ && state_ == state::open) {
      auto avail = stage_end_ - stage_begin_;
      if (!in_payload_) {
        if (avail < wire::header_size)
          break;
        auto res = wire::decode_header(stage_.data() + stage_begin_, avail, opts_.max_payload);
        if (res.status != wire::decode_status::ok) {
          fail(errc::protocol_error, "malformed frame from " + name_ + ": " + res.reason);
          return total;
        }
        stage_begin_ += wire::header_size;
        begin_frame(res.header);
      } else {
        auto n = std::min<std::size_t>(avail, cur_.payload_len - cur_have_);
        std::memcpy(payload_at(), stage_.data() + stage_begin_, n);
        staged_payload_ += n;
        cur_have_ += n;
        stage_begin_ += n;
        if (cur_have_ == cur_.payload_len)
          frame_complete();
      }
    }
    if (state_ != state::open)
      return total;
    if (stage_begin_ == stage_end_) {
      stage_begin_ = stage_end_ = 0;
    } else if (stage_begin_ > 0) {
      // Keep a partial header contiguous at the front.
      std::memmove(stage_.data(), stage_.data() + stage_begin_, stage_end_ - stage_begin_);
      stage_end_ -= stage_begin_;
      stage_begin_ = 0;
    }
    if (drained)
      break;
    // 2. Read more: a large payload's remainder straight to its destination
    // (however little is left: reading it through the stage would pull the
    // next frames in too and copy them).
    bool direct = in_payload_ && stage_end_ == 0 && cur_.payload_len >= direct_read_min;
    auto asked = direct ? cur_.payload_len - cur_have_ : stage_read_limit();
    auto r = conn_->read_some(direct ? payload_at() : stage_.data() + stage_end_, asked);
    if (r.bytes > 0) {
      total += r.bytes;
      if (opts_.counters)
        opts_.counters->add(opts_.counters->bytes_received, r.bytes);
      last_rx_ = now;
      drained = r.bytes < asked;
      if (!direct) {
        stage_end_ += r.bytes;
        if (stage_end_ == stage_.size() && stage_.size() < stage_capacity)
          stage_.resize(stage_capacity); // keeps what was staged
      } else {
        cur_have_ += r.bytes;
        if (cur_have_ == cur_.payload_len)
          frame_complete();
      }
      continue;
    }
    if (r.closed) {
      // An ABORT the peer left beside a stream that could not carry it
      // (shared memory) says why it ended, as the frame would have.
      if (auto note = conn_->peer_abort())
        peer_aborted(note->origin, note->code, note->reason, note->revoke_point);
      lost(r.error.empty() ? name_ + " closed the connection"
                           : "connection to " + name_ + " failed: " + r.error);
    }
    break;
  }
  return total;
}

void channel::begin_frame(const wire::frame_header& h) {
  cur_ = h;
  cur_have_ = 0;
  cur_discard_ = false;
  cur_land_ = nullptr;
  bool data = h.kind == wire::frame_kind::data;
  if (data && h.payload_len >= direct_read_min)
    small_frames_in_a_row_ = 0;
  else if (data && small_frames_in_a_row_ < small_frames_to_stage)
    ++small_frames_in_a_row_;
  // Only intact, wanted data frames of this communicator may land in place.
  if (data && h.payload_len > 0 && h.comm_id == opts_.comm_id && !aborted_ && !crc_failed_)
    cur_land_ = listener_.landing_for(opts_.peer, h);
  cur_buf_ = h.payload_len > 0 && !cur_land_ ? opts_.pool->acquire(h.payload_len) : nullptr;
  in_payload_ = true;
  if (h.payload_len == 0)
    frame_complete();
}

void channel::frame_complete() {
  in_payload_ = false;
  auto h = cur_;
  auto buf = std::move(cur_buf_);
  const uint8_t* landed = std::exchange(cur_land_, nullptr);
  if (std::exchange(cur_discard_, false)) {
    // Still counted: CRC recovery numbers every checked frame.
    if (h.kind == wire::frame_kind::data && (h.flags & wire::flag_crc) && !(h.flags & wire::flag_retransmit))
      crc_rx_.skip();
    return;
  }
  switch (h.kind) {
    case wire::frame_kind::data:
      return on_data(received_frame{opts_.peer, h, std::move(buf), landed});
    case wire::frame_kind::heartbeat:
      return;
    case wire::frame_kind::crc_ack:
      if (awaiting_resume_count_)
        on_resume_count(h.seq);
      else
        crc_tx_.on_ack(h.seq);
      return;
    case wire::frame_kind::crc_nack:
      return on_crc_nack(h.seq);
    case wire::frame_kind::abort: {
      std::string why;
      auto text = wire::decode_text(buf.get(), h.payload_len, &why);
      peer_aborted(static_cast<int>(h.aux), h.step, text ? *text : "(unreadable reason: " + why + ")", h.seq);
      return;
    }
    case wire::frame_kind::revoke: {
      std::string why;
      auto text = wire::decode_text(buf.get(), h.payload_len, &why);
      record("peer_revoke", nullptr, "rank " + std::to_string(h.aux) + " revoked the communicator");
      listener_.on_peer_revoke(opts_.peer, static_cast<int>(h.aux), h.seq,
                               text ? *text : "(unreadable reason: " + why + ")");
      return;
    }
    case wire::frame_kind::bye: {
      auto why = name_ + " finalized after issuing " + std::to_string(h.seq) + " op(s)";
      record("peer_finalized", nullptr, why);
      MCCL_LOG(info, why);
      state_ = state::closed;
      txq_.clear();
      crc_tx_.clear();
      conn_->close();
      listener_.on_peer_bye(opts_.peer, h.seq);
      return;
    }
    default:
      fail(errc::protocol_error, std::string("unexpected ") + wire::to_string(h.kind) + " frame from "
                                   + name_ + " after the handshake");
  }
}

void channel::peer_aborted(int origin, uint32_t code, const std::string& reason, uint64_t revoke_point) {
  if (peer_abort_heard_)
    return; // the frame and the note beside the stream say the same
  peer_abort_heard_ = true;
  record("peer_abort", nullptr, "rank " + std::to_string(origin) + " aborted the communicator: " + reason);
  wire::frame_header h;
  h.step = code;
  listener_.on_peer_abort(opts_.peer, origin, wire::abort_code(h), reason, revoke_point,
                          wire::abort_revokes_comm(h));
}

void channel::on_data(received_frame f) {
  bool checked = f.header.flags & wire::flag_crc;
  if (checked != opts_.crc) {
    fail(errc::invalid_config,
         name_ + (checked ? " sends CRC32C-checked frames but MCCL_TRANSPORT_CRC is off"
                          : " sends frames without CRC32C but MCCL_TRANSPORT_CRC is on")
           + " on rank " + std::to_string(opts_.rank)
           + ": set MCCL_TRANSPORT_CRC to the same value on every rank");
    return;
  }
  if (checked)
    on_crc_frame(std::move(f));
  else
    accept_data(std::move(f));
}

void channel::accept_data(received_frame f) {
  if (aborted_)
    return; // the communicator aborted: no op wants data any more
  if (f.header.comm_id != opts_.comm_id) {
    fail(errc::protocol_error, "frame for communicator " + std::to_string(f.header.comm_id)
                                 + " on a link of communicator " + std::to_string(opts_.comm_id)
                                 + " from " + name_);
    return;
  }
  listener_.on_frame(std::move(f));
}

// ---- ending ----------------------------------------------------------------------

void channel::fail(errc code, const std::string& why) {
  if (state_ == state::closed)
    return;
  go_down(down_kind::error, code, why);
}

void channel::go_down(down_kind kind, errc code, const std::string& why) {
  state_ = state::closed;
  txq_.clear(); // nothing more is written: no pointer into caller memory survives
  crc_tx_.clear();
  reset_rx();
  conn_->close();
  record("link_down", nullptr, why);
  MCCL_LOG(warn, "link to " << name_ << " is down: " << why);
  listener_.on_down(opts_.peer, kind, code, why);
}

void channel::close() {
  if (state_ == state::closed)
    return;
  state_ = state::closed;
  txq_.clear();
  crc_tx_.clear();
  reset_rx();
  if (conn_)
    conn_->close();
}

void channel::reset_rx() {
  in_payload_ = false;
  cur_buf_.reset();
  cur_land_ = nullptr;
  cur_discard_ = false;
  cur_have_ = 0;
  stage_begin_ = stage_end_ = 0;
}

void channel::record(const char* kind, const wire::frame_header* h, const std::string& detail) {
  if (opts_.recorder)
    opts_.recorder->reaction(kind, opts_.peer, h ? key_of(*h) : frame_key{}, detail);
}

} // namespace mccl::transport
