#include "actors/link_actor.hpp"

#include "config/log.hpp"
#include "transport/wire/crc32c.hpp"
#include "transport/wire/frame_queue.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <cstring>
#include <utility>

namespace mccl::actors {

namespace {
constexpr std::size_t stage_capacity = 256 * 1024;
/// Payload bytes below this go through the staging area (one recv picks up
/// several small frames); above it they are read straight into their buffer.
constexpr std::size_t direct_read_min = 64 * 1024;
/// Bytes moved per poll before yielding the worker to the collective actors.
constexpr std::size_t poll_budget = 8u << 20;
/// Chunks of ops this rank has not started yet that we keep at most.
constexpr std::size_t max_early_bytes = std::size_t{2} << 30;
/// Early chunks up to this size are handed back with the connection when it
/// is offered to the inline path; more means a large op is coming, which
/// takes the actor path anyway.
constexpr std::size_t max_lent_early_bytes = 1u << 20;
constexpr int max_iov = 32;
/// How long finalize waits for the peer to ack our last CRC-checked frames.
constexpr auto crc_shutdown_wait = std::chrono::milliseconds(500);
} // namespace

link_actor::link_actor(caf::actor_config& cfg, link_init init)
  : caf::event_based_actor(cfg), init_(std::move(init)), stage_(stage_capacity),
    crc_rx_(init_.crc_retries) {
  peer_name_ = init_.conn->description();
  offered_ = init_.lease != nullptr; // see link_lease: new leases start on offer
  last_tx_ = last_rx_ = last_activity_ = clock::now();
}

caf::behavior link_actor::make_behavior() {
  // A link must outlive transient trouble of others: never let an unexpected
  // message or exit from a peer actor kill it silently.
  set_default_handler(caf::drop);
  delayed_send(this, init_.heartbeat, tick_atom::value);
  park();
  return {
    [this](send_atom, tx_request& req, caf::actor& notify) { on_send(req, std::move(notify)); },
    [this](route_atom, uint64_t seq, caf::actor& c, std::shared_ptr<landing_map>& landing) {
      on_route(seq, std::move(c), std::move(landing));
    },
    [this](unroute_atom, uint64_t seq) {
      stop_landing(&seq);
      routes_.erase(seq);
      landings_.erase(seq);
      auto i = early_.find(seq);
      if (i != early_.end()) {
        for (auto& c : i->second)
          early_bytes_ -= c.header.payload_len;
        early_.erase(i);
      }
      offer_if_idle();
    },
    [this](poll_atom) {
      poll_queued_ = false;
      poll();
    },
    [this](ready_atom, bool for_write) {
      (for_write ? write_armed_ : read_armed_) = false;
      poll();
    },
    [this](returned_atom) { poll(); },
    [this](resumed_atom, transport::connection_ptr& conn, std::string& why) {
      on_resumed(std::move(conn), why);
    },
    [this](tick_atom) { on_tick(); },
    [this](abort_atom, int origin, std::string& reason, errc code) {
      on_abort(origin, reason, code);
      return true;
    },
    [this](post_recv_atom, uint32_t tag, uint64_t op_id, caf::actor& receiver) {
      on_post_recv(tag, op_id, std::move(receiver));
    },
    [this](probe_atom, uint32_t tag) {
      // Read what is waiting first: after an inline op the connection's
      // notifications may be off (link_lease::quiet).
      poll();
      // A message of `tag` that no posted receive has claimed yet.
      for (const auto& entry : unexpected_)
        if (entry.second.tag == tag)
          return true;
      return false;
    },
    [this](unpost_atom, uint64_t op_id) {
      on_unpost(op_id);
      offer_if_idle();
    },
    [this](shutdown_atom, uint64_t issued) -> caf::result<bool> {
      if (init_.crc && !closed_ && !aborted_ && crc_tx_.kept_frames() > 0) {
        // The peer may still find a CRC mismatch in what we sent last and
        // ask for it again: wait (bounded) until it acked everything.
        shutdown_wait_ = make_response_promise<bool>();
        shutdown_issued_ = issued;
        shutdown_deadline_ = clock::now() + crc_shutdown_wait;
        delayed_send(this, crc_shutdown_wait, returned_atom::value);
        kick();
        return shutdown_wait_;
      }
      on_shutdown(issued);
      return true;
    },
  };
}

void link_actor::on_exit() {
  stop_resuming();
  if (init_.conn && !closed_)
    init_.conn->close();
  closed_ = true;
  init_.conn.reset();
  routes_.clear();
  landings_.clear();
  early_.clear();
  // The progress actor holds this link and this link holds it: drop our
  // side, or the pair keeps each other (and the watchdog) alive forever.
  init_.progress = nullptr;
  posted_.clear();
  unexpected_.clear();
  p2p_routes_.clear();
}

// ---- handlers -------------------------------------------------------------------

void link_actor::on_send(tx_request& req, caf::actor notify) {
  if (aborted_)
    return; // the op is being failed by the progress actor; nothing may be sent
  if (closed_) {
    // A connection lost without explanation: the progress actor fails every
    // op within its grace period, with the reason of an ABORT that may still
    // arrive from another rank (the peer may have exited because a third
    // rank died). Failing here would blame this peer first.
    if (lost_ && peer_abort_reason_.empty())
      return;
    // Never leave a collective waiting for a send that cannot happen.
    // Prefer the peer's own abort reason: it names the rank that failed first.
    send(notify, fail_atom::value, peer_abort_reason_.empty() ? errc::peer_lost : peer_abort_code_,
         peer_abort_reason_.empty() ? "lost rank " + std::to_string(init_.peer) + ": " + close_reason_
                                    : peer_abort_reason_);
    return;
  }
  tx_item item;
  auto h = req.header;
  h.comm_id = init_.comm_id;
  h.payload_len = static_cast<uint32_t>(req.len);
  item.data = req.data;
  item.len = req.len;
  if (init_.crc) {
    // The link keeps its own copy until the peer acks it, so a chunk can be
    // sent again after the caller's buffer is reused (crc_recovery.hpp).
    const auto& kept = crc_tx_.keep(h, req.data, req.len);
    h = kept.header;
    item.data = kept.payload.data();
    if (resuming_ || awaiting_resume_count_) {
      // No connection to write to yet: the copy goes out with the others
      // once the peer says where to start (on_resume_count).
      if (notify)
        send(notify, sent_atom::value, init_.peer, h.step, h.chunk);
      return;
    }
  }
  wire::encode_header(h, item.header);
  item.notify = std::move(notify);
  item.step = h.step;
  item.chunk = h.chunk;
  txq_.push_back(std::move(item));
  last_activity_ = clock::now();
  // Write at once: for small ops this saves a trip through the mailbox.
  write_frames();
  kick();
}

void link_actor::on_route(uint64_t seq, caf::actor c, std::shared_ptr<landing_map> landing) {
  auto i = early_.find(seq);
  if (i != early_.end()) {
    for (auto& chunk : i->second) {
      early_bytes_ -= chunk.header.payload_len;
      if (landing)
        landing->passed_on(init_.peer, chunk.header);
      send(c, chunk_atom::value, std::move(chunk));
    }
    early_.erase(i);
  }
  if (landing)
    landings_[seq] = std::move(landing);
  routes_[seq] = std::move(c);
  last_activity_ = clock::now();
  kick();
}

void link_actor::on_post_recv(uint32_t tag, uint64_t op_id, caf::actor receiver) {
  posted_.push_back(posted_recv{tag, op_id, receiver});
  match_p2p();
  if (closed_) {
    // Whatever was not matched now never will be.
    for (auto i = posted_.begin(); i != posted_.end(); ++i)
      if (i->op_id == op_id) {
        send(receiver, fail_atom::value, peer_abort_reason_.empty() ? errc::peer_lost : peer_abort_code_,
             peer_abort_reason_.empty() ? "rank " + std::to_string(init_.peer)
                                            + " sent no matching message before its link closed: "
                                            + close_reason_
                                        : peer_abort_reason_);
        posted_.erase(i);
        break;
      }
    return;
  }
  last_activity_ = clock::now();
  kick();
}

void link_actor::match_p2p() {
  // Oldest receive first; each takes the lowest-numbered unexpected message
  // with its tag among those below seen_prefix_ (no earlier message with
  // that tag can still be on its way).
  for (auto p = posted_.begin(); p != posted_.end();) {
    auto m = unexpected_.begin();
    while (m != unexpected_.end() && m->first < seen_prefix_ && m->second.tag != p->tag)
      ++m;
    if (m == unexpected_.end() || m->first >= seen_prefix_) {
      ++p;
      continue;
    }
    for (auto& chunk : m->second.chunks) {
      early_bytes_ -= chunk.header.payload_len;
      send(p->receiver, chunk_atom::value, std::move(chunk));
    }
    p2p_routes_[m->first] = p2p_route{p->op_id, p->receiver};
    unexpected_.erase(m);
    p = posted_.erase(p);
  }
}

void link_actor::on_unpost(uint64_t op_id) {
  for (auto i = posted_.begin(); i != posted_.end(); ++i)
    if (i->op_id == op_id) {
      posted_.erase(i);
      break;
    }
  for (auto i = p2p_routes_.begin(); i != p2p_routes_.end();)
    i = i->second.op_id == op_id ? p2p_routes_.erase(i) : std::next(i);
}

void link_actor::dispatch_p2p(rx_chunk chunk) {
  auto msg = chunk.header.seq;
  auto r = p2p_routes_.find(msg);
  if (r != p2p_routes_.end()) {
    send(r->second.receiver, chunk_atom::value, std::move(chunk));
    return;
  }
  if (!keep_early(chunk.header.payload_len, msg, "point-to-point messages nobody received yet"))
    return;
  bool first = unexpected_.find(msg) == unexpected_.end();
  auto& slot = unexpected_[msg];
  slot.tag = chunk.header.aux;
  slot.chunks.push_back(std::move(chunk));
  if (!first || msg < seen_prefix_)
    return;
  seen_ahead_.insert(msg);
  while (!seen_ahead_.empty() && *seen_ahead_.begin() == seen_prefix_) {
    seen_ahead_.erase(seen_ahead_.begin());
    ++seen_prefix_;
  }
  match_p2p();
}

bool link_actor::keep_early(std::size_t bytes, uint64_t seq, const char* what) {
  early_bytes_ += bytes;
  if (early_bytes_ <= max_early_bytes)
    return true;
  fail(peer_name_ + " sent more than 2 GiB of " + what + " (seq " + std::to_string(seq)
       + "); are all ranks issuing the same operations?");
  return false;
}

void link_actor::on_abort(int origin, const std::string& reason, errc code) {
  if (aborted_ || closed_)
    return;
  aborted_ = true;
  if (init_.recorder)
    init_.recorder->reaction("abort_sent", init_.peer, {},
                             "ABORT (origin rank " + std::to_string(origin) + "): " + reason);
  if (resuming_) {
    // No connection to send the ABORT on: give up the resume; the peer's
    // own window ends, or another rank's ABORT reaches it first.
    stop_resuming();
    closed_ = true;
    close_reason_ = "the communicator aborted while the link was being re-established: " + reason;
    txq_.clear();
    crc_tx_.clear();
    return;
  }
  purge_queued_data();
  crc_tx_.clear(); // after the purge: a frame on the wire was copied out of it
  stop_landing(nullptr);
  landings_.clear();
  // The error code travels in the step field, so peers report the same kind
  // of failure (a desync stays a desync everywhere).
  enqueue_control(wire::frame_kind::abort, static_cast<uint32_t>(origin), wire::encode_text(reason),
                  0, static_cast<uint32_t>(code));
  write_frames();
  kick();
}

void link_actor::on_shutdown(uint64_t issued) {
  if (resuming_) {
    stop_resuming();
    closed_ = true;
  }
  if (!closed_) {
    purge_queued_data();
    // BYE carries how many ops this rank issued, so the peer can tell ops we
    // completed (all our bytes precede the BYE) from ops we never issued.
    enqueue_control(wire::frame_kind::bye, static_cast<uint32_t>(init_.rank), {}, issued);
    write_frames(); // best effort: a peer that is gone or slow is not waited for
    closed_ = true;
    init_.conn->close();
  }
  quit();
}

void link_actor::on_tick() {
  if (closed_)
    return;
  if (resuming_) {
    // The resumer bounds the wait (it answers by the deadline); the peer
    // cannot be heard meanwhile, so its silence does not count.
    last_rx_ = clock::now();
    delayed_send(this, init_.heartbeat, tick_atom::value);
    return;
  }
  auto now = clock::now();
  // While the inline path has the connection its own frames show the peer
  // we are alive; have_connection() then just asks for a poke afterwards.
  // Half an interval: ticks themselves are an interval apart, so the peer
  // never goes 1.5 intervals without hearing from us (see check_peer_alive).
  if (!aborted_ && txq_.empty() && now - last_tx_ >= init_.heartbeat / 2 && have_connection()) {
    enqueue_control(wire::frame_kind::heartbeat, 0, {});
    write_frames();
    kick();
  }
  check_peer_alive(now);
  if (!closed_)
    delayed_send(this, init_.heartbeat, tick_atom::value);
}

void link_actor::check_peer_alive(clock::time_point now) {
  if (closed_ || init_.heartbeat_misses == 0)
    return;
  auto limit = init_.heartbeat * init_.heartbeat_misses;
  if (now - last_rx_ < limit)
    return;
  // While the inline path has the connection it watches the peer itself.
  bool was_offered = init_.lease && offered_;
  if (was_offered && !have_connection())
    return;
  // This worker may simply have been busy: read what is there first.
  read_frames();
  if (closed_)
    return;
  if (clock::now() - last_rx_ < limit) {
    if (was_offered)
      kick(); // parks again, offering the connection
    return;
  }
  auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - last_rx_);
  auto why = peer_name_ + " sent nothing for " + std::to_string(silent.count())
             + " ms (MCCL_HEARTBEAT_MS=" + std::to_string(init_.heartbeat.count())
             + " x MCCL_HEARTBEAT_MISSES=" + std::to_string(init_.heartbeat_misses)
             + "): declared dead (frozen, stopped or cut off)";
  if (init_.recorder)
    init_.recorder->reaction("heartbeat_dead", init_.peer, {}, why);
  fail(why);
}

