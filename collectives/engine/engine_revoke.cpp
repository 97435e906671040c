// Revoking a communicator (communicator::revoke): every rank stops issuing
// ops, the ranks agree on a revoke point, and every collective fails on all
// ranks or completes on all ranks. Everything here but the thread-safe
// readers runs in the leader (engine.hpp).
//
// The rule. A collective that needs every rank's part (allreduce,
// allgather, reduce_scatter, alltoall, barrier: every_rank_contributes)
// can only have completed on some rank if every rank issued it. So:
//
//   1. A rank that learns of the revoke (its own revoke(), or a peer's
//      REVOKE frame) stops accepting ops and sends every peer a REVOKE
//      frame carrying its point: 1 + the highest sequence number of such a
//      collective it completed. From then on it holds back the completion
//      of every collective that ends, and keeps running the ops in flight.
//   2. Once every peer's point is in (or the window, the liveness verdict
//      MCCL_HEARTBEAT_MS x MCCL_HEARTBEAT_MISSES, ended) the revoke point is
//      the largest of them. A collective below it completed on some rank
//      before that rank stopped, so every rank issued it and every rank
//      lets it run to its end; a collective at or above it completed
//      nowhere before the ranks stopped, and fails everywhere (a held
//      completion is turned into the failure).
//   3. Once the collectives below the point ended here, the communicator
//      closes as revoked: an abort with errc::revoked, which fails what is
//      left and sends ABORT, carrying the agreed point, to every peer (a
//      peer still waiting for this rank's point takes the agreed one, the
//      largest of all). A peer still finishing its ops below the point
//      ignores that ABORT: the data frames before it were all it needed
//      from this rank. An op completes once its frames left or were copied
//      into the channel's queue; this abort drops only frames that point
//      into ops' memory, so the copied ones (and the REVOKE) still go out
//      before it (transport::channel::abort).
//
// Rooted collectives (broadcast, reduce, gather, scatter), custom ones and
// point-to-point ops take part (below the point they run to their end), but
// a rank whose part of one needed nobody else (the root of a broadcast)
// may have completed it before the revoke while the others fail it.

#include "collectives/engine/engine.hpp"

#include "collectives/engine/engine_op.hpp"
#include "config/log.hpp"

