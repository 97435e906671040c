#include "actors/progress_actor.hpp"

#include "collectives/collective_actor.hpp"
#include "collectives/registry.hpp"
#include "config/log.hpp"

#include <caf/all.hpp>

#include <cstring>

namespace mccl::actors {

namespace {
/// How long the progress actor waits for its links to confirm an abort or a
/// shutdown before it goes on without them.
constexpr auto link_reply_timeout = std::chrono::seconds(2);
/// How long a lost connection waits for an ABORT frame that explains it.
constexpr auto loss_grace = std::chrono::milliseconds(100);
} // namespace

progress_actor::progress_actor(caf::actor_config& cfg, progress_init init)
  : caf::event_based_actor(cfg), init_(std::move(init)) {
}

caf::behavior progress_actor::make_behavior() {
  set_default_handler(caf::drop);
  set_down_handler([this](caf::down_msg& dm) {
    // A collective actor that died without reporting (an exception escaped
    // CAF's handler): fail its op rather than leave the caller waiting.
    for (auto& [seq, f] : in_flight_) {
      if (f.collective.address() == dm.source) {
        op_result r{seq, errc::internal,
                    std::string(to_string(f.op->kind)) + " seq " + std::to_string(seq)
                      + ": collective actor died: " + caf::to_string(dm.reason),
                    f.algorithm};
        on_done(r);
        return;
      }
    }
  });
  return {
    [this](std::vector<caf::actor>& links) { links_ = std::move(links); },
    [this](submit_atom, op_ptr& op) { submit(std::move(op)); },
    [this](op_done_atom, op_result& r) { on_done(r); },
    [this](link_down_atom, int peer, std::string& why, bool graceful, uint64_t issued) {
      on_link_down(peer, why, graceful, issued);
    },
    [this](peer_abort_atom, int origin, std::string& why) {
      abort(errc::aborted, "rank " + std::to_string(origin) + " aborted the communicator: " + why,
            origin, why);
    },
    [this](abort_atom, std::string& why) {
      abort(errc::aborted, "rank " + std::to_string(init_.rank) + " called abort: " + why,
            init_.rank);
    },
    [this](tick_atom) {
      // The grace period after a lost connection ended without an ABORT
      // frame explaining it: this rank reports the loss itself.
      if (pending_loss_peer_ >= 0 && !aborted_)
        abort(errc::peer_lost, "lost rank " + std::to_string(pending_loss_peer_) + ": " + pending_loss_why_,
              init_.rank);
      pending_loss_peer_ = -1;
    },
    [this](shutdown_atom) {
      auto rp = make_response_promise();
      shutdown(rp);
      return rp;
    },
  };
}

void progress_actor::submit(op_ptr op) {
  op->seq = next_seq_++;
  auto fail_now = [&](errc code, const std::string& why) {
    op->work->complete(code, std::string(to_string(op->kind)) + " seq " + std::to_string(op->seq)
                               + " on rank " + std::to_string(init_.rank) + ": " + why);
  };
  if (finalized_)
    return fail_now(errc::finalized, "the communicator was finalized");
  if (aborted_)
    return fail_now(abort_code_, abort_reason_);
  if (complete_locally(op))
    return;
  // A peer that finalized took part in every op it issued (its bytes for
  // them may still sit in our links); later ops cannot involve it.
  for (const auto& [peer, d] : departed_)
    if (op->seq >= d.issued)
      return fail_now(errc::peer_lost, "rank " + std::to_string(peer) + " has already finalized ("
                                         + d.why + ")");
  auto name = choose_algorithm(op->kind, op->bytes(), init_.world, init_.cfg);
  auto factory = find_algorithm(op->kind, name);
  if (!factory)
    return fail_now(errc::internal, "no algorithm \"" + name + "\" registered");

  collective_init ci;
  ci.args.rank = init_.rank;
  ci.args.world = init_.world;
  ci.args.op = *op;
  ci.args.op.work = nullptr; // the collective never completes the Work itself
  ci.args.chunk_bytes = init_.cfg.chunk_bytes;
  ci.comm_id = init_.comm_id;
  ci.algorithm_name = name;
  ci.factory = std::move(factory);
  ci.links = links_;
  ci.progress = caf::actor_cast<caf::actor>(this);
  ci.watchdog = init_.watchdog;
  ci.timeout = init_.cfg.timeout;
  auto c = spawn<collective_actor>(std::move(ci));
  monitor(c);
  for (auto& l : links_)
    if (l)
      send(l, route_atom::value, op->seq, c);
  MCCL_LOG(trace, to_string(op->kind) << " seq " << op->seq << ": " << name << ", "
                                      << op->bytes() << " bytes");
  auto seq = op->seq;
  in_flight_.emplace(seq, in_flight{std::move(op), c, name});
}

bool progress_actor::complete_locally(const op_ptr& op) {
  // A group of one, or an op without data, needs no communication. Barrier
  // with peers always communicates.
  bool trivial = init_.world == 1 || (op->kind != op_kind::barrier && op->count == 0);
  if (!trivial)
    return false;
  if (op->kind == op_kind::allreduce && op->send != op->recv && op->count > 0)
    std::memcpy(op->recv, op->send, op->bytes());
  op->work->complete();
  return true;
}

void progress_actor::on_done(op_result& r) {
  auto i = in_flight_.find(r.seq);
  if (i == in_flight_.end())
    return;
  auto f = std::move(i->second);
  in_flight_.erase(i);
  for (auto& l : links_)
    if (l)
      send(l, unroute_atom::value, r.seq);
  demonitor(f.collective);
  if (r.code == errc::none) {
    f.op->work->complete();
    return;
  }
  MCCL_LOG(error, r.message);
  failed_unpurged_.emplace_back(std::move(f), std::move(r));
  if (!aborted_)
    abort(failed_unpurged_.back().second.code, failed_unpurged_.back().second.message, init_.rank);
  else if (link_acks_pending_ == 0)
    links_purged();
}

void progress_actor::on_link_down(int peer, const std::string& why, bool graceful,
                                  uint64_t issued) {
  if (graceful) {
    // The peer finalized. Every byte it sent precedes its BYE, so ops it
    // issued already have all they will get from it (a peer that finalizes
    // with ops in flight aborts first). Ops it never issued cannot finish.
    departed_[peer] = departure{why, issued};
    for (auto& [seq, f] : in_flight_)
      if (seq >= issued)
        send(f.collective, fail_atom::value, errc::peer_lost,
             "rank " + std::to_string(peer) + " finalized after issuing " + std::to_string(issued)
               + " op(s); it never issued this one (do all ranks issue the same collectives?)");
    return;
  }
  // A peer that aborted because a third rank died may close its connection
  // (its process exits) before we read its ABORT frame, which names the rank
  // that really failed. Wait briefly for such a frame before blaming `peer`.
  if (aborted_ || pending_loss_peer_ >= 0)
    return;
  pending_loss_peer_ = peer;
  pending_loss_why_ = why;
  delayed_send(this, loss_grace, tick_atom::value);
}

void progress_actor::abort(errc code, const std::string& why, int origin,
                           const std::string& wire_text) {
  if (aborted_ || finalized_)
    return;
  aborted_ = true;
  abort_code_ = code;
  abort_reason_ = why;
  MCCL_LOG(error, "rank " << init_.rank << ": communicator " << init_.comm_id
                          << " aborted: " << why);
  // Tell every peer (an ABORT frame) and make every link forget pointers
  // into caller buffers; failed ops complete once all links confirmed.
  link_acks_pending_ = 0;
  for (auto& l : links_) {
    if (!l)
      continue;
    ++link_acks_pending_;
    request(l, link_reply_timeout, abort_atom::value, origin, wire_text.empty() ? why : wire_text)
      .then([this](bool) {
        if (--link_acks_pending_ == 0)
          links_purged();
      },
            [this](caf::error&) {
              if (--link_acks_pending_ == 0)
                links_purged();
            });
  }
  for (auto& [seq, f] : in_flight_)
    send(f.collective, fail_atom::value, code, why);
  if (link_acks_pending_ == 0)
    links_purged();
}

void progress_actor::links_purged() {
  for (auto& [f, r] : failed_unpurged_) {
    f.op->work->complete(r.code, r.message);
    send(f.collective, shutdown_atom::value);
  }
  failed_unpurged_.clear();
}

void progress_actor::shutdown(caf::response_promise rp) {
  if (finalized_) {
    rp.deliver(true);
    return;
  }
  if (!in_flight_.empty())
    abort(errc::finalized,
          "rank " + std::to_string(init_.rank) + " finalized with " + std::to_string(in_flight_.size())
            + " op(s) in flight (first: seq " + std::to_string(in_flight_.begin()->first) + ")",
          init_.rank);
  finalized_ = true;
  auto pending = std::make_shared<std::size_t>(0);
  auto finish = [this, rp]() mutable {
    // Links are closed: no pointer into caller memory remains anywhere.
    for (auto& [seq, f] : in_flight_) {
      f.op->work->complete(errc::finalized, std::string(to_string(f.op->kind)) + " seq "
                                              + std::to_string(seq) + " on rank "
                                              + std::to_string(init_.rank)
                                              + ": the communicator was finalized while the op was in flight");
      send_exit(f.collective, caf::exit_reason::user_shutdown);
    }
    in_flight_.clear();
    links_purged();
    for (auto& [f, r] : failed_unpurged_)
      send_exit(f.collective, caf::exit_reason::user_shutdown);
    rp.deliver(true);
    quit();
  };
  for (auto& l : links_) {
    if (!l)
      continue;
    ++*pending;
    request(l, link_reply_timeout, shutdown_atom::value, next_seq_)
      .then([pending, finish](bool) mutable {
        if (--*pending == 0)
          finish();
      },
            [pending, finish](caf::error&) mutable {
              if (--*pending == 0)
                finish();
            });
  }
  if (*pending == 0)
    finish();
}

} // namespace mccl::actors
