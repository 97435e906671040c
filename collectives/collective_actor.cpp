#include "collectives/collective_actor.hpp"

#include "config/log.hpp"

#include <caf/all.hpp>

namespace mccl::actors {

collective_actor::collective_actor(caf::actor_config& cfg, collective_init init)
  : caf::event_based_actor(cfg), init_(std::move(init)),
    signature_(init_.args.op.signature(init_.args.world)) {
}

namespace {

uint32_t pack_desc(const op_signature& s) {
  return static_cast<uint32_t>(s.kind) | static_cast<uint32_t>(s.type) << 8
         | static_cast<uint32_t>(s.op) << 16;
}

op_signature unpack_signature(const wire::frame_header& h) {
  op_signature s;
  s.kind = static_cast<op_kind>(h.op_desc & 0xff);
  s.type = static_cast<dtype>((h.op_desc >> 8) & 0xff);
  s.op = static_cast<redop>((h.op_desc >> 16) & 0xff);
  s.arg = h.op_arg;
  s.count = h.op_count;
  return s;
}

} // namespace

template <class F>
void collective_actor::guarded(F&& f) {
  if (reported_)
    return;
  try {
    f();
  } catch (const mccl::error& e) {
    fail(e.code(), e.message());
  } catch (const std::exception& e) {
    fail(errc::internal, std::string("exception in the algorithm: ") + e.what());
  }
}

caf::behavior collective_actor::make_behavior() {
  set_default_handler(caf::drop);
  auto deadline = std::chrono::steady_clock::now() + init_.timeout;
  caf::event_based_actor::send(init_.watchdog, watch_atom::value,
       static_cast<int64_t>(deadline.time_since_epoch().count()), caf::actor_cast<caf::actor>(this));
  guarded([this] {
    algo_ = init_.factory(*this, init_.args);
    if (!algo_)
      throw error(errc::internal, "algorithm factory of \"" + init_.algorithm_name + "\" returned nothing");
    algo_->start();
  });
  return {
    [this](chunk_atom, rx_chunk& c) {
      guarded([&] {
        if (!p2p()) {
          auto mismatch = check_signature(c);
          if (!mismatch.empty())
            return fail(errc::desync, mismatch);
          if (c.header.flags & wire::flag_ack) {
            if (acks_pending_ > 0)
              --acks_pending_;
            return maybe_report_success();
          }
          if (c.header.flags & wire::flag_ack_request)
            send_frame(c.peer, ack_step, 0, nullptr, 0, signature_.count, wire::flag_ack);
        }
        incoming_chunk in;
        in.message_bytes = c.header.op_count;
        in.tag = c.header.aux;
        in.peer = c.peer;
        in.step = c.header.step;
        in.chunk = c.header.chunk;
        in.data = c.buffer.get();
        in.len = c.header.payload_len;
        in.keep = std::move(c.buffer);
        algo_->on_chunk(in);
      });
    },
    [this](sent_atom, int peer, uint32_t step, uint32_t chunk) {
      if (outstanding_sends_ > 0)
        --outstanding_sends_;
      guarded([&] { algo_->on_sent(peer, step, chunk); });
      maybe_report_success();
    },
    [this](fail_atom, errc code, std::string& why) { fail(code, why); },
    [this](timeout_atom) {
      fail(errc::timeout,
           "timed out after MCCL_TIMEOUT_MS=" + std::to_string(init_.timeout.count()) + " ms");
    },
    [this](shutdown_atom) { quit(); },
  };
}

void collective_actor::send(int peer, uint32_t step, uint32_t chunk, const void* data,
                            std::size_t bytes) {
  send_block(peer, step, chunk, data, bytes, signature_.count);
}

void collective_actor::send_block(int peer, uint32_t step, uint32_t chunk, const void* data,
                                  std::size_t bytes, uint64_t block_bytes) {
  uint16_t flags = 0;
  if (!p2p() && algo_ && !algo_->receives()) {
    ack_requested_.resize(init_.links.size());
    if (peer >= 0 && peer < static_cast<int>(ack_requested_.size()) && !ack_requested_[peer]) {
      ack_requested_[peer] = true;
      ++acks_pending_;
      flags = wire::flag_ack_request;
    }
  }
  send_frame(peer, step, chunk, data, bytes, block_bytes, flags);
}

void collective_actor::send_frame(int peer, uint32_t step, uint32_t chunk, const void* data,
                                  std::size_t bytes, uint64_t block_bytes, uint16_t flags) {
  if (reported_)
    return;
  if (peer < 0 || peer >= static_cast<int>(init_.links.size()) || !init_.links[peer])
    throw error(errc::internal, "algorithm " + init_.algorithm_name + " sends to invalid rank "
                                  + std::to_string(peer));
  tx_request req;
  req.header.kind = wire::frame_kind::data;
  req.header.seq = init_.args.op.seq;
  req.header.step = step;
  req.header.chunk = chunk;
  req.header.op_desc = pack_desc(signature_);
  req.header.op_arg = signature_.arg;
  req.header.op_count = block_bytes;
  req.header.flags = flags;
  if (p2p()) {
    req.header.flags = wire::flag_p2p;
    req.header.aux = init_.args.op.tag;
    req.header.op_count = init_.args.op.bytes();
  }
  req.data = static_cast<const uint8_t*>(data);
  req.len = bytes;
  req.peer = peer;
  ++outstanding_sends_;
  caf::event_based_actor::send(init_.links[peer], send_atom::value, std::move(req),
                               caf::actor_cast<caf::actor>(this));
}

void collective_actor::finish() {
  finished_ = true;
  maybe_report_success();
}

void collective_actor::maybe_report_success() {
  if (finished_ && outstanding_sends_ == 0 && acks_pending_ == 0 && !reported_)
    report(errc::none, {});
}

void collective_actor::fail(errc code, const std::string& why) {
  if (reported_)
    return;
  std::string where;
  try {
    where = algo_ ? algo_->where() : "not started";
  } catch (...) {
    where = "(unknown step)";
  }
  report(code, describe_op() + " failed at " + where + ": " + why);
}

void collective_actor::report(errc code, std::string message) {
  reported_ = true;
  caf::event_based_actor::send(init_.watchdog, unwatch_atom::value, caf::actor_cast<caf::actor>(this));
  op_result r{init_.args.op.id, code, std::move(message), init_.algorithm_name};
  caf::event_based_actor::send(init_.progress, op_done_atom::value, std::move(r));
  if (code == errc::none)
    quit(); // nothing of ours is referenced any more
  // On failure: wait for shutdown_atom from the progress actor (see header).
}

std::string collective_actor::describe_op() const {
  const auto& op = init_.args.op;
  auto what = describe(op);
  auto paren = what.find('(');
  // "allreduce seq 7 on rank 1 (ring, count 1000, float32, sum)"; a send is
  // numbered per destination, a receive not at all.
  std::string number = op.kind == op_kind::recv ? ""
                       : op.kind == op_kind::send ? " message " + std::to_string(op.seq)
                                                  : " seq " + std::to_string(op.seq);
  return what.substr(0, paren) + number + " on rank " + std::to_string(init_.args.rank) + " ("
         + init_.algorithm_name + ", " + what.substr(paren + 1);
}

std::string collective_actor::check_signature(const rx_chunk& c) const {
  auto theirs = unpack_signature(c.header);
  // alltoallv blocks carry their own size in the count (send_block).
  bool sized_blocks = signature_.kind == op_kind::alltoall && signature_.arg != 0;
  if (sized_blocks)
    theirs.count = signature_.count;
  if (theirs == signature_)
    return {};
  return "ranks issued different collectives at seq " + std::to_string(init_.args.op.seq)
         + ": rank " + std::to_string(init_.args.rank) + " issued " + describe(signature_)
         + ", rank " + std::to_string(c.peer) + " issued " + describe(theirs)
         + " (all ranks must issue the same collectives in the same order)";
}

} // namespace mccl::actors