// ---- progress -------------------------------------------------------------------

void link_actor::kick() {
  if (closed_ || resuming_ || poll_queued_)
    return;
  poll_queued_ = true;
  send(this, poll_atom::value);
}

bool link_actor::have_connection() {
  if (!init_.lease || !offered_)
    return true;
  if (!init_.lease->reclaim())
    return false;
  offered_ = false;
  if (init_.lease->quiet) {
    init_.lease->quiet = false;
    init_.conn->resume_notifications();
  }
  // The inline path read (and watched) the peer while it had the connection.
  last_rx_ = std::max(last_rx_, init_.lease->last_rx);
  // What the inline path left: a frame it could not finish writing goes out
  // first; bytes it read past its own frames are parsed before new ones.
  auto& lease = *init_.lease;
  if (!lease.unwritten.empty()) {
    tx_item item;
    item.owned = std::move(lease.unwritten);
    lease.unwritten.clear();
    item.data = item.owned.data();
    item.len = item.owned.size();
    item.written = wire::header_size; // raw bytes: the header is inside them
    txq_.push_front(std::move(item));
  }
  if (!lease.unread.empty()) {
    // lendable() required an empty stage, so the bytes start at its front.
    if (lease.unread.size() > stage_.size())
      stage_.resize(lease.unread.size());
    std::memcpy(stage_.data(), lease.unread.data(), lease.unread.size());
    stage_begin_ = 0;
    stage_end_ = lease.unread.size();
    lease.unread.clear();
  }
  return true;
}

