#include "actors/inline_path.hpp"

#include "actors/messages.hpp"

#include "collectives/op_session.hpp"
#include "collectives/registry.hpp"
#include "transport/wire/frame_queue.hpp"

#include <caf/send.hpp>

#include <poll.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <thread>

namespace mccl::actors {

namespace {

using clock = std::chrono::steady_clock;

constexpr int max_iov = 32;
/// Receive space per connection: a whole small op plus its header in one
/// recv, and room for frames of the next op that may follow it.
constexpr std::size_t min_in_capacity = 128 * 1024;
/// A frame of the op with at least this much payload is read straight to
/// where it goes (see inline_channel::direct) instead of through `in`: one
/// copy of every byte less. Smaller frames share one recv through `in`.
constexpr std::size_t direct_read_min = 32 * 1024;
/// Longest single poll(2), so an abort from another thread is noticed soon.
constexpr auto poll_slice = std::chrono::milliseconds(100);

} // namespace

/// One borrowed connection while an inline op runs; kept between ops so its
/// receive buffer is allocated once.
struct inline_channel {
  int peer = -1;
  inline_peer* link = nullptr;
  std::string name; ///< "rank 1 at 127.0.0.1:4711"

  struct out_frame {
    uint8_t header[wire::header_size] = {};
    const uint8_t* data = nullptr;
    std::size_t len = 0;
    std::size_t written = 0; ///< of header + payload
    uint32_t step = 0;
    uint32_t chunk = 0;
    bool heartbeat = false; ///< ours, not the op's: no frame_sent for it
  };
  std::deque<out_frame> out;
  /// Liveness while the op waits (MCCL_HEARTBEAT_MS / _MISSES), as the link
  /// does it: we send heartbeats and watch the peer's silence.
  std::chrono::steady_clock::time_point last_rx, last_tx;

  std::vector<uint8_t> in; ///< bytes read; [in_begin, in_end) not yet consumed
  std::size_t in_begin = 0;
  std::size_t in_end = 0;
  /// Whole frames that belong to someone else, in stream order: they go
  /// back to the link, ahead of the unconsumed rest of `in`.
  std::vector<uint8_t> theirs;
  bool poke = false; ///< the link must look at what we hand back now
  /// The peer finalized (its BYE came) after taking part in this op: all it
  /// sent for the op came before, nothing more will.
  bool departed = false;
  bool aborted = false; ///< the peer's ABORT came: nothing more to read here
  bool lost = false;    ///< the connection failed without BYE or ABORT

  /// A large frame of this op whose payload is read straight to its
  /// destination: the caller's buffer when the algorithm marked the spot
  /// for receive in place (collectives/landing.hpp), else pooled memory the
  /// chunk is delivered in. While it is active `in` is empty: the rest of
  /// the payload is the next thing on the socket.
  struct direct_read {
    bool active = false;
    wire::frame_header header;
    uint8_t raw_header[wire::header_size] = {};
    uint8_t* dst = nullptr;
    std::shared_ptr<uint8_t> buffer; ///< set when dst is pooled, not landed
    std::size_t got = 0;             ///< payload bytes at dst so far
  } direct;
};

namespace {

class inline_op final : public op_session {
public:
  inline_op(const inline_init& init, collective_args args, std::string name,
            algorithm_factory factory, std::vector<inline_channel*> by_peer)
    : op_session(std::move(args), init.comm_id, std::move(name), std::move(factory)),
      init_(init), by_peer_(std::move(by_peer)) {
    for (auto* c : by_peer_)
      if (c)
        channels_.push_back(c);
    // Receive in place as the links do; one thread reads and runs the
    // algorithm here, so the map's lock is never contended.
    landing_ = std::make_shared<landing_map>(this->args().op.signature(this->args().world));
    large_frames_ = this->args().op.selection_bytes(this->args().world) >= 4 * direct_read_min;
  }

