#pragma once
/// The handshake's frames on a blocking socket, shared by the mesh builder
/// (tcp_mesh.cpp) and the link resumer (tcp_link_resumer.cpp): hello,
/// hello_ack and refuse go out and come in whole, each bounded by a
/// deadline; what they must contain is checked in transport/wire/handshake.hpp.

#include "transport/tcp/socket_util.hpp"
#include "transport/wire/frame.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mccl::transport {

/// "rank 3", as every message names a rank.
std::string rank_str(int r);

/// Which stripe of a peer pair a handshake is for; hello and hello_ack
/// carry it in header fields the kind leaves free: seq = the sender's
/// MCCL_SOCKETS_PER_PEER, step = stripes of the pair, chunk = this stripe.
struct stripe_tag {
  int setting = 1;
  int count = 1;
  int index = 0;
};

/// The stripe count a hello announces; 0 (a hello that does not say) is one.
uint32_t stripes_in(const wire::frame_header& h);

/// Sends one control frame (hello, hello_ack or refuse) with its payload;
/// "" on success, else why not.
std::string send_control(tcp::socket& s, wire::frame_kind kind, uint32_t comm_id,
                         const std::vector<uint8_t>& payload, clock::time_point deadline,
                         const stripe_tag& tag = {}, uint32_t aux = 0);

/// Reads one control frame; the payload is bounded before it is allocated.
std::string read_control(tcp::socket& s, clock::time_point deadline, wire::frame_header& h,
                         std::vector<uint8_t>& payload);

/// "10.0.0.1:4000,10.1.0.1:4000" -> its endpoints (at least one); throws
/// mccl::error naming `peer` when the text is malformed.
std::vector<std::pair<std::string, tcp::endpoint>> parse_endpoints(const std::string& text, int peer);

/// The first endpoint `peer` published: a resumed link uses one socket.
tcp::endpoint parse_endpoint(const std::string& text, int peer);

} // namespace mccl::transport
