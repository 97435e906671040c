#pragma once
/// Builds the full mesh of TCP connections of one communicator: every rank
/// listens, publishes its endpoint in the rendezvous store, dials every lower
/// rank and accepts every higher one. Each connection opens with a handshake
/// (protocol version, job token, communicator id, both ranks, world size);
/// anything else is refused with a logged reason and does not count.
///
/// Blocking: runs in the caller's thread while the communicator is created,
/// bounded by connect_timeout as a whole.

#include "transport/connection.hpp"
#include "transport/store.hpp"

#include "transport/readiness.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace mccl::transport {

struct mesh_options {
  int rank = 0;
  int world = 1;
  uint32_t comm_id = 0;
  std::string token;
  boost::asio::ip::address listen_addr;
  /// What peers are told to dial (listen_addr unless that is 0.0.0.0 / ::).
  boost::asio::ip::address advertise_addr;
  unsigned short listen_port = 0; ///< 0 = any free port
  std::chrono::milliseconds connect_timeout{30000};
  std::size_t socket_buffer_bytes = 0;
  store* rendezvous = nullptr;
  std::string key_prefix; ///< e.g. "mccl/0/": keys are <prefix>ep/<rank>
};

/// Connections indexed by peer rank (null at the caller's own rank), woken
/// through `monitor`. Throws mccl::error naming the rank and address it could not
/// reach, or why a peer refused.
std::vector<connection_ptr> build_tcp_mesh(const std::shared_ptr<readiness_monitor>& monitor,
                                           const mesh_options& opts);

} // namespace mccl::transport
