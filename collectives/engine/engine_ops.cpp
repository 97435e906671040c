// The engine's ops: starting them, routing frames to them, ending them, and
// the communicator-wide failure state (abort, lost and departed peers,
// deadlines, liveness). Everything here runs in the leader (engine.hpp).

#include "collectives/engine/engine.hpp"

#include "collectives/engine/engine_op.hpp"
#include "collectives/extension/registry.hpp"
#include "config/log.hpp"

#include <algorithm>
#include <cstring>

namespace mccl {

namespace {
/// Bytes of collectives that may run at once before the next waits (see
/// engine::admit()); a larger one runs alone.
constexpr std::size_t collective_window = std::size_t{1} << 20;
/// Chunks of ops this rank has not started yet, kept at most.
constexpr std::size_t max_early_bytes = std::size_t{2} << 30;

/// memmove: in-place forms may pass overlapping buffers.
void copy_elems(void* dst, const void* src, std::size_t elems, std::size_t elem_size) {
  if (elems == 0 || !dst || !src || dst == src)
    return;
  std::memmove(dst, src, elems * elem_size);
}

bool is_p2p(op_kind k) noexcept { return k == op_kind::send || k == op_kind::recv; }
} // namespace

// ---- starting ----------------------------------------------------------------------

void engine::refuse(const op_ptr& op, errc code, const std::string& why) {
  auto what = describe(*op);
  op_report r;
  r.code = code;
  r.message = what.substr(0, what.find('(')) + (is_p2p(op->kind) ? "" : " seq " + std::to_string(op->seq))
              + " on rank " + std::to_string(opts_.rank) + ": " + why;
  r.seq = op->seq;
  r.bytes = op->selection_bytes(opts_.world);
  r.driver = leader_kind_;
  completions_.emplace_back(op, std::move(r));
}

bool engine::complete_locally(const op_ptr& op) {
  // A group of one needs no communication: each op is a copy (or nothing).
  // Custom collectives decide for themselves.
  if (opts_.world != 1 || op->kind == op_kind::custom)
    return false;
  auto e = op->elem_size();
  switch (op->kind) {
    case op_kind::allreduce:
    case op_kind::broadcast:
    case op_kind::reduce:
      copy_elems(op->recv, op->send, op->count, e);
      break;
    case op_kind::allgather:
    case op_kind::gather:
    case op_kind::alltoall:
    case op_kind::reduce_scatter:
    case op_kind::scatter:
      copy_elems(op->recv, op->send, op->count_of(0), e);
      break;
    default:
      break;
  }
  op_report r;
  r.algorithm = "local";
  r.seq = op->seq;
  r.bytes = op->selection_bytes(1);
  r.driver = leader_kind_;
  completions_.emplace_back(op, std::move(r));
  return true;
}

void engine::admit(op_ptr op) {
  // Large collectives issued together (DDP's gradient buckets) run one
  // after the other, each started in the pass where the previous one ends:
  // running them side by side made each compete with the other for cores
  // and caches, and the batch ran slower than one by one (measured: 8 x 1
  // MiB allreduces, 2 ranks, with a 2 MiB window ~5% slower than one by
  // one, with 1 MiB ~2% faster). Small ones still overlap up to
  // collective_window bytes. Point-to-point ops never wait: a receive may
  // be what lets a peer's collective end.
  auto bytes = op->selection_bytes(opts_.world);
  if (!is_p2p(op->kind)
      && (!held_.empty() || (running_bytes_ > 0 && running_bytes_ + bytes > collective_window))) {
    held_.emplace_back(std::move(op), bytes);
    return;
  }
  start(std::move(op), bytes, now_); // posted ops start at the beginning of a pass
}

void engine::admit_held() {
  while (!held_.empty()) {
    auto bytes = held_.front().second;
    if (running_bytes_ > 0 && running_bytes_ + bytes > collective_window && !aborted_ && !shut_down_)
      return;
    auto op = std::move(held_.front().first);
    held_.pop_front();
    start(std::move(op), bytes, opts_.now());
  }
}

void engine::start(op_ptr op, std::size_t bytes, clock::time_point now) {
  bool p2p = is_p2p(op->kind);
  if (shut_down_)
    return refuse(op, errc::finalized, "the communicator was finalized");
  if (aborted_)
    return refuse(op, abort_code_, abort_reason_);
  if (revoke_.active) // issued before this rank learned of the revoke, started after: no rank completed it
    return refuse(op, errc::revoked, revoke_failure());
  if (!p2p)
    next_start_seq_ = std::max(next_start_seq_, op->seq + 1);
  if (complete_locally(op))
    return;
  // A peer that finalized took part in every op it issued (its bytes for
  // them came before its BYE); later ops cannot involve it. Its
  // point-to-point messages may still wait here to be received.
  for (const auto& [peer, issued] : departed_)
    if ((!p2p && op->seq >= issued) || (op->kind == op_kind::send && op->root == peer)) {
      auto why = "rank " + std::to_string(peer) + " has already finalized (after issuing " + std::to_string(issued)
                 + " op(s))";
      refuse(op, errc::peer_lost, why);
      // A collective without it never completes: the member is lost to the
      // group, and the supervisor revokes (revoked() holds before the
      // refusal completes, when the leader lets go).
      if (!p2p)
        found_lost(peer, errc::peer_lost, "lost rank " + std::to_string(peer) + ": " + why);
      return;
    }
  std::string why;
  errc refusal = errc::internal;
  auto [name, factory] = select_algorithm(*op, opts_.world, opts_.cfg, &why, &refusal, &algorithms_);
  if (!factory)
    return refuse(op, refusal, why);

  collective_args args;
  args.rank = opts_.rank;
  args.world = opts_.world;
  args.op = *op; // the request alone: the session never completes the Work itself
  args.chunk_bytes = opts_.cfg.chunk_bytes;
  args.host_of = host_of_;
  auto owned = std::make_unique<engine_op>(*this, op, bytes, std::move(args), name, std::move(factory), now);
  auto& eo = *owned;
  ops_.emplace(op->id, std::move(owned));
  if (opts_.flight)
    eo.ticket = opts_.flight->started(recorded_op(*op, opts_.world, name, leader_kind_));
  if (!p2p)
    running_bytes_ += bytes;
  MCCL_LOG(debug, describe(*op) << (p2p ? "" : " seq " + std::to_string(op->seq)) << ": " << name);
  if (!p2p)
    routes_[op->seq] = &eo;
  if (chunk_faults_)
    eo.drop_duplicates(); // chunks may come twice: a copy is dropped, not an error
  eo.runner = runners_->runner_for(eo);
  eo.runner->start(take_early(eo));
  if (eo.reported())
    return;
  if (op->kind == op_kind::recv) {
    auto peer = op->root;
    bool unmatched = true; // without a link, nothing ever matches it
    if (const auto* m = matcher_of(peer)) {
      auto waiting = m->waiting_receivers();
      unmatched = std::find(waiting.begin(), waiting.end(), op->id) != waiting.end();
    }
    const auto& ch = links_[peer];
    if (unmatched && !eo.reported() && (!ch || ch->current() == transport::channel::state::closed))
      fail(eo, errc::peer_lost, "rank " + std::to_string(peer) + " sent no message with tag "
                                 + std::to_string(op->tag) + " before its link closed");
    return;
  }
}

std::vector<transport::received_frame> engine::take_early(engine_op& op) {
  std::vector<transport::received_frame> frames;
  const auto& request = *op.request;
  if (request.kind == op_kind::recv) {
    // A receive is posted with its peer's matcher here (later frames for its
    // tag are routed to it) and takes the message the matcher kept for that
    // tag, if any; the post may also match earlier receives, which get
    // theirs as usual. (Without a link to the peer start() fails it.)
    auto* matcher = matcher_of(request.root);
    auto posted = matcher ? matcher->post(request.tag, request.id) : std::vector<p2p_matcher::match>{};
    for (auto& m : posted) {
      if (m.receiver != request.id) {
        std::vector<p2p_matcher::match> others{std::move(m)};
        deliver_matches(others);
        continue;
      }
      for (auto& f : m.frames)
        frames.push_back(std::move(f));
    }
  } else if (!is_p2p(request.kind)) {
    // Each link holds what its peer sent ahead of us (route()).
    if (early_frames_ > 0) {
      for (auto& link : links_)
        if (link)
          early_bytes_ -= link->take_early(request.seq, frames);
      early_frames_ -= frames.size();
    }
  }
  if (opts_.trace)
    for (const auto& f : frames)
      opts_.trace->chunk(false, f.peer, f.header.seq, f.header.step, f.header.chunk, f.header.payload_len,
                         opts_.now());
  return frames;
}

// ---- routing frames ----------------------------------------------------------------

uint8_t* engine::landing_for(int peer, const wire::frame_header& h) {
  if (aborted_ || (h.flags & wire::flag_p2p))
    return nullptr;
  auto r = routes_.find(h.seq);
  if (r == routes_.end() || r->second->reported())
    return nullptr;
  auto* spots = r->second->spots();
  return spots ? spots->claim(peer, h) : nullptr;
}

void engine::deliver(engine_op& op, transport::received_frame& f) {
  if (opts_.trace)
    opts_.trace->chunk(false, f.peer, f.header.seq, f.header.step, f.header.chunk,
                       f.header.payload_len, opts_.now());
  op.runner->chunk(f);
}

void engine::deliver_matches(std::vector<p2p_matcher::match>& matches) {
  for (auto& m : matches) {
    auto o = ops_.find(m.receiver);
    if (o == ops_.end())
      continue;
    for (auto& f : m.frames)
      if (!o->second->reported())
        deliver(*o->second, f);
  }
}

void engine::on_frame(transport::received_frame f) {
  // The one place where a frame that arrived becomes a chunk for its op:
  // a scenario's chunk faults act here, and only when it has some.
  if (chunk_faults_)
    return chunk_faults_->admit(std::move(f), now_, route_fn_);
  route(std::move(f));
}

void engine::route(transport::received_frame f) {
  if (aborted_ || shut_down_)
    return;
  auto peer = f.peer;
  auto seq = f.header.seq;
  if (f.header.flags & wire::flag_p2p) {
    std::vector<p2p_matcher::match> matched;
    auto receiver = links_[static_cast<std::size_t>(peer)]->matcher().on_frame(f, &matched);
    if (receiver != 0) {
      // A receive that ended ignores it, as a collective does, and counts
      // it when it looks for copies (op_session::drop_duplicates).
      auto o = ops_.find(receiver);
      if (o != ops_.end())
        deliver(*o->second, f);
      return;
    }
    deliver_matches(matched); // kept as unexpected, or matched by a waiting receive right away
    check_kept(peer, seq, "point-to-point messages nobody received yet");
    return;
  }
  auto r = routes_.find(seq);
  if (r != routes_.end())
    return deliver(*r->second, f);
  if (seq < next_start_seq_)
    return; // a frame of an op that ended here (a retransmitted copy): nobody wants it
  // The peer is ahead of us: its link keeps the chunk until our op with
  // this seq starts.
  early_bytes_ += f.header.payload_len;
  ++early_frames_;
  links_[static_cast<std::size_t>(peer)]->hold_early(std::move(f));
  check_kept(peer, seq, "chunks for ops this rank has not started");
}

void engine::check_kept(int peer, uint64_t seq, const char* what) {
  auto kept = early_bytes_;
  for (const auto& link : links_)
    if (link)
      kept += link->matcher().kept_bytes();
  if (kept > max_early_bytes)
    abort(errc::protocol_error, peer_name(peer) + " sent more than 2 GiB of " + what + " (seq "
                                  + std::to_string(seq) + "); are all ranks issuing the same operations?",
          opts_.rank);
}

void engine::on_sent(int peer, const transport::frame_ref& ref) {
  auto o = ops_.find(ref.owner);
  if (o != ops_.end() && !o->second->reported())
    o->second->runner->sent(peer, ref.step, ref.chunk);
}

void engine::send_frame(engine_op& op, int peer, const wire::frame_header& h, const uint8_t* data,
                        std::size_t len) {
  if (peer < 0 || peer >= opts_.world || !links_[static_cast<std::size_t>(peer)])
    throw error(errc::internal, "algorithm " + op.algorithm_name() + " sends to rank "
                                  + std::to_string(peer) + ", which has no connection");
  outgoing_chunk chunk{h, data, len, transport::frame_ref{op.request->id, h.step, h.chunk}};
  if (opts_.links != nullptr)
    opts_.links->hand(peer, chunk);
  else
    queue_chunk(peer, chunk);
}

void engine::queue_chunk(int peer, const outgoing_chunk& chunk) {
  auto& link = links_[static_cast<std::size_t>(peer)];
  if (link->send(chunk.header, chunk.data, chunk.len, chunk.ref)) {
    note_queued(peer);
    return;
  }
  // The channel is closed. A peer that finalized never takes this frame; a
  // lost one is blamed once its grace period ends (or an ABORT explains it).
  // (Revoking: only an op past the revoke point can still send to a peer
  // that finished; the revoke fails it.)
  if (!departed_.count(peer) || revoke_.active)
    return;
  auto o = ops_.find(chunk.ref.owner);
  if (o != ops_.end() && !o->second->reported())
    fail(*o->second, errc::peer_lost, peer_name(peer) + " finalized before receiving this op's frames");
}

// ---- ending ------------------------------------------------------------------------

void engine::fail(engine_op& op, errc code, const std::string& why) {
  op.runner->fail(code, why);
}

void engine::reported(engine_op& op) {
  reported_.push_back(&op);
}

void engine::settle() {
  if (reported_.empty())
    return;
  // The pass's clock (now_) is older than the op's end: durations use a
  // fresh reading.
  auto ended = opts_.now();
  // Aborting below may report more ops: they are appended and handled too.
  for (std::size_t next = 0; next < reported_.size(); ++next) {
    auto* op = reported_[next];
    // A failed op aborts the communicator before it completes: every peer
    // learns why, and no channel points into any op's memory any more.
    if (op->code != errc::none && !aborted_) {
      MCCL_LOG(error, op->message);
      // Revoked for a lost member: the ABORT revokes the peers too.
      abort(op->code, op->message, opts_.rank, {}, revoked_lost_.load());
    }
    auto request = op->request;
    if (op->is_p2p()) {
      if (request->kind == op_kind::recv)
        if (auto* m = matcher_of(request->root))
          m->forget(request->id);
    } else {
      routes_.erase(request->seq);
      running_bytes_ -= op->bytes;
    }
    if (opts_.flight)
      opts_.flight->ended(op->ticket, op->code == errc::none ? flight_recorder::state::done
                                                             : flight_recorder::state::failed);
    op_report r;
    r.code = op->code;
    r.message = std::move(op->message);
    if (r.code == errc::timeout && opts_.flight)
      r.message += " (" + opts_.flight->progress_note() + ")";
    r.algorithm = op->algorithm_name();
    r.seq = request->seq;
    r.bytes = op->bytes;
    r.wire_bytes = op->payload_sent();
    r.duration = ended - op->started;
    if (opts_.trace)
      opts_.trace->op(op->request->kind == op_kind::custom ? op->request->name : to_string(op->request->kind),
                      !op->is_p2p(), request->seq, r.algorithm, r.bytes, r.wire_bytes, op->started,
                      ended, r.code == errc::none);
    r.driver = leader_kind_;
    if (!hold_for_revoke(request, r)) // while revoking, held until the revoke point is agreed
      completions_.emplace_back(request, std::move(r));
    ops_.erase(request->id);
  }
  reported_.clear();
  if (!held_.empty())
    admit_held();
  if (revoke_decided_.load() && !revoke_.finished) {
    maybe_finish_revoke(); // the last op below the revoke point may just have ended
    if (!reported_.empty())
      settle();
  }
}

void engine::abort(errc code, const std::string& why, int origin, const std::string& wire_text, bool revokes) {
  if (aborted_ || shut_down_)
    return;
  aborted_ = true;
  lost_.peer = -1; // whatever the supervisor answers, every op fails now
  abort_code_ = code;
  abort_reason_ = why;
  drop_held_for_revoke(code, why);
  {
    std::lock_guard<std::mutex> guard{closed_mutex_};
    if (!closed_.exchange(true)) {
      closed_why_ = why;
      closed_code_ = code;
    }
  }
  MCCL_LOG(error, "rank " << opts_.rank << ": communicator " << opts_.comm_id << " aborted: " << why);
  if (opts_.flight && opts_.flight->capacity() > 0) {
    opts_.flight->abort_running();
    MCCL_LOG(error, opts_.flight->dump(opts_.rank, opts_.comm_id, "dumped as the communicator aborted"));
  }
  // Tell every peer, and drop every pointer into ops' memory, before any op
  // completes (a caller may free its buffer once wait() returns).
  for (auto& c : links_)
    if (c)
      c->abort(origin, code, wire_text.empty() ? why : wire_text,
               code == errc::revoked && revoke_decided_.load() ? revoke_point_.load() : 0, revokes);
  queued_to_all_ = true;
  for (auto& link : links_)
    if (link)
      link->drop_early();
  early_bytes_ = 0;
  early_frames_ = 0;
  if (chunk_faults_)
    chunk_faults_->clear();
  for (auto& [id, op] : ops_)
    if (!op->reported())
      fail(*op, code, why);
  admit_held(); // held collectives are refused now, in issue order
  listener_.aborted(code, why, origin);
}

void engine::on_peer_abort(int peer, int origin, errc code, const std::string& reason, uint64_t revoke_point,
                           bool revokes) {
  // The peer finished its part of the revoke: every frame it owed the ops
  // below the revoke point came before this ABORT. Ours go on. Its REVOKE
  // frame may never have come (an abort drops the frames not yet begun):
  // the point it agreed, the largest of all, stands in for it.
  if (code == errc::revoked && peer_done_revoking(peer, revoke_point))
    return;
  // A lost member's revoke: revoked before any op fails here, so a caller
  // whose wait() throws sees revoked(); passed on to every peer alike.
  if (revokes && !aborted_ && !shut_down_)
    mark_revoked(origin, reason, true);
  abort(code, "rank " + std::to_string(origin) + " aborted the communicator: " + reason, origin, reason, revokes);
}

void engine::on_peer_bye(int peer, uint64_t issued) {
  // Every byte the peer sent came before its BYE: ops it issued have all
  // they will get from it. Ops it never issued cannot finish.
  departed_[peer] = issued;
  // Revoking: the peer completed what it owed the ops below the revoke
  // point before its BYE (it waited for them); the revoke ends the others.
  if (peer_done_revoking(peer))
    return;
  std::vector<std::pair<engine_op*, std::string>> doomed;
  for (auto& [id, op] : ops_) {
    if (op->reported())
      continue;
    const auto& r = *op->request;
    if (r.kind == op_kind::send && r.root == peer)
      doomed.emplace_back(op.get(), "rank " + std::to_string(peer) + " finalized before receiving this message");
    else if (!op->is_p2p() && r.seq >= issued)
      doomed.emplace_back(op.get(), "rank " + std::to_string(peer) + " finalized after issuing "
                                      + std::to_string(issued)
                                      + " collective(s); it never issued this one (do all ranks issue the same "
                                        "collectives?)");
  }
  // Receives still waiting for a message from it never match.
  for (auto receiver : links_[static_cast<std::size_t>(peer)]->matcher().waiting_receivers()) {
    auto o = ops_.find(receiver);
    if (o != ops_.end() && !o->second->reported())
      doomed.emplace_back(o->second.get(), "rank " + std::to_string(peer) + " sent no message with tag "
                                             + std::to_string(o->second->request->tag)
                                             + " before its link closed: it finalized");
  }
  if (doomed.empty())
    return; // it left after everything it took part in: a finalize, not a loss
  // Ops wait on a member that left: it is lost to them. Those ops fail at
  // once, each saying what it missed (the peer's BYE leaves no doubt), and
  // the abort that follows revokes the communicator on every rank
  // (settle()); the link actor exits with the finding all the same, so the
  // supervisor hears of it.
  if (!aborted_ && !shut_down_) {
    mark_revoked(opts_.rank, "lost rank " + std::to_string(peer) + ": " + doomed.front().second, true);
    listener_.peer_failed(peer, errc::peer_lost, "lost rank " + std::to_string(peer) + ": " + doomed.front().second);
  }
  for (auto& [op, why] : doomed)
    fail(*op, errc::peer_lost, why);
}

void engine::on_down(int peer, transport::down_kind kind, errc code, const std::string& why) {
  if (kind == transport::down_kind::resumable) {
    listener_.link_lost(peer, why);
    return;
  }
  if (revoking_without(peer))
    return; // it finished its part of the revoke and let go of its link
  auto text = "lost rank " + std::to_string(peer) + ": " + why;
  if (kind == transport::down_kind::error) {
    found_lost(peer, code, text);
    return;
  }
  // A peer that aborted because a third rank died may close its connection
  // before we read its ABORT, which names the rank that really failed: wait
  // briefly for such a frame before blaming `peer`.
  if (aborted_)
    return;
  if (pending_loss_peer_ >= 0) {
    // Lost while the first waits: named beside it. A rank that left because
    // another died (a newcomer whose setup failed with the store of the
    // rank that crashed, without an ABORT) closes at the same moment as
    // that one, and which of the two this rank reads first is chance; the
    // report names both. Three at most: a lost host takes many at once.
    constexpr std::size_t named_at_most = 3;
    if (peer == pending_loss_peer_ || std::find(also_lost_.begin(), also_lost_.end(), peer) != also_lost_.end())
      return;
    also_lost_.push_back(peer);
    if (also_lost_.size() <= named_at_most)
      pending_loss_why_ += "; " + text;
    else if (also_lost_.size() == named_at_most + 1)
      pending_loss_why_ += "; and more";
    return;
  }
  pending_loss_peer_ = peer;
  pending_loss_why_ = text;
  pending_loss_at_ = now_;
  also_lost_.clear();
}

void engine::on_fatal(int peer, errc code, const std::string& why) {
  found_lost(peer, code, why);
}

// ---- lost members -----------------------------------------------------------------

void engine::found_lost(int peer, errc code, const std::string& text, bool silent, const std::string& silent_why) {
  if (aborted_ || shut_down_ || lost_.peer >= 0)
    return; // one lost member at a time: its revoke ends every op
  // Revoked before any op fails: a caller whose wait() throws for this
  // loss reads revoked() true, and nothing new starts meanwhile.
  mark_revoked(opts_.rank, text, true);
  lost_.peer = peer;
  lost_.code = code;
  lost_.text = text;
  lost_.silent = silent;
  lost_.silent_why = silent_why;
  lost_.due = now_ + supervisor_window;
  if (std::exchange(decided_lost_, -1) == peer) {
    member_lost(peer, code, text); // the supervisor decided already (a link not re-established)
    return;
  }
  // The link actor exits with this, and the supervisor revokes.
  listener_.peer_failed(peer, code, text);
}

void engine::member_lost(int peer, errc code, const std::string& why) {
  if (aborted_ || shut_down_ || peer < 0 || peer >= opts_.world)
    return;
  auto& ch = links_[static_cast<std::size_t>(peer)];
  if (lost_.peer != peer && ch && ch->current() == transport::channel::state::resuming) {
    // Its link was not re-established: the channel fails with why, and the
    // finding that follows (on_down) is this decision.
    decided_lost_ = peer;
    ch->resume_failed(why);
    decided_lost_ = -1;
    return;
  }
  auto found = std::exchange(lost_, lost_member{});
  bool ours = found.peer == peer;
  auto text = ours ? found.text : why;
  auto c = ours ? found.code : code;
  mark_revoked(opts_.rank, text, true);
  abort(c, text, opts_.rank, {}, true);
  if (ours && found.silent && ch) {
    // Every peer hears why, the silent one too: it may only be stopped,
    // and a rank that is continued reads the ABORT (or, over shared
    // memory, the note beside a full or cut ring) and says it was declared
    // dead, as its peers do. Its link then closes with what it could take.
    ch->write_now(now_);
    ch->fail(errc::peer_lost, found.silent_why);
  }
}

// ---- deadlines and liveness -------------------------------------------------------

void engine::check_health() {
  maybe_decide_revoke(); // the answers' window may have ended
  for (auto& [id, op] : ops_)
    if (!op->reported() && now_ >= op->deadline)
      fail(*op, errc::timeout,
               "timed out after MCCL_TIMEOUT_MS=" + std::to_string(op->timeout.count()) + " ms");
  auto misses = opts_.cfg.heartbeat_misses;
  if (misses == 0 || aborted_ || shut_down_)
    return;
  auto limit = opts_.cfg.heartbeat * misses;
  for (auto& c : links_) {
    if (!c || c->current() != transport::channel::state::open || now_ - c->last_rx() < limit)
      continue;
    auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now_ - c->last_rx());
    auto why = c->name() + " sent nothing for " + std::to_string(silent.count())
               + " ms (MCCL_HEARTBEAT_MS=" + std::to_string(opts_.cfg.heartbeat.count())
               + " x MCCL_HEARTBEAT_MISSES=" + std::to_string(misses)
               + "): declared dead (frozen, stopped or cut off)";
    if (opts_.faults)
      opts_.faults->reaction("heartbeat_dead", c->peer(), {}, why);
    // Its link actor exits with this and the supervisor revokes; then the
    // ABORT goes to every peer, the silent one too (member_lost()).
    found_lost(c->peer(), errc::peer_lost, "lost rank " + std::to_string(c->peer()) + ": " + why, true, why);
    return;
  }
}

} // namespace mccl
