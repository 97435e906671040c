#include "collectives/collective_actor.hpp"

#include "config/log.hpp"

#include <caf/all.hpp>

namespace mccl::actors {

collective_actor::collective_actor(caf::actor_config& cfg, collective_init init)
  : caf::event_based_actor(cfg), init_(std::move(init)) {
}

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
        incoming_chunk in;
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
  if (finished_ && outstanding_sends_ == 0 && !reported_)
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
  op_result r{init_.args.op.seq, code, std::move(message), init_.algorithm_name};
  caf::event_based_actor::send(init_.progress, op_done_atom::value, std::move(r));
  if (code == errc::none)
    quit(); // nothing of ours is referenced any more
  // On failure: wait for shutdown_atom from the progress actor (see header).
}

std::string collective_actor::describe_op() const {
  const auto& op = init_.args.op;
  std::string s = std::string(to_string(op.kind)) + " seq " + std::to_string(op.seq) + " on rank "
                  + std::to_string(init_.args.rank) + " (" + init_.algorithm_name + ", "
                  + std::to_string(op.count) + " x " + to_string(op.type);
  if (op.kind == op_kind::allreduce)
    s += ", " + std::string(to_string(op.op));
  if (op.kind == op_kind::broadcast)
    s += ", root " + std::to_string(op.root);
  return s + ")";
}

} // namespace mccl::actors