void link_actor::offer_if_idle() {
  // The last op left while the link was parked: offer the connection now,
  // not at the next wake-up. A spinning link parks (and offers) by itself.
  if (!poll_queued_ && !offered_ && lendable())
    park();
}

bool link_actor::lendable() const {
  return init_.lease && !closed_ && !aborted_ && txq_.empty() && !in_payload_
         && stage_begin_ == stage_end_ && routes_.empty() && early_bytes_ <= max_lent_early_bytes
         && posted_.empty() && p2p_routes_.empty();
}

void link_actor::hand_early_chunks_to_lease() {
  // A peer that runs ahead sent chunks of ops this rank has not issued yet.
  // Put them back as the frames they came in, so the next op can still run
  // inline and find them first (reclaiming parses them again).
  auto& unread = init_.lease->unread;
  for (auto& [seq, chunks] : early_)
    for (auto& c : chunks) {
      auto at = unread.size();
      unread.resize(at + wire::header_size + c.header.payload_len);
      wire::encode_header(c.header, unread.data() + at);
      if (c.header.payload_len > 0)
        std::memcpy(unread.data() + at + wire::header_size, c.buffer.get(), c.header.payload_len);
      early_bytes_ -= c.header.payload_len; // the rest counts unexpected p2p messages
    }
  early_.clear();
}

