#pragma once
/// Internals shared by runtime.cpp and communicator.cpp (not installed API).

#include <mccl/communicator.hpp>
#include "actors/messages.hpp"
#include "actors/status_server.hpp"
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

  std::mutex comms_mutex;
  std::vector<std::weak_ptr<communicator::impl>> comms;

  /// MCCL_METRICS_PORT: started with the first world communicator that
  /// asks for it (one per process).
  std::mutex status_mutex;
  std::unique_ptr<actors::status_server> status;
  /// Serves /metrics and /status for rank `rank` (idempotent).
  void serve_status(const config& cfg, int rank);

  /// This process's standby store (actors/standby_store.hpp): a rendezvous
  /// store served on the reactor thread, one per process whatever the
  /// number of communicators, started on first use. Stopped first in
  /// ~impl, before the reactor it runs on.
  std::mutex standby_mutex;
  std::shared_ptr<tcp_store_server> standby;
  std::string standby_address; ///< "ip:port" once started
};

} // namespace mccl
