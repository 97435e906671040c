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
} // namespace

progress_actor::progress_actor(caf::actor_config& cfg, progress_init init)
  : caf::event_based_actor(cfg), init_(std::move(init)) {
}

caf::behavior progress_actor::make_behavior() {
  set_default_handler(caf::drop);
  set_down_handler([this](caf::down_msg& dm) {
    // A collective actor that died without reporting (an exception escaped
    // CAF's handler): fail its op rather than leave the caller waiting.
    for (auto& [id, f] : in_flight_) {
      if (f.collective.address() == dm.source) {
        op_result r{id, errc::internal,
                    std::string(to_string(f.op->kind)) + " seq " + std::to_string(f.op->seq)
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
    [this](peer_abort_atom, int origin, std::string& why, errc code) {
      abort(code, "rank " + std::to_string(origin) + " aborted the communicator: " + why, origin, why);
    },
    [this](op_failed_atom, errc code, std::string& why) {
      // An op the inline path ran failed: abort like for any failed op.
      MCCL_LOG(error, why);
      abort(code, why, init_.rank);
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

void progress_actor::number(op_request& op) {
  op.id = next_id_++;
  if (op.kind == op_kind::send) {
    if (next_message_.size() < static_cast<std::size_t>(init_.world))
      next_message_.assign(static_cast<std::size_t>(init_.world), 0);
    op.seq = next_message_[static_cast<std::size_t>(op.root)]++;
  } else if (op.kind != op_kind::recv) {
    op.seq = init_.shared->next_seq.fetch_add(1);
  }
}

void progress_actor::submit(op_ptr op) {
  number(*op);
  bool p2p = op->kind == op_kind::send || op->kind == op_kind::recv;
  auto fail_now = [&](errc code, const std::string& why) {
    auto what = describe(*op);
    op->work->complete(code, what.substr(0, what.find('(')) + (p2p ? "" : " seq " + std::to_string(op->seq))
                               + " on rank " + std::to_string(init_.rank) + ": " + why);
  };
  if (finalized_)
    return fail_now(errc::finalized, "the communicator was finalized");
  if (aborted_)
    return fail_now(abort_code_, abort_reason_);
  if (complete_locally(op))
    return;
  // A peer that finalized took part in every op it issued (its bytes for
  // them may still sit in our links); later ops cannot involve it. Its
  // point-to-point messages may still wait in our link to be received.
  for (const auto& [peer, d] : departed_) {
    if (!p2p && op->seq >= d.issued)
      return fail_now(errc::peer_lost, "rank " + std::to_string(peer) + " has already finalized ("
                                         + d.why + ")");
    if (op->kind == op_kind::send && op->root == peer)
      return fail_now(errc::peer_lost, "rank " + std::to_string(peer) + " has already finalized ("
                                         + d.why + ")");
  }
  std::string why;
  auto [name, factory] = select_algorithm(*op, init_.world, init_.cfg, &why);
  if (!factory)
    return fail_now(errc::internal, why);
  op->algorithm = name;

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
  std::shared_ptr<landing_map> landing;
  if (!p2p) {
    landing = std::make_shared<landing_map>(op->signature(init_.world));
    ci.landing = landing;
  }
  auto c = spawn<collective_actor>(std::move(ci));
  monitor(c);
  if (op->kind == op_kind::recv) {
    send(links_[static_cast<std::size_t>(op->root)], post_recv_atom::value, op->tag, op->id, c);
  } else if (op->kind != op_kind::send) {
    for (auto& l : links_)
      if (l)
        send(l, route_atom::value, op->seq, c, landing);
  }
  MCCL_LOG(debug, describe(*op) << (p2p ? "" : " seq " + std::to_string(op->seq)) << ": " << name);
  auto id = op->id;
  auto ticket = record_start(*op, name);
  in_flight_.emplace(id, in_flight{std::move(op), c, name, std::chrono::steady_clock::now(), ticket});
}

uint64_t progress_actor::record_start(const op_request& op, const std::string& algorithm) {
  auto& rec = init_.shared->recorder;
  if (!rec)
    return 0;
  return rec->started(recorded_op(op, init_.world, algorithm, false));
}

void progress_actor::record_end(uint64_t ticket, bool ok) {
  if (init_.shared->recorder)
    init_.shared->recorder->ended(ticket, ok ? flight_recorder::state::done
                                             : flight_recorder::state::failed);
}

std::string progress_actor::with_progress_note(errc code, std::string message) const {
  if (code == errc::timeout && init_.shared->recorder)
    message += " (" + init_.shared->recorder->progress_note() + ")";
  return message;
}

namespace {

/// memmove: in-place forms may pass overlapping buffers.
void copy_elems(void* dst, const void* src, std::size_t elems, std::size_t elem_size,
                std::size_t dst_off = 0, std::size_t src_off = 0) {
  if (elems == 0 || !dst || !src)
    return;
  auto d = static_cast<uint8_t*>(dst) + dst_off * elem_size;
  auto s = static_cast<const uint8_t*>(src) + src_off * elem_size;
  if (d != s)
    std::memmove(d, s, elems * elem_size);
}

} // namespace

bool progress_actor::complete_locally(const op_ptr& op) {
  // A group of one needs no communication: each op is a copy (or nothing).
  // Custom collectives decide for themselves.
  if (init_.world != 1 || op->kind == op_kind::custom)
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
      copy_elems(op->recv, op->send, op->count_of(0), e);
      break;
    case op_kind::reduce_scatter:
    case op_kind::scatter:
      copy_elems(op->recv, op->send, op->count_of(0), e);
      break;
    default:
      break;
  }
  op_metrics m;
  m.op = to_string(op->kind);
  m.algorithm = "local";
  m.seq = op->seq;
  m.bytes = op->selection_bytes(1);
  op->work->set_metrics(std::move(m));
  op->work->complete();
  return true;
}

void progress_actor::complete(in_flight& f, errc code, std::string message) {
  op_metrics m;
  m.op = f.op->kind == op_kind::custom ? f.op->name : to_string(f.op->kind);
  m.algorithm = f.algorithm;
  m.seq = f.op->seq;
  m.bytes = f.op->selection_bytes(init_.world);
  m.duration = std::chrono::steady_clock::now() - f.start;
  f.op->work->set_metrics(std::move(m));
  record_end(f.ticket, code == errc::none);
  f.op->work->complete(code, std::move(message));
}

void progress_actor::on_done(op_result& r) {
  auto i = in_flight_.find(r.id);
  if (i == in_flight_.end())
    return;
  auto f = std::move(i->second);
  in_flight_.erase(i);
  if (f.op->kind == op_kind::recv) {
    send(links_[static_cast<std::size_t>(f.op->root)], unpost_atom::value, f.op->id);
  } else if (f.op->kind != op_kind::send) {
    for (auto& l : links_)
      if (l)
        send(l, unroute_atom::value, f.op->seq);
  }
  demonitor(f.collective);
  if (r.code == errc::none) {
    complete(f, errc::none, {});
    return;
  }
  r.message = with_progress_note(r.code, std::move(r.message));
  record_end(f.ticket, false);
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
    for (auto& [id, f] : in_flight_) {
      auto k = f.op->kind;
      if (k == op_kind::send && f.op->root == peer)
        send(f.collective, fail_atom::value, errc::peer_lost,
             "rank " + std::to_string(peer) + " finalized before receiving this message");
      else if (k != op_kind::send && k != op_kind::recv && f.op->seq >= issued)
        send(f.collective, fail_atom::value, errc::peer_lost,
             "rank " + std::to_string(peer) + " finalized after issuing " + std::to_string(issued)
               + " collective(s); it never issued this one (do all ranks issue the same collectives?)");
    }
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
  init_.shared->close(why);
  abort_code_ = code;
  abort_reason_ = why;
  MCCL_LOG(error, "rank " << init_.rank << ": communicator " << init_.comm_id
                          << " aborted: " << why);
  if (auto& rec = init_.shared->recorder; rec && rec->capacity() > 0) {
    rec->abort_running();
    MCCL_LOG(error, rec->dump(init_.rank, init_.comm_id, "dumped as the communicator aborted"));
  }
  // Tell every peer (an ABORT frame) and make every link forget pointers
  // into caller buffers; failed ops complete once all links confirmed.
  link_acks_pending_ = 0;
  for (auto& l : links_) {
    if (!l)
      continue;
    ++link_acks_pending_;
    request(l, link_reply_timeout, abort_atom::value, origin, wire_text.empty() ? why : wire_text, code)
      .then([this](bool) {
        if (--link_acks_pending_ == 0)
          links_purged();
      },
            [this](caf::error&) {
              if (--link_acks_pending_ == 0)
                links_purged();
            });
  }
  for (auto& [id, f] : in_flight_)
    send(f.collective, fail_atom::value, code, why);
  if (link_acks_pending_ == 0)
    links_purged();
}

void progress_actor::links_purged() {
  for (auto& [f, r] : failed_unpurged_) {
    complete(f, r.code, r.message);
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
            + " op(s) in flight (first: " + describe(*in_flight_.begin()->second.op) + " seq "
            + std::to_string(in_flight_.begin()->second.op->seq) + ")",
          init_.rank);
  finalized_ = true;
  init_.shared->close("rank " + std::to_string(init_.rank) + " finalized the communicator");
  auto pending = std::make_shared<std::size_t>(0);
  auto finish = [this, rp]() mutable {
    // Links are closed: no pointer into caller memory remains anywhere.
    for (auto& [id, f] : in_flight_) {
      complete(f, errc::finalized, describe(*f.op) + " seq " + std::to_string(f.op->seq) + " on rank "
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
    request(l, link_reply_timeout, shutdown_atom::value, init_.shared->next_seq.load())
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
