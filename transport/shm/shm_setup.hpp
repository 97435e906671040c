#pragma once
/// Moves the links between ranks of one host onto shared memory, after the
/// TCP mesh is built (tcp/tcp_mesh.hpp) and before anything else uses it.
///
/// 1. Every rank publishes its host identity and its MCCL_TRANSPORT in the
///    rendezvous store; a rank whose setting differs fails every rank,
///    naming both values.
/// 2. Peers with the same host identity (the kernel's boot id, the network
///    namespace and MCCL_HOST_ID, host_identity()) are candidates. Between two
///    candidates the lower rank creates a segment (shm_segment.hpp) and
///    offers it over their TCP connection, which the job token already
///    guards; the higher rank opens and verifies it and answers. Both then
///    know the same outcome.
/// 3. Accepted pairs get an shm_connection over the TCP one; the others keep
///    TCP (auto) or fail naming the peer and why (shm).
/// 4. When every rank is on this host and every pair shares memory, rank 0
///    creates the host board (shm_board.hpp) and publishes it in the store;
///    each rank maps it and publishes whether it could; the board is used
///    only if every rank could, which every rank reads alike.
///
/// Blocking: runs in the caller's thread while the communicator is
/// created, bounded by `deadline`.

#include "transport/connection.hpp"
#include "transport/shm/shm_board.hpp"
#include <mccl/store.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace mccl::transport {

/// The host as shared memory sees it: "<boot id>/<network namespace>", and
/// "/<split>" when `split` (MCCL_HOST_ID) is not empty. Ranks in separate
/// network namespaces (emulated hosts, containers) or with different splits
/// count as separate hosts, so they talk over the network between them.
/// Empty when the boot id is unreadable.
std::string host_identity(const std::string& split);

/// MCCL_SHM_SINGLE_COPY_BYTES=auto copies once from this many ranks on a
/// host up: 4 to 16 ranks on 16 cores, at least the ring's busbw in 32 of
/// 36 cases from 1 to 64 MiB (up to 1.9x); 2 ranks, where the ring's two
/// copies run on both sides at once, in 8 of 12, and on 2 vCPUs mostly
/// less (bench/RESULTS.md, "Single copy").
constexpr int auto_single_copy_ranks = 4;
constexpr std::size_t auto_single_copy_bytes = std::size_t{64} << 10;

struct shm_setup_options {
  int rank = 0;
  int world = 1;
  /// MCCL_TRANSPORT as written in the config ("auto", "tcp", "shm").
  std::string mode = "auto";
  /// MCCL_HOST_ID: splits this machine into several hosts (host_identity).
  std::string host_id;
  /// Each ring's size (MCCL_SHM_RING_BYTES), a power of two.
  std::size_t ring_bytes = std::size_t{1} << 21;
  /// Payloads from this size on go to a peer as splices (shm_ring.hpp);
  /// 0: never; config::single_copy_auto: 64K where at least
  /// auto_single_copy_ranks ranks share this host, else never.
  std::size_t single_copy_bytes = 0;
  /// The host board's bank size this rank asks for; the smallest of all
  /// ranks' is used, 0: no board.
  std::size_t board_bytes = 0;
  /// The board's stage bank size this rank asks for (MCCL_SHM_STAGE_BYTES,
  /// a multiple of 4 KiB); the smallest of all ranks' is used, 0: none.
  std::size_t stage_bytes = 0;
  std::chrono::steady_clock::time_point deadline;
  store* rendezvous = nullptr;
  std::string key_prefix; ///< keys are <prefix>host/<rank>
  /// One word (no spaces) this rank publishes beside its host record, so
  /// that every rank learns every rank's without another store round trip:
  /// the address of its standby store (api/communicator/standby_store.hpp). "": none.
  std::string announce;
};

/// What the setup did, for the communicator's log and host count.
struct shm_setup_result {
  int shm_peers = 0;
  /// Host identity of every rank, by rank.
  std::vector<std::string> hosts;
  /// What every rank announced (shm_setup_options::announce), by rank.
  std::vector<std::string> announced;
  /// The host board, when every rank is on this host (and board_bytes > 0).
  std::shared_ptr<shm_board> board;
};

/// Replaces conns[peer] by a shared-memory connection for every same-host
/// peer that accepts it. Throws mccl::error naming the setting, the rank
/// and the reason where the mode cannot be honoured.
shm_setup_result setup_shm_links(std::vector<connection_ptr>& conns, const shm_setup_options& o);

} // namespace mccl::transport