  void run(clock::time_point deadline) {
    auto idle_since = clock::now();
    auto next_keep_alive = idle_since + init_.cfg.heartbeat / 4;
    for (auto* c : channels_) {
      // The link watched the peer until it lent us the connection.
      auto seen = c->link->lease->last_rx;
      c->last_rx = seen == clock::time_point{} ? idle_since : std::min(seen, idle_since);
      c->last_tx = idle_since;
    }
    start_op();
    while (!reported()) {
      bool moved = false;
      for (auto* c : channels_)
        moved |= !reported() && write(*c);
      for (auto* c : channels_)
        moved |= !reported() && read(*c);
      if (reported())
        break;
      if (!moved && pending_abort_code_ != errc::none) {
        peer_aborted_ = true;
        fail(pending_abort_code_, pending_abort_);
        break;
      }
      auto now = clock::now();
      // By the clock, not by idleness: frames arriving (a peer's own
      // heartbeats) must not keep us from sending ours.
      if (now >= next_keep_alive) {
        keep_alive(now);
        next_keep_alive = now + init_.cfg.heartbeat / 4;
      }
      // Like the progress actor, give an ABORT that explains a lost
      // connection (naming the rank that really failed) time to arrive.
      if (!moved && lost_peer_ >= 0 && now >= lost_at_ + loss_grace) {
        fail(errc::peer_lost, lost_why_);
        break;
      }
      if (moved) {
        idle_since = now;
        continue;
      }
      if (now >= deadline) {
        fail(errc::timeout,
             "timed out after MCCL_TIMEOUT_MS=" + std::to_string(init_.cfg.timeout.count()) + " ms");
        break;
      }
      if (init_.shared->closed.load()) {
        fail(errc::aborted, "the communicator closed while the op ran: " + init_.shared->why_closed());
        break;
      }
      // Spin briefly (the peer's frames are usually microseconds away),
      // yielding so a peer that shares this core can run, then sleep in the
      // kernel until a connection is ready.
      if (now - idle_since >= init_.cfg.spin)
        wait(std::min<clock::time_point>(lost_peer_ >= 0 ? std::min(deadline, lost_at_ + loss_grace) : deadline,
                                         now + std::min<clock::duration>(poll_slice, init_.cfg.heartbeat / 2)));
      else
        std::this_thread::yield();
    }
  }

  errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  /// False when the failure came from a peer's ABORT, which the link
  /// reports to the progress actor itself (naming the rank that began it).
  bool progress_must_abort() const noexcept { return code_ != errc::none && !peer_aborted_; }

private:
  void emit(tx_request req) override {
    auto* c = by_peer_.at(static_cast<std::size_t>(req.peer));
    if (!c)
      throw error(errc::internal, "algorithm " + algorithm_name() + " sends to rank "
                                    + std::to_string(req.peer) + ", which has no connection");
    // No CRC here: with MCCL_TRANSPORT_CRC ops never run inline (the
    // retransmit state lives in the link, see communicator.cpp).
    req.header.payload_len = static_cast<uint32_t>(req.len);
    inline_channel::out_frame f;
    wire::encode_header(req.header, f.header);
    f.data = req.data;
    f.len = req.len;
    f.step = req.header.step;
    f.chunk = req.header.chunk;
    c->out.push_back(f);
  }

  /// While the op waits: heartbeats to peers we have not written to for
  /// half an interval, and a peer silent for MCCL_HEARTBEAT_MS x
  /// MCCL_HEARTBEAT_MISSES is declared dead (lose(): the op fails after the
  /// grace period unless an ABORT explains it).
  void keep_alive(clock::time_point now) {
    for (auto* c : channels_) {
      if (c->lost || c->departed || c->aborted)
        continue;
      if (c->out.empty() && now - c->last_tx >= init_.cfg.heartbeat / 2) {
        inline_channel::out_frame f;
        wire::frame_header h;
        h.kind = wire::frame_kind::heartbeat;
        h.comm_id = init_.comm_id;
        wire::encode_header(h, f.header);
        f.heartbeat = true;
        c->out.push_back(f);
      }
      auto limit = init_.cfg.heartbeat * init_.cfg.heartbeat_misses;
      if (init_.cfg.heartbeat_misses > 0 && now - c->last_rx >= limit) {
        auto why = c->name + " sent nothing for "
                   + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now - c->last_rx).count())
                   + " ms (MCCL_HEARTBEAT_MS=" + std::to_string(init_.cfg.heartbeat.count())
                   + " x MCCL_HEARTBEAT_MISSES=" + std::to_string(init_.cfg.heartbeat_misses)
                   + "): declared dead (frozen, stopped or cut off)";
        if (init_.recorder)
          init_.recorder->reaction("heartbeat_dead", c->peer, {}, why);
        lose(*c, why);
      }
    }
  }