void link_actor::finish_shutdown_when_acked() {
  if (!shutdown_wait_.pending())
    return;
  if (!closed_ && !aborted_ && crc_tx_.kept_frames() > 0 && clock::now() < shutdown_deadline_)
    return;
  on_shutdown(shutdown_issued_);
  shutdown_wait_.deliver(true);
}

void link_actor::poll() {
  finish_shutdown_when_acked();
  if (closed_ || resuming_ || !have_connection())
    return;
  auto moved = read_frames();
  if (init_.crc) {
    ack_delivered_frames();
    finish_shutdown_when_acked();
    if (closed_)
      return;
  }
  if (!closed_)
    moved += write_frames();
  if (closed_)
    return;
  auto now = clock::now();
  if (moved > 0)
    last_activity_ = now;
  bool busy = !routes_.empty() || !p2p_routes_.empty() || !posted_.empty() || !txq_.empty()
              || in_payload_;
  if (busy && now - last_activity_ < init_.spin)
    kick();
  else
    park();
}

void link_actor::park() {
  if (closed_ || resuming_)
    return;
  caf::actor self = caf::actor_cast<caf::actor>(this);
  // An idle link still reads: a peer's ABORT or BYE must reach the progress
  // actor while this rank issues nothing (a peer that runs ahead then sends
  // the next op's chunks here, and that op takes the actor path).
  bool lend = lendable();
  if (!read_armed_) {
    read_armed_ = true;
    init_.conn->notify_when_ready(false, [self] { caf::anon_send(self, ready_atom::value, false); });
  }
  if (!txq_.empty() && !write_armed_) {
    write_armed_ = true;
    init_.conn->notify_when_ready(true, [self] { caf::anon_send(self, ready_atom::value, true); });
  }
  if (lend && !offered_) {
    hand_early_chunks_to_lease();
    init_.lease->last_rx = last_rx_;
    offered_ = true;
    init_.lease->offer();
  }
}

