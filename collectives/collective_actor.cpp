#include "collectives/collective_actor.hpp"

#include <caf/all.hpp>

namespace mccl::actors {

collective_actor::collective_actor(caf::actor_config& cfg, collective_init init)
  : caf::event_based_actor(cfg),
    op_session(std::move(init.args), init.comm_id, std::move(init.algorithm_name), std::move(init.factory)),
    progress_(std::move(init.progress)), watchdog_(std::move(init.watchdog)),
    links_(std::move(init.links)), timeout_(init.timeout) {
  landing_ = std::move(init.landing);
}

caf::behavior collective_actor::make_behavior() {
  set_default_handler(caf::drop);
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  caf::event_based_actor::send(watchdog_, watch_atom::value,
                               static_cast<int64_t>(deadline.time_since_epoch().count()),
                               caf::actor_cast<caf::actor>(this));
  start_op();
  return {
    [this](chunk_atom, rx_chunk& c) { deliver(c); },
    [this](sent_atom, int peer, uint32_t step, uint32_t chunk) { frame_sent(peer, step, chunk); },
    [this](fail_atom, errc code, std::string& why) { fail(code, why); },
    [this](timeout_atom) {
      fail(errc::timeout, "timed out after MCCL_TIMEOUT_MS=" + std::to_string(timeout_.count()) + " ms");
    },
    [this](shutdown_atom) { quit(); },
  };
}

void collective_actor::emit(tx_request req) {
  auto peer = req.peer;
  if (peer < 0 || peer >= static_cast<int>(links_.size()) || !links_[peer])
    throw error(errc::internal, "algorithm " + algorithm_name() + " sends to rank "
                                  + std::to_string(peer) + ", which has no link");
  caf::event_based_actor::send(links_[peer], send_atom::value, std::move(req),
                               caf::actor_cast<caf::actor>(this));
}

void collective_actor::report(errc code, std::string message) {
  caf::event_based_actor::send(watchdog_, unwatch_atom::value, caf::actor_cast<caf::actor>(this));
  op_result r{args().op.id, code, std::move(message), algorithm_name()};
  caf::event_based_actor::send(progress_, op_done_atom::value, std::move(r));
  if (code == errc::none)
    quit(); // nothing of ours is referenced any more
  // On failure: wait for shutdown_atom from the progress actor (see header).
}

} // namespace mccl::actors