  void report(errc code, std::string message) override {
    code_ = code;
    message_ = std::move(message);
  }

  /// Writes what the kernel takes; true when bytes moved.
  bool write(inline_channel& c) {
    bool moved = false;
    if (c.departed && !c.out.empty()) {
      fail(errc::peer_lost, c.name + " finalized before receiving this op's frames");
      return moved;
    }
    while (!c.out.empty() && !reported() && !c.lost) {
      iovec iov[max_iov];
      int n = transport::gather_frames(c.out, iov, max_iov);
      auto r = c.link->conn->write_some(iov, n);
      if (!r.error.empty()) {
        lose(c, "sending to " + c.name + " failed: " + r.error);
        return moved;
      }
      if (r.bytes == 0)
        return moved;
      moved = true;
      c.last_tx = clock::now();
      transport::account_written(c.out, r.bytes, [&](const inline_channel::out_frame& f) {
        if (!f.heartbeat)
          frame_sent(c.peer, f.step, f.chunk);
      });
    }
    return moved;
  }

  /// Consumes buffered frames, then reads more while there is any; true
  /// when bytes moved.
  bool read(inline_channel& c) {
    bool moved = false;
    while (!c.departed && !c.aborted && !c.lost) {
      auto& d = c.direct;
      if (!d.active) {
        consume(c);
        if (reported() || c.departed || c.aborted)
          return moved;
        if (!begin_direct(c))
          make_room(c);
      }
      auto r = d.active ? c.link->conn->read_some(d.dst + d.got, d.header.payload_len - d.got)
                        : c.link->conn->read_some(c.in.data() + c.in_end, read_limit(c));
      if (r.bytes > 0) {
        if (d.active) {
          d.got += r.bytes;
          if (d.got == d.header.payload_len)
            finish_direct(c);
        } else {
          c.in_end += r.bytes;
        }
        c.last_rx = clock::now();
        moved = true;
        continue;
      }
      if (r.closed)
        lose(c, r.error.empty() ? c.name + " closed the connection"
                                : "connection to " + c.name + " failed: " + r.error);
      return moved;
    }
    return moved;
  }

  /// How much to read into `in`. While an op whose frames are mostly large
  /// runs, only up to the end of the next header: its payload is then read
  /// straight to its destination (begin_direct) instead of being copied
  /// there from `in`. One more recv per frame saves a copy of up to
  /// min_in_capacity bytes.
  std::size_t read_limit(const inline_channel& c) const {
    auto room = c.in.size() - c.in_end;
    auto avail = c.in_end - c.in_begin;
    if (!large_frames_ || avail >= wire::header_size)
      return room;
    return std::min(room, wire::header_size - avail);
  }

  /// A data frame of the op this session runs.
  bool is_ours(const wire::frame_header& h) const {
    return h.kind == wire::frame_kind::data && !(h.flags & wire::flag_p2p) && h.comm_id == init_.comm_id
           && h.seq == args().op.seq;
  }

  /// Where an incoming chunk of ours goes: its landing spot, or pooled
  /// memory (returned in `buffer`).
  uint8_t* destination(int peer, const wire::frame_header& h, std::shared_ptr<uint8_t>& buffer) {
    if (auto* spot = landing_->claim(peer, h))
      return spot;
    buffer = init_.pool->acquire(h.payload_len);
    return buffer.get();
  }