std::size_t link_actor::read_frames() {
  std::size_t total = 0;
  if (resuming_ || !have_connection())
    return total;
  while (!closed_ && !resuming_ && total < poll_budget) {
    // 1. Consume what is staged.
    while (stage_begin_ < stage_end_ && !closed_) {
      auto avail = stage_end_ - stage_begin_;
      if (!in_payload_) {
        if (avail < wire::header_size)
          break;
        auto res = wire::decode_header(stage_.data() + stage_begin_, avail, init_.max_payload);
        if (res.status != wire::decode_status::ok) {
          fail("malformed frame from " + peer_name_ + ": " + res.reason);
          return total;
        }
        cur_ = res.header;
        stage_begin_ += wire::header_size;
        cur_have_ = 0;
        cur_land_ = land(cur_);
        cur_discard_ = false;
        cur_buf_ = cur_.payload_len > 0 && !cur_land_ ? init_.pool->acquire(cur_.payload_len) : nullptr;
        in_payload_ = true;
        if (cur_.payload_len == 0)
          frame_complete();
      } else {
        auto n = std::min<std::size_t>(avail, cur_.payload_len - cur_have_);
        std::memcpy(payload_at(), stage_.data() + stage_begin_, n);
        cur_have_ += n;
        stage_begin_ += n;
        if (cur_have_ == cur_.payload_len)
          frame_complete();
      }
    }
    if (closed_)
      return total;
    if (stage_begin_ == stage_end_) {
      stage_begin_ = stage_end_ = 0;
    } else if (stage_begin_ > 0) {
      // Keep a partial header contiguous at the front.
      std::memmove(stage_.data(), stage_.data() + stage_begin_, stage_end_ - stage_begin_);
      stage_end_ -= stage_begin_;
      stage_begin_ = 0;
    }
    // 2. Read more: big payload remainders straight into their buffer.
    transport::io_result r;
    bool direct = in_payload_ && stage_end_ == 0 && cur_.payload_len - cur_have_ >= direct_read_min;
    if (direct)
      r = init_.conn->read_some(payload_at(), cur_.payload_len - cur_have_);
    else
      r = init_.conn->read_some(stage_.data() + stage_end_, stage_.size() - stage_end_);
    if (r.bytes > 0) {
      total += r.bytes;
      last_rx_ = clock::now();
      if (direct) {
        cur_have_ += r.bytes;
        if (cur_have_ == cur_.payload_len)
          frame_complete();
      } else {
        stage_end_ += r.bytes;
      }
      continue;
    }
    if (r.closed) {
      if (!r.error.empty())
        lost("connection to " + peer_name_ + " failed: " + r.error);
      else
        lost(peer_name_ + " closed the connection");
    }
    break;
  }
  return total;
}

void link_actor::frame_complete() {
  in_payload_ = false;
  auto h = cur_;
  auto buf = std::move(cur_buf_);
  const uint8_t* landed = std::exchange(cur_land_, nullptr);
  if (std::exchange(cur_discard_, false)) {
    // Still counted: CRC recovery numbers every checked frame (crc_recovery.hpp).
    if (h.kind == wire::frame_kind::data && (h.flags & wire::flag_crc)
        && !(h.flags & wire::flag_retransmit))
      crc_rx_.skip();
    return;
  }
  switch (h.kind) {
    case wire::frame_kind::data: {
      bool checked = h.flags & wire::flag_crc;
      if (checked != init_.crc) {
        fail(peer_name_ + (checked ? " sends CRC32C-checked frames but MCCL_TRANSPORT_CRC is off"
                                   : " sends frames without CRC32C but MCCL_TRANSPORT_CRC is on")
             + " on rank " + std::to_string(init_.rank)
             + ": set MCCL_TRANSPORT_CRC to the same value on every rank");
        return;
      }
      if (checked)
        on_crc_frame(rx_chunk{init_.peer, h, std::move(buf), landed});
      else
        accept_data(rx_chunk{init_.peer, h, std::move(buf), landed});
      return;
    }
    case wire::frame_kind::heartbeat:
      return;
    case wire::frame_kind::crc_ack:
      if (awaiting_resume_count_)
        on_resume_count(h.seq);
      else
        crc_tx_.on_ack(h.seq);
      return;
    case wire::frame_kind::crc_nack:
      on_crc_nack(h.seq);
      return;
    case wire::frame_kind::abort: {
      std::string why;
      auto text = wire::decode_text(buf.get(), h.payload_len, &why);
      auto reason = text ? *text : "(unreadable reason: " + why + ")";
      peer_abort_reason_ = "rank " + std::to_string(h.aux) + " aborted the communicator: " + reason;
      peer_abort_code_ = wire::abort_code(h);
      if (init_.recorder)
        init_.recorder->reaction("peer_abort", init_.peer, {}, peer_abort_reason_);
      send(init_.progress, peer_abort_atom::value, static_cast<int>(h.aux), reason, peer_abort_code_);
      return;
    }
    case wire::frame_kind::bye:
      fail(peer_name_ + " finalized after issuing " + std::to_string(h.seq) + " op(s)", true, h.seq);
      return;
    default:
      fail(std::string("unexpected ") + wire::to_string(h.kind) + " frame from " + peer_name_
           + " after the handshake");
  }
}

