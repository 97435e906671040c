#pragma once
/// Builds the full mesh of TCP connections of one communicator: every rank
/// listens, publishes its endpoint in the rendezvous store, dials every lower
/// rank and accepts every higher one. Each connection opens with a handshake
/// (protocol version, job token, communicator id, both ranks, world size);
/// anything else is refused with a logged reason and does not count.
///
/// Several sockets per peer: a rank listens on every address it was given
/// and publishes them all. Between two ranks the dialer opens `stripes`
/// connections (MCCL_SOCKETS_PER_PEER, or with 0 one per address the peer
/// published), stripe s to the peer's address s mod its address count; each
/// hello names its stripe, and the pair becomes one striped_connection. One
/// stripe is a plain tcp_connection, exactly as without striping.
///
/// Blocking: runs in the caller's thread while the communicator is created,
/// bounded by connect_timeout as a whole.

#include "transport/connection.hpp"
#include <mccl/store.hpp>

#include "transport/tcp/readiness.hpp"
#include "transport/tcp/striped_connection.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mccl::transport {

struct mesh_options {
  int rank = 0;
  int world = 1;
  uint32_t comm_id = 0;
  std::string token;
  /// Where to listen: at least one address.
  std::vector<boost::asio::ip::address> listen_addrs;
  /// What peers are told to dial, one per listen address (the listen
  /// address unless that is 0.0.0.0 / ::).
  std::vector<boost::asio::ip::address> advertise_addrs;
  unsigned short listen_port = 0; ///< 0 = any free port (the same one on every address if free)
  /// MCCL_SOCKETS_PER_PEER: sockets per peer, 0 = one per peer address.
  /// Every rank must use the same value; a mismatch is refused.
  int sockets_per_peer = 1;
  std::size_t stripe_segment_bytes = default_stripe_segment_bytes;
  std::chrono::milliseconds connect_timeout{30000};
  std::size_t socket_buffer_bytes = 0;
  store* rendezvous = nullptr;
  std::string key_prefix; ///< e.g. "mccl/0/": keys are <prefix>ep/<rank>
  /// Called at least every 250 ms while waiting for peers (their endpoints,
  /// their connections, their replies); throws to give up, e.g. when
  /// another rank's setup failed (transport/store/rendezvous_guard.hpp).
  std::function<void()> on_wait;
};

/// Sockets between two ranks: `setting` (MCCL_SOCKETS_PER_PEER) when it is
/// not 0, else one per address the listening peer published, at most
/// max_stripes.
int stripes_for_pair(int setting, std::size_t peer_addresses);
constexpr int max_stripes = 16;

class tcp_link_resumer;

/// The host of every rank of a built mesh as the network sees it: the
/// address part of each rank's first published endpoint, by rank (ranks on
/// one machine all publish its loopback or the same interface, so equal
/// strings mean one host, alike on every rank). Reads every rank's endpoint
/// from o.rendezvous under o.key_prefix.
std::vector<std::string> host_addresses(const mesh_options& o);

/// Connections indexed by peer rank (null at the caller's own rank), woken
/// through `monitor`. Throws mccl::error naming the rank and address it could not
/// reach, or why a peer refused. With `resumer` set, the listening socket
/// stays open after the mesh is built and *resumer re-establishes lost links
/// (MCCL_RECONNECT_MS; tcp_link_resumer.hpp).
std::vector<connection_ptr> build_tcp_mesh(const std::shared_ptr<readiness_monitor>& monitor,
                                           const mesh_options& opts,
                                           std::shared_ptr<tcp_link_resumer>* resumer = nullptr);

} // namespace mccl::transport