namespace mccl {

bool every_rank_contributes(op_kind k) noexcept {
  return k == op_kind::allreduce || k == op_kind::allgather || k == op_kind::reduce_scatter
         || k == op_kind::alltoall || k == op_kind::barrier;
}

namespace {

bool is_collective(op_kind k) noexcept { return k != op_kind::send && k != op_kind::recv; }

void raise_to(std::atomic<uint64_t>& value, uint64_t at_least) noexcept {
  auto v = value.load();
  while (v < at_least && !value.compare_exchange_weak(v, at_least)) {
  }
}

} // namespace

// ---- any thread ---------------------------------------------------------------------

std::string engine::why_revoked() const {
  std::lock_guard<std::mutex> guard{closed_mutex_};
  return "revoked by rank " + std::to_string(revoke_origin_) + ": " + revoke_reason_;
}

void engine::note_completed(uint64_t seq) noexcept {
  raise_to(completed_point_, seq + 1);
}

engine::revoke_verdict engine::verdict_for(uint64_t seq) const noexcept {
  if (!revoke_decided_.load())
    return revoke_verdict::undecided;
  return seq < revoke_point_.load() ? revoke_verdict::completes : revoke_verdict::fails;
}

std::string engine::revoke_failure() const {
  auto text = "the communicator was " + why_revoked();
  if (revoke_decided_.load())
    text += " (revoke point: seq " + std::to_string(revoke_point_.load())
            + "; collectives from there on fail on every rank)";
  return text;
}

std::string engine::revoked_op(const issued_op& op) const {
  auto what = describe(op);
  return what.substr(0, what.find('(')) + " seq " + std::to_string(op.seq) + " on rank "
         + std::to_string(opts_.rank) + ": " + revoke_failure();
}

// ---- the leader --------------------------------------------------------------------

void engine::mark_revoked(int origin, const std::string& reason, bool lost_member) {
  std::lock_guard<std::mutex> guard{closed_mutex_};
  if (!revoked_.load()) {
    revoke_origin_ = origin;
    revoke_reason_ = reason;
    revoked_lost_.store(lost_member);
    revoked_.store(true);
  }
}

void engine::begin_revoke(int origin, const std::string& reason) {
  if (revoke_.active || aborted_ || shut_down_)
    return;
  mark_revoked(origin, reason);
  revoke_.active = true;
  // Read after revoked_ is set: a board op that completes later sees
  // revoked() and waits for the verdict; one that completed before counts here.
  auto point = completed_point_.load();
  raise_to(revoke_point_, point);
  revoke_.answered.assign(static_cast<std::size_t>(opts_.world), 0);
  revoke_.peer_done.assign(static_cast<std::size_t>(opts_.world), 0);
  revoke_.answered[static_cast<std::size_t>(opts_.rank)] = 1;
  auto misses = opts_.cfg.heartbeat_misses;
  revoke_.deadline = now_ + (misses > 0 ? opts_.cfg.heartbeat * misses : opts_.cfg.timeout);
  MCCL_LOG(warn, "rank " << opts_.rank << ": communicator " << opts_.comm_id << " " << why_revoked()
                         << "; this rank's revoke point is seq " << point);
  std::string text;
  {
    std::lock_guard<std::mutex> guard{closed_mutex_};
    origin = revoke_origin_; // whichever revoke this rank heard of first
    text = revoke_reason_;
  }
  for (auto& c : links_) {
    if (!c)
      continue;
    if (c->current() == transport::channel::state::open && !c->aborted())
      c->send_revoke(origin, point, text);
    else // it cannot answer over this channel; the agreement goes on without it
      revoke_.answered[static_cast<std::size_t>(c->peer())] = 1;
  }
  queued_to_all_ = true;
  // Collectives held back by admit() never started here, so no rank can
  // have completed them: they fail now.
  while (!held_.empty()) {
    auto op = std::move(held_.front().first);
    held_.pop_front();
    refuse(op, errc::revoked, revoke_failure());
  }
  maybe_decide_revoke();
}

void engine::on_peer_revoke(int peer, int origin, uint64_t point, const std::string& reason) {
  if (aborted_ || shut_down_)
    return;
  begin_revoke(origin, reason);
  if (!revoke_.active || revoke_.answered.empty())
    return;
  raise_to(revoke_point_, point);
  revoke_.answered[static_cast<std::size_t>(peer)] = 1;
  maybe_decide_revoke();
}

void engine::maybe_decide_revoke() {
  if (!revoke_.active || revoke_decided_.load() || aborted_)
    return;
  std::string missing;
  for (std::size_t r = 0; r < revoke_.answered.size(); ++r)
    if (!revoke_.answered[r])
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  if (!missing.empty() && now_ < revoke_.deadline)
    return;
  if (!missing.empty())
    MCCL_LOG(warn, "rank " << opts_.rank << ": revoke of communicator " << opts_.comm_id << ": no revoke point from rank(s) "
                           << missing << " within the liveness window; deciding without them");
  revoke_decided_.store(true);
  MCCL_LOG(info, "rank " << opts_.rank << ": communicator " << opts_.comm_id << " revoke point agreed: seq "
                         << revoke_point_.load());
  for (auto& [request, report] : revoke_.held) {
    if (request->seq >= revoke_point_.load()) {
      report.code = errc::revoked;
      report.message = revoked_op(*request);
    }
    completions_.emplace_back(std::move(request), std::move(report));
  }
  revoke_.held.clear();
  maybe_finish_revoke();
}

void engine::maybe_finish_revoke() {
  if (!revoke_decided_.load() || revoke_.finished || aborted_ || shut_down_)
    return;
  auto point = revoke_point_.load();
  for (auto& [id, op] : ops_)
    if (!op->reported() && is_collective(op->request->kind) && op->request->seq < point)
      return; // it completes on every rank: let it end here too
  revoke_.finished = true;
  int origin;
  {
    std::lock_guard<std::mutex> guard{closed_mutex_};
    origin = revoke_origin_;
  }
  abort(errc::revoked, revoke_failure(), origin);
}

bool engine::hold_for_revoke(const op_ptr& request, op_report& r) {
  if (!is_collective(request->kind))
    return false;
  if (r.code == errc::none && !revoke_.active && every_rank_contributes(request->kind))
    note_completed(request->seq);
  // Also once finished: an op may have reported success in the pass that
  // closed the communicator, before it was settled.
  if (!revoke_.active || r.code != errc::none)
    return false;
  if (!revoke_decided_.load()) {
    revoke_.held.emplace_back(request, std::move(r));
    return true;
  }
  if (request->seq >= revoke_point_.load()) {
    // It ended on this rank after the point was agreed: every rank fails it.
    r.code = errc::revoked;
    r.message = revoked_op(*request);
  }
  return false;
}

bool engine::peer_done_revoking(int peer, uint64_t agreed_point) {
  if (!revoke_.active || revoke_.finished)
    return false;
  // The peer agreed on the point with every rank's in, ours included: if
  // we have not decided yet, it is the point (a larger one than we know
  // of, when that rank's REVOKE frame never reached us).
  if (!revoke_decided_.load())
    raise_to(revoke_point_, agreed_point);
  revoke_.answered[static_cast<std::size_t>(peer)] = 1;
  revoke_.peer_done[static_cast<std::size_t>(peer)] = 1;
  maybe_decide_revoke();
  return true;
}

bool engine::revoking_without(int peer) const {
  return revoke_.active && !revoke_.finished && revoke_.peer_done[static_cast<std::size_t>(peer)];
}

void engine::drop_held_for_revoke(errc code, const std::string& why) {
  for (auto& [request, report] : revoke_.held) {
    report.code = code;
    report.message = why;
    completions_.emplace_back(std::move(request), std::move(report));
  }
  revoke_.held.clear();
}

} // namespace mccl