void link_actor::accept_data(rx_chunk chunk) {
  if (chunk.header.comm_id != init_.comm_id) {
    fail("frame for communicator " + std::to_string(chunk.header.comm_id)
         + " on a link of communicator " + std::to_string(init_.comm_id) + " from " + peer_name_);
    return;
  }
  if (chunk.header.flags & wire::flag_p2p)
    dispatch_p2p(std::move(chunk));
  else
    dispatch_data(std::move(chunk));
}

// ---- CRC recovery -----------------------------------------------------------------

namespace {
transport::frame_key key_of(const wire::frame_header& h) {
  return transport::frame_key{h.seq, h.step, h.chunk, (h.flags & wire::flag_p2p) != 0, true};
}
std::string chunk_text(const wire::frame_header& h) {
  return std::string(h.flags & wire::flag_p2p ? "message " : "seq ") + std::to_string(h.seq)
         + ", step " + std::to_string(h.step) + ", chunk " + std::to_string(h.chunk);
}
} // namespace

void link_actor::on_crc_frame(rx_chunk chunk) {
  if (crc_failed_ || aborted_)
    return;
  // A corrupted payload may have landed in the caller's buffer already
  // (receive in place); its retransmission then arrives in staging memory
  // (a spot is claimed once) and the algorithm copies it over.
  const auto h = chunk.header;
  bool ok = wire::frame_crc(h, chunk.payload(), h.payload_len) == h.crc;
  auto out = crc_rx_.on_frame(std::move(chunk), ok);
  if (!out.fatal.empty())
    return crc_give_up(h, out.fatal);
  for (auto index : out.nacks) {
    MCCL_LOG(warn, "CRC32C mismatch on a chunk from " << peer_name_ << " (" << chunk_text(h)
                   << ", link frame " << index << "): asking for it again");
    if (init_.recorder)
      init_.recorder->reaction("nack_sent", init_.peer, key_of(h),
                               "CRC32C mismatch; link frame " + std::to_string(index)
                                 + " requested again (attempt " + std::to_string(out.attempts + 1) + ")");
    enqueue_control(wire::frame_kind::crc_nack, 0, {}, index);
  }
  if (out.recovered && init_.recorder)
    init_.recorder->reaction("crc_recovered", init_.peer, key_of(h),
                             "link frame " + std::to_string(out.index) + " arrived intact after "
                               + std::to_string(out.attempts) + " retransmission(s)");
  for (auto& c : out.deliver) {
    if (closed_)
      return;
    accept_data(std::move(c));
  }
  if (!out.nacks.empty()) {
    write_frames();
    kick();
  }
}

void link_actor::ack_delivered_frames() {
  if (closed_ || aborted_ || crc_rx_.delivered() == crc_acked_)
    return;
  crc_acked_ = crc_rx_.delivered();
  enqueue_control(wire::frame_kind::crc_ack, 0, {}, crc_acked_);
}

void link_actor::on_crc_nack(uint64_t index) {
  if (aborted_ || closed_)
    return;
  std::string why;
  auto* f = crc_tx_.on_nack(index, &why);
  if (!f) {
    fail(peer_name_ + " " + why + " (CRC recovery out of step)");
    return;
  }
  MCCL_LOG(warn, peer_name_ << " found a CRC32C mismatch in " << chunk_text(f->header)
                 << ": sending it again");
  if (init_.recorder)
    init_.recorder->reaction("retransmit", init_.peer, key_of(f->header),
                             "link frame " + std::to_string(index) + " sent again after a NACK");
  tx_item item;
  wire::encode_header(f->header, item.header);
  item.data = f->payload.data(); // kept until acked, which cannot precede its arrival
  item.len = f->payload.size();
  txq_.push_back(std::move(item));
  last_activity_ = clock::now();
  write_frames();
  kick();
}

