#pragma once
/// Connecting one communicator's ranks before anything runs on the links:
/// the rendezvous (the store, the job's token, the settings every rank must
/// share), then every pair through the transport table
/// (transport_table.hpp), then the fault-injecting decorator over the links
/// when a scenario asks for it (fault/fault_connection.hpp).
///
/// Blocking: runs on the caller's thread while a communicator is created,
/// bounded by MCCL_CONNECT_TIMEOUT_MS. A failure names its cause and tells
/// the other ranks, so they stop waiting (store/rendezvous_guard.hpp).

#include "transport/connection.hpp"
#include "transport/fault/fault_connection.hpp"
#include "transport/shm/shm_board.hpp"
#include "transport/store/tcp_store.hpp"
#include "transport/tcp/reactor.hpp"
#include "transport/tcp/tcp_link_resumer.hpp"
#include <mccl/config.hpp>
#include <mccl/store.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mccl::transport {

struct wireup_options {
  int rank = 0;
  int world = 2;
  uint32_t comm_id = 0;
  std::string master_addr;
  int master_port = 0;
  /// An embedder's store (torch's); null: the default TCP store at
  /// master_addr:master_port, served by rank 0.
  store_ptr store;
  /// The ranks meet in a standby store (rendezvous_guard's identity).
  bool standby = false;
  /// The runtime's waiting threads: the store's server, the readiness
  /// monitor the connections park on.
  reactor* runtime_reactor = nullptr;
  /// The faults to inject on the links; null: none.
  std::shared_ptr<fault_injector> injector;
  /// Starts this process's standby store on this rank's listen address and
  /// gives the "ip:port" every rank learns during the host exchange.
  std::function<std::string(const std::string& ip)> serve_standby;
};

struct wireup_result {
  std::vector<connection_ptr> conns;          ///< by peer; null for this rank
  std::shared_ptr<tcp_link_resumer> resumer;  ///< MCCL_RECONNECT_MS, else null
  std::shared_ptr<shm_board> board;           ///< every rank on this host, else null
  std::vector<std::string> standby;           ///< every rank's standby store, by rank
  store_ptr rendezvous;                       ///< where the ranks met
  std::shared_ptr<tcp_store_server> store_server; ///< rank 0's default store
};

/// Connects this rank to every peer. `cfg`: this rank's resolved settings;
/// sets cfg.host_of and cfg.hosts from what the ranks published.
wireup_result wire_up(config& cfg, const wireup_options& o);

} // namespace mccl::transport