  /// When `in` holds the header and the start of a large frame of ours,
  /// moves what is there to the frame's destination and reads the rest of
  /// the payload straight there. consume() has taken every whole frame, so
  /// a decodable header at the front starts an incomplete frame.
  bool begin_direct(inline_channel& c) {
    auto avail = c.in_end - c.in_begin;
    if (avail < wire::header_size)
      return false;
    const uint8_t* p = c.in.data() + c.in_begin;
    auto res = wire::decode_header(p, avail, init_.max_payload);
    if (res.status != wire::decode_status::ok)
      return false;
    const auto& h = res.header;
    if (!is_ours(h) || (h.flags & wire::flag_crc) || h.payload_len < direct_read_min
        || avail >= wire::header_size + h.payload_len)
      return false;
    auto& d = c.direct;
    d.header = h;
    std::memcpy(d.raw_header, p, wire::header_size);
    d.dst = destination(c.peer, h, d.buffer);
    d.got = avail - wire::header_size;
    std::memcpy(d.dst, p + wire::header_size, d.got);
    d.active = true;
    c.in_begin = c.in_end = 0;
    return true;
  }

  void finish_direct(inline_channel& c) {
    auto& d = c.direct;
    rx_chunk chunk{c.peer, d.header, std::move(d.buffer)};
    if (!chunk.buffer)
      chunk.landed = d.dst;
    d = inline_channel::direct_read{};
    deliver(chunk);
  }

  /// Stops using a failed connection; run() fails the op after the grace
  /// period unless an ABORT explains the loss first. The link sees the
  /// failure itself once it has the connection back.
  void lose(inline_channel& c, const std::string& why) {
    c.lost = true;
    if (lost_peer_ >= 0)
      return;
    lost_peer_ = c.peer;
    lost_at_ = clock::now();
    lost_why_ = "lost rank " + std::to_string(c.peer) + ": " + why;
  }

  /// Keeps unconsumed bytes at the front, with room for at least one whole
  /// frame after them.
  void make_room(inline_channel& c) {
    if (c.in_begin == c.in_end) {
      c.in_begin = c.in_end = 0;
    } else if (c.in_begin > 0) {
      std::memmove(c.in.data(), c.in.data() + c.in_begin, c.in_end - c.in_begin);
      c.in_end -= c.in_begin;
      c.in_begin = 0;
    }
    std::size_t want = c.in_end + wire::header_size;
    if (c.in_end >= wire::header_size) {
      auto res = wire::decode_header(c.in.data(), c.in_end, init_.max_payload);
      if (res.status == wire::decode_status::ok)
        want = std::max(want, wire::header_size + res.header.payload_len);
    }
    if (c.in.size() < std::max(want, min_in_capacity))
      c.in.resize(std::max(want, min_in_capacity));
  }

  void consume(inline_channel& c) {
    while (!reported()) {
      auto avail = c.in_end - c.in_begin;
      if (avail < wire::header_size)
        return;
      const uint8_t* p = c.in.data() + c.in_begin;
      auto res = wire::decode_header(p, avail, init_.max_payload);
      if (res.status != wire::decode_status::ok) {
        // Left unconsumed: the link parses it again and closes the connection.
        c.poke = true;
        return fail(errc::protocol_error, "malformed frame from " + c.name + ": " + res.reason);
      }
      const auto& h = res.header;
      auto total = wire::header_size + h.payload_len;
      if (avail < total)
        return;
      const uint8_t* payload = p + wire::header_size;
      bool ours = is_ours(h);
      if (h.kind == wire::frame_kind::data && (h.flags & wire::flag_crc)) {
        c.poke = true; // left unconsumed: the link refuses it too
        return fail(errc::invalid_config,
                    c.name + " sends CRC32C-checked frames but MCCL_TRANSPORT_CRC is off on rank "
                      + std::to_string(init_.rank)
                      + ": set MCCL_TRANSPORT_CRC to the same value on every rank");
      }
      if (ours) {
        rx_chunk chunk{c.peer, h, nullptr};
        if (h.payload_len > 0) {
          auto* dst = destination(c.peer, h, chunk.buffer);
          std::memcpy(dst, payload, h.payload_len);
          if (!chunk.buffer)
            chunk.landed = dst;
        }
        c.in_begin += total;
        deliver(chunk);
        continue;
      }
      if (h.kind != wire::frame_kind::heartbeat) {
        c.theirs.insert(c.theirs.end(), p, p + total);
        // A later collective's chunks wait for the next op; anything else
        // (point-to-point, ABORT, BYE, a foreign frame) the link handles now.
        if (h.kind != wire::frame_kind::data || (h.flags & wire::flag_p2p) || h.comm_id != init_.comm_id)
          c.poke = true;
      }
      c.in_begin += total;
      if (h.kind == wire::frame_kind::abort) {
        // Not failed at once: bytes already here may still complete the op
        // (the peer may have aborted over a later one). run() fails it with
        // this once nothing more can be read.
        std::string why;
        auto text = wire::decode_text(payload, h.payload_len, &why);
        if (pending_abort_code_ == errc::none) {
          pending_abort_code_ = wire::abort_code(h);
          pending_abort_ = "rank " + std::to_string(h.aux) + " aborted the communicator: "
                           + (text ? *text : "(unreadable reason: " + why + ")");
        }
        c.aborted = true; // nothing of this op follows an ABORT: stop reading
        return;
      }
      if (h.kind == wire::frame_kind::bye) {
        // BYE carries how many collectives the peer issued.
        if (h.seq <= args().op.seq)
          return fail(errc::peer_lost, c.name + " finalized after issuing " + std::to_string(h.seq)
                                         + " op(s); it never issued this one");
        c.departed = true;
        return;
      }
    }
  }