void link_actor::crc_give_up(const wire::frame_header& h, const std::string& why) {
  crc_failed_ = true;
  auto text = "CRC32C recovery failed on the link from rank " + std::to_string(init_.peer)
              + " to rank " + std::to_string(init_.rank) + " (" + chunk_text(h) + "): " + why;
  if (init_.recorder)
    init_.recorder->reaction("crc_budget_exhausted", init_.peer, key_of(h), text);
  MCCL_LOG(error, text);
  // The communicator aborts: every rank, the sender included, learns why.
  send(init_.progress, op_failed_atom::value, errc::protocol_error, text);
}

uint8_t* link_actor::land(const wire::frame_header& h) {
  // Only data frames of this communicator's routed collectives; the
  // landing map checks the op's signature and the chunk's place and size.
  if (h.kind != wire::frame_kind::data || (h.flags & wire::flag_p2p) || h.payload_len == 0
      || h.comm_id != init_.comm_id || aborted_)
    return nullptr;
  auto i = landings_.find(h.seq);
  return i == landings_.end() ? nullptr : i->second->claim(init_.peer, h);
}

void link_actor::stop_landing(const uint64_t* seq) {
  if (!in_payload_ || !cur_land_ || (seq && cur_.seq != *seq))
    return;
  // The rest of this payload must not reach the caller's buffer any more:
  // read it into scratch memory and drop the frame.
  cur_land_ = nullptr;
  cur_discard_ = true;
  cur_buf_ = init_.pool->acquire(cur_.payload_len);
}

void link_actor::dispatch_data(rx_chunk chunk) {
  auto i = routes_.find(chunk.header.seq);
  if (i != routes_.end()) {
    send(i->second, chunk_atom::value, std::move(chunk));
    return;
  }
  // The peer is ahead of us: keep the chunk until our op with this seq starts.
  if (!keep_early(chunk.header.payload_len, chunk.header.seq, "chunks for ops this rank has not started"))
    return;
  early_[chunk.header.seq].push_back(std::move(chunk));
}

std::size_t link_actor::write_frames() {
  std::size_t total = 0;
  if (resuming_ || !have_connection())
    return total;
  while (!txq_.empty() && !closed_) {
    iovec iov[max_iov];
    int n = transport::gather_frames(txq_, iov, max_iov);
    auto r = init_.conn->write_some(iov, n);
    if (!r.error.empty()) {
      // Read what the peer sent before it went away (an ABORT frame naming
      // the real cause, or its BYE) so it is reported before our loss.
      auto why = "sending to " + peer_name_ + " failed: " + r.error;
      if (init_.reconnect.count() > 0 && init_.resumer) {
        lost(why); // everything unacked is sent again on the resumed connection
        return total;
      }
      txq_.clear();
      read_frames();
      fail(why);
      return total;
    }
    if (r.bytes == 0)
      break;
    total += r.bytes;
    last_tx_ = clock::now();
    transport::account_written(txq_, r.bytes, [&](tx_item& done) {
      if (done.notify)
        send(done.notify, sent_atom::value, init_.peer, done.step, done.chunk);
    });
  }
  return total;
}

void link_actor::enqueue_control(wire::frame_kind kind, uint32_t aux, std::vector<uint8_t> payload,
                                 uint64_t seq, uint32_t step) {
  tx_item item;
  wire::frame_header h;
  h.kind = kind;
  h.seq = seq;
  h.step = step;
  h.comm_id = init_.comm_id;
  h.aux = aux;
  h.payload_len = static_cast<uint32_t>(payload.size());
  wire::encode_header(h, item.header);
  item.owned = std::move(payload);
  item.data = item.owned.data();
  item.len = item.owned.size();
  txq_.push_back(std::move(item));
}

void link_actor::purge_queued_data() {
  // Drop every frame that has not started; the one on the wire must finish
  // (the stream would be corrupt otherwise), so copy its remaining payload:
  // after this the link holds no pointer into any caller's buffer.
  if (txq_.empty())
    return;
  auto front = std::move(txq_.front());
  txq_.clear();
  if (front.written == 0)
    return;
  if (front.owned.empty() && front.len > 0) {
    front.owned.assign(front.data, front.data + front.len);
    front.data = front.owned.data();
  }
  front.notify = nullptr;
  txq_.push_back(std::move(front));
}

// ---- resuming a lost connection --------------------------------------------------

