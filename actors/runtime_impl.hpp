#pragma once
/// Internals shared by runtime.cpp and communicator.cpp (not installed API).

#include <mccl/communicator.hpp>
#include "actors/messages.hpp"
#include "transport/buffer_pool.hpp"
#include "transport/tcp/reactor.hpp"

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <memory>
#include <mutex>
#include <vector>

namespace mccl {

class tcp_store_server;
namespace actors {
class metrics_feed;
}

struct runtime::impl {
  impl(const config_overrides& overrides, caf::actor_system* host);
  ~impl();

  config_overrides overrides;
  config cfg;
  // Declaration order is teardown order reversed: the reactor goes before
  // the pool and the actor system, once every actor has stopped.
  std::unique_ptr<caf::actor_system_config> system_config;
  std::unique_ptr<caf::actor_system> owned_system;
  caf::actor_system* system = nullptr;
  transport::buffer_pool pool;
  std::unique_ptr<transport::reactor> reactor;
  actors::watchdog_handle watchdog;
  /// The metrics actor's feed: every Work of this runtime's communicators
  /// hands its metrics to it when done.
  std::shared_ptr<actors::metrics_feed> metrics;

  std::mutex comms_mutex;
  std::vector<std::weak_ptr<communicator::impl>> comms;

  /// MCCL_METRICS_PORT: the status server (api/status/), started with the
  /// first world communicator that asks for it (one per process) by
  /// serve_status (api/status/runtime_status.hpp). Held without its type,
  /// so that the runtime does not depend on the API built above it; reset
  /// first in ~impl, since its handlers read this runtime's communicators.
  std::mutex status_mutex;
  std::shared_ptr<void> status;

  /// This process's standby store (api/communicator/standby_store.hpp): a rendezvous
  /// store served on the reactor thread, one per process whatever the
  /// number of communicators, started on first use. Stopped first in
  /// ~impl, before the reactor it runs on.
  std::mutex standby_mutex;
  std::shared_ptr<tcp_store_server> standby;
  std::string standby_address; ///< "ip:port" once started
};

} // namespace mccl