  void wait(clock::time_point until) {
    std::vector<pollfd> fds;
    fds.reserve(channels_.size());
    for (auto* c : channels_)
      fds.push_back(pollfd{c->link->conn->poll_fd(),
                           static_cast<short>(c->lost ? 0
                                              : (c->departed || c->aborted ? 0 : POLLIN)
                                                  | (c->out.empty() ? 0 : POLLOUT)),
                           0});
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - clock::now()).count() + 1;
    ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(ms, 0)));
  }

  const inline_init& init_;
  bool large_frames_ = false; ///< the op's frames are mostly direct_read_min or more
  std::vector<inline_channel*> by_peer_;
  std::vector<inline_channel*> channels_;
  errc code_ = errc::none;
  std::string message_;
  bool peer_aborted_ = false;
  int lost_peer_ = -1; ///< the first connection lost without BYE or ABORT
  clock::time_point lost_at_;
  std::string lost_why_;
  errc pending_abort_code_ = errc::none; ///< a peer's ABORT, failing the op unless it completes
  std::string pending_abort_;
};

} // namespace

inline_path::inline_path(inline_init init) : init_(std::move(init)) {
  channels_.resize(init_.peers.size());
  for (std::size_t p = 0; p < init_.peers.size(); ++p) {
    auto& peer = init_.peers[p];
    if (!peer.conn)
      continue;
    if (peer.conn->poll_fd() < 0 || !peer.lease)
      usable_ = false;
    channels_[p].peer = static_cast<int>(p);
    channels_[p].link = &peer;
    channels_[p].name = peer.conn->description();
  }
}

inline_path::~inline_path() = default;

bool inline_path::eligible(const op_request& op, std::size_t max_bytes) const {
  return usable_ && max_bytes > 0 && init_.world > 1 && op.kind != op_kind::send
         && op.kind != op_kind::recv && op.selection_bytes(init_.world) <= max_bytes
         && !init_.shared->closed.load();
}