void link_actor::lost(const std::string& why) {
  if (closed_ || resuming_)
    return;
  bool may_resume = init_.reconnect.count() > 0 && init_.resumer && init_.crc && !aborted_
                    && !crc_failed_ && !shutdown_wait_.pending();
  if (!may_resume) {
    fail(why);
    return;
  }
  auto now = clock::now();
  resuming_ = true;
  awaiting_resume_count_ = false;
  resume_cause_ = why;
  resume_started_ = now;
  init_.conn->close();
  // Frames not (fully) written are dropped here: each data frame has its
  // copy in crc_tx_ (the caller may reuse its buffer), and on_resume_count
  // sends every one the peer did not receive. Control frames (acks,
  // heartbeats) are stale on a new connection.
  for (auto& item : txq_)
    if (item.notify)
      send(item.notify, sent_atom::value, init_.peer, item.step, item.chunk);
  txq_.clear();
  // A half-read frame is read again from its start after the resume.
  in_payload_ = false;
  cur_buf_.reset();
  cur_land_ = nullptr;
  cur_discard_ = false;
  cur_have_ = 0;
  stage_begin_ = stage_end_ = 0;
  read_armed_ = write_armed_ = false;
  poll_queued_ = false;
  MCCL_LOG(warn, "link to " << peer_name_ << " lost (" << why << "): re-establishing it within "
                              "MCCL_RECONNECT_MS=" << init_.reconnect.count());
  if (init_.recorder)
    init_.recorder->reaction("reconnect", init_.peer, {},
                             "attempt: connection lost (" + why + "), resuming within "
                               "MCCL_RECONNECT_MS=" + std::to_string(init_.reconnect.count()));
  caf::actor self = caf::actor_cast<caf::actor>(this);
  init_.resumer->resume(init_.peer, now + init_.reconnect,
                        [self](transport::connection_ptr conn, const std::string& reason) {
                          caf::anon_send(self, resumed_atom::value, std::move(conn), reason);
                        });
}

void link_actor::stop_resuming() {
  if (resuming_ && init_.resumer)
    init_.resumer->cancel(init_.peer);
  resuming_ = false;
  awaiting_resume_count_ = false;
}

void link_actor::on_resumed(transport::connection_ptr conn, const std::string& why) {
  if (!resuming_ || closed_ || aborted_) {
    if (conn)
      conn->close();
    return;
  }
  resuming_ = false;
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - resume_started_);
  if (!conn) {
    auto text = resume_cause_ + "; not re-established within MCCL_RECONNECT_MS="
                + std::to_string(init_.reconnect.count()) + " (" + why + ")";
    if (init_.recorder)
      init_.recorder->reaction("reconnect", init_.peer, {},
                               "failed after " + std::to_string(waited.count()) + " ms: " + why);
    fail(text);
    return;
  }
  init_.conn = init_.conn->resumed(std::move(conn));
  // Tell the peer how many of its frames arrived in order; it sends the rest
  // again. Our own data waits until its count arrives (on_resume_count).
  uint64_t in_order = crc_rx_.resume();
  crc_acked_ = in_order;
  awaiting_resume_count_ = true;
  enqueue_control(wire::frame_kind::crc_ack, 0, {}, in_order);
  last_rx_ = last_tx_ = last_activity_ = clock::now();
  write_frames();
  kick();
}

void link_actor::on_resume_count(uint64_t count) {
  awaiting_resume_count_ = false;
  std::string why;
  auto* frames = crc_tx_.resume_from(count, &why);
  if (!frames) {
    fail(peer_name_ + " cannot resume the link: " + why);
    return;
  }
  for (const auto& f : *frames) {
    tx_item item;
    wire::encode_header(f.header, item.header);
    item.data = f.payload.data();
    item.len = f.payload.size();
    item.step = f.header.step;
    item.chunk = f.header.chunk;
    txq_.push_back(std::move(item));
  }
  ++resumes_;
  auto healed = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - resume_started_);
  MCCL_LOG(warn, "link to " << peer_name_ << " resumed after " << healed.count() << " ms; sending "
                            << frames->size() << " unacknowledged frame(s) again");
  if (init_.recorder)
    init_.recorder->reaction("reconnect", init_.peer, {},
                             "success: resumed after " + std::to_string(healed.count())
                               + " ms (resume #" + std::to_string(resumes_) + "), "
                               + std::to_string(frames->size()) + " frame(s) sent again");
  write_frames();
  kick();
}

void link_actor::fail(const std::string& why, bool graceful, uint64_t issued) {
  stop_resuming();
  if (closed_)
    return;
  closed_ = true;
  lost_ = !graceful;
  close_reason_ = why;
  txq_.clear(); // nothing more will be written: no pointer into caller memory survives
  crc_tx_.clear();
  init_.conn->close();
  if (init_.recorder)
    init_.recorder->reaction(graceful ? "peer_finalized" : "link_down", init_.peer, {}, why);
  if (graceful)
    MCCL_LOG(info, why);
  else
    MCCL_LOG(warn, "link to " << peer_name_ << " is down: " << why);
  send(init_.progress, link_down_atom::value, init_.peer, why, graceful, issued);
  // Receives still waiting for a message from this peer will never match.
  for (auto& p : posted_)
    send(p.receiver, fail_atom::value, errc::peer_lost,
         "rank " + std::to_string(init_.peer) + " sent no message with tag " + std::to_string(p.tag)
           + " before its link closed: " + why);
  posted_.clear();
}

} // namespace mccl::actors
