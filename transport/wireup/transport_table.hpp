#pragma once
/// The transports a pair of ranks can be linked by, in one table, in the
/// order wire_up (wireup.hpp) runs them (NCCL's transport table, Gloo's
/// device/pair split). Each entry says which pairs it can connect and
/// connects them, over the links the entries before it made:
///
///   tcp   every pair: the mesh (tcp/tcp_mesh.hpp)
///   shm   pairs on one host, unless MCCL_TRANSPORT=tcp: the pair's TCP link
///         becomes two shared-memory rings, its socket left for wake-ups
///         (shm/shm_setup.hpp, which also checks that every rank has the
///         same MCCL_TRANSPORT and exchanges the hosts)
///   rdma  no pair: probed at run time (rdma/rdma_probe.hpp), no data path
///         in this version
///
/// Blocking: connect runs on the caller's thread while a communicator is
/// created, bounded by MCCL_CONNECT_TIMEOUT_MS.

#include "transport/connection.hpp"
#include "transport/fault/fault_connection.hpp"
#include "transport/shm/shm_board.hpp"
#include "transport/tcp/interfaces.hpp"
#include "transport/tcp/tcp_link_resumer.hpp"
#include "transport/tcp/tcp_mesh.hpp"
#include <mccl/config.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mccl::transport {

/// Which pairs a transport can connect.
enum class pair_reach {
  every_pair,
  same_host, ///< the same host identity (shm/shm_setup.hpp: host_identity)
  no_pair,
};

/// What the entries share while they connect one rank's links.
struct wireup_state {
  config& cfg;
  mesh_options mesh;                  ///< the rendezvous' result: token, addresses, store
  listen_choice listen;
  std::shared_ptr<fault_injector> injector;
  std::function<std::string(const std::string& ip)> serve_standby;
  std::shared_ptr<readiness_monitor> monitor;
  // What they made:
  std::vector<connection_ptr> conns{};  ///< by peer
  std::shared_ptr<tcp_link_resumer> resumer{};
  std::size_t sockets = 0;              ///< TCP sockets, before any decorator
  int shm_peers = 0;
  std::shared_ptr<shm_board> board{};
  std::vector<std::string> hosts{};     ///< every rank's host identity
  std::vector<std::string> standby{};   ///< every rank's standby store
};

struct transport_entry {
  const char* name;
  pair_reach reach;
  /// Connects the pairs it can; null: none in this version.
  void (*connect)(wireup_state& state);
};

/// The table, in the order its entries connect.
const std::vector<transport_entry>& transport_table();

/// MCCL_TRANSPORT=auto and =rdma look for RDMA at run time (the table's
/// rdma entry). This version has no RDMA data path, so both go on without
/// it: auto says why at INFO; rdma falls back to TCP with a WARN naming
/// the reason.
void settle_rdma(config& cfg, int rank);

} // namespace mccl::transport