bool inline_path::try_run(op_request& op, bool on_op_thread) {
  auto started = clock::now();
  // Borrow every connection or none.
  std::vector<inline_channel*> by_peer(init_.peers.size(), nullptr);
  auto give_back = [&] {
    for (auto* c : by_peer) {
      if (!c)
        continue;
      auto& lease = *c->link->lease;
      lease.last_rx = c->last_rx;
      lease.unread.assign(c->theirs.begin(), c->theirs.end());
      if (c->direct.active) {
        // The op ended inside a frame read straight to its destination:
        // the link gets the frame's start back, the rest is still on the
        // socket.
        auto& d = c->direct;
        lease.unread.insert(lease.unread.end(), d.raw_header, d.raw_header + wire::header_size);
        lease.unread.insert(lease.unread.end(), d.dst, d.dst + d.got);
        d = inline_channel::direct_read{};
      }
      lease.unread.insert(lease.unread.end(), c->in.begin() + static_cast<std::ptrdiff_t>(c->in_begin),
                          c->in.begin() + static_cast<std::ptrdiff_t>(c->in_end));
      if (!c->out.empty() && c->out.front().written > 0) {
        // Finish the frame on the wire (the op failed mid-frame): the link
        // writes the rest before anything else.
        auto& f = c->out.front();
        std::vector<uint8_t> bytes(f.header, f.header + wire::header_size);
        bytes.insert(bytes.end(), f.data, f.data + f.len);
        lease.unwritten.assign(bytes.begin() + static_cast<std::ptrdiff_t>(f.written), bytes.end());
      }
      c->out.clear();
      c->theirs.clear();
      c->in_begin = c->in_end = 0;
      c->departed = false;
      c->aborted = false;
      // Readiness notifications stay off: re-arming them after every op
      // woke the link (and the readiness thread) for the next op's frames
      // whenever a peer ran ahead, which on a loaded machine cost more than
      // the op. The link turns them on again when it takes the connection
      // back (link_lease::quiet): when it gets work, on its heartbeat tick,
      // or when poked here.
      lease.quiet = true;
      if (lease.give_back() || c->poke)
        caf::anon_send(c->link->link, returned_atom::value);
      c->poke = false;
    }
  };
  for (std::size_t p = 0; p < init_.peers.size(); ++p) {
    auto& peer = init_.peers[p];
    if (!peer.conn)
      continue;
    if (!peer.lease->borrow()) {
      give_back();
      return false;
    }
    auto& c = channels_[p];
    by_peer[p] = &c;
    peer.conn->suspend_notifications();
    // What the last holder read but did not consume comes first.
    auto& unread = peer.lease->unread;
    if (c.in.size() < std::max(unread.size(), min_in_capacity))
      c.in.resize(std::max(unread.size(), min_in_capacity));
    std::copy(unread.begin(), unread.end(), c.in.begin());
    c.in_begin = 0;
    c.in_end = unread.size();
    unread.clear();
    if (!peer.lease->unwritten.empty()) {
      give_back(); // a failed op's half frame: the link finishes it first
      return false;
    }
  }

  op.seq = init_.shared->next_seq.fetch_add(1);
  std::string why;
  auto [name, factory] = select_algorithm(op, init_.world, init_.cfg, &why);
  op.algorithm = name;
  auto& recorder = init_.shared->recorder;
  uint64_t ticket = recorder ? recorder->started(recorded_op(op, init_.world, name, true)) : 0;
  errc code = errc::none;
  std::string message;
  bool abort_communicator = false;
  if (!factory) {
    code = errc::internal;
    message = describe(op) + " seq " + std::to_string(op.seq) + " on rank " + std::to_string(init_.rank)
              + ": " + why;
  } else {
    collective_args args;
    args.rank = init_.rank;
    args.world = init_.world;
    args.op = op;
    args.op.work = nullptr;
    args.chunk_bytes = init_.cfg.chunk_bytes;
    inline_op run(init_, std::move(args), name, std::move(factory), by_peer);
    run.run(started + init_.cfg.timeout);
    code = run.code();
    message = run.message();
    abort_communicator = run.progress_must_abort();
  }
  give_back();
  if (recorder) {
    recorder->ended(ticket, code == errc::none ? flight_recorder::state::done
                                               : flight_recorder::state::failed);
    if (code == errc::timeout) // as on the actor path (progress_actor::with_progress_note)
      message += " (" + recorder->progress_note() + ")";
  }
  if (code != errc::none && (abort_communicator || !factory))
    caf::anon_send(init_.progress, op_failed_atom::value, code, message);

  op_metrics m;
  m.op = op.kind == op_kind::custom ? op.name : to_string(op.kind);
  m.algorithm = name;
  m.seq = op.seq;
  m.bytes = op.selection_bytes(init_.world);
  m.duration = clock::now() - started;
  m.inline_run = !on_op_thread;
  m.op_thread = on_op_thread;
  op.work->set_metrics(std::move(m));
  op.work->complete(code, std::move(message));
  return true;
}

} // namespace mccl::actors
