#include "transport/tcp_mesh.hpp"

#include "config/error.hpp"
#include "config/log.hpp"
#include "transport/frame.hpp"
#include "transport/handshake.hpp"
#include "transport/socket_util.hpp"
#include "transport/tcp_connection.hpp"

#include <algorithm>

namespace mccl::transport {

namespace asio = boost::asio;

namespace {

std::string rank_str(int r) { return "rank " + std::to_string(r); }

/// Sends one control frame (hello, hello_ack or refuse) with its payload.
std::string send_control(tcp::socket& s, wire::frame_kind kind, uint32_t comm_id,
                         const std::vector<uint8_t>& payload, clock::time_point deadline) {
  wire::frame_header h;
  h.kind = kind;
  h.comm_id = comm_id;
  h.payload_len = static_cast<uint32_t>(payload.size());
  std::vector<uint8_t> bytes(wire::header_size + payload.size());
  wire::encode_header(h, bytes.data());
  std::copy(payload.begin(), payload.end(), bytes.begin() + wire::header_size);
  return write_all(s, bytes.data(), bytes.size(), deadline);
}

/// Reads one control frame; the payload is bounded before it is allocated.
std::string read_control(tcp::socket& s, clock::time_point deadline, wire::frame_header& h,
                         std::vector<uint8_t>& payload) {
  uint8_t head[wire::header_size];
  auto err = read_exact(s, head, sizeof head, deadline);
  if (!err.empty())
    return err;
  auto res = wire::decode_header(head, sizeof head, max_handshake_payload);
  if (res.status != wire::decode_status::ok)
    return "malformed frame: " + res.reason;
  h = res.header;
  payload.resize(h.payload_len);
  return read_exact(s, payload.data(), payload.size(), deadline);
}

/// Dials `peer` and runs the dialer's side of the handshake.
connection_ptr dial(const std::shared_ptr<readiness_monitor>& monitor, const mesh_options& o, int peer,
                    clock::time_point deadline) {
  auto ms_left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  auto ep_text = o.rendezvous->get(o.key_prefix + "ep/" + std::to_string(peer),
                                   std::max(ms_left, std::chrono::milliseconds(1)));
  auto colon = ep_text.rfind(':');
  if (colon == std::string::npos)
    throw error(errc::rendezvous_failed, rank_str(peer) + " published a malformed endpoint \""
                                           + ep_text + "\"");
  auto host = ep_text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[')
    host = host.substr(1, host.size() - 2);
  tcp::endpoint ep(resolve_host(host, "endpoint of " + rank_str(peer)),
                   static_cast<unsigned short>(std::stoi(ep_text.substr(colon + 1))));
  asio::io_context local;
  tcp::socket s(local);
  auto err = connect_with_retry(s, ep, deadline);
  if (!err.empty())
    throw error(errc::connect_failed,
                rank_str(o.rank) + " could not connect to " + rank_str(peer) + " at " + ep_text
                  + " within MCCL_CONNECT_TIMEOUT_MS=" + std::to_string(o.connect_timeout.count())
                  + ": " + err);
  tune_socket(s, o.socket_buffer_bytes);
  wire::hello hi{static_cast<uint32_t>(o.rank), static_cast<uint32_t>(peer),
                 static_cast<uint32_t>(o.world), o.token};
  err = send_control(s, wire::frame_kind::hello, o.comm_id, wire::encode_hello(hi), deadline);
  wire::frame_header h;
  std::vector<uint8_t> payload;
  if (err.empty())
    err = read_control(s, deadline, h, payload);
  if (!err.empty())
    throw error(errc::connect_failed, "handshake with " + rank_str(peer) + " at " + ep_text
                                        + " failed: " + err);
  if (h.kind == wire::frame_kind::refuse) {
    std::string why;
    auto text = wire::decode_text(payload.data(), payload.size(), &why);
    throw error(errc::handshake_refused, rank_str(peer) + " at " + ep_text
                                           + " refused the connection from " + rank_str(o.rank)
                                           + ": " + (text ? *text : why));
  }
  std::string why;
  auto ack = wire::decode_hello(payload.data(), payload.size(), &why);
  if (h.kind != wire::frame_kind::hello_ack || h.comm_id != o.comm_id || !ack
      || ack->from_rank != static_cast<uint32_t>(peer) || !tokens_equal(ack->token, o.token))
    throw error(errc::handshake_refused, "unexpected handshake reply from " + rank_str(peer)
                                           + " at " + ep_text + " ("
                                           + wire::to_string(h.kind) + (why.empty() ? "" : ": " + why) + ")");
  return std::make_shared<tcp_connection>(monitor, std::move(s), rank_str(peer) + " at " + ep_text);
}

} // namespace

std::vector<connection_ptr> build_tcp_mesh(const std::shared_ptr<readiness_monitor>& monitor,
                                           const mesh_options& o) {
  if (!o.rendezvous)
    throw error(errc::invalid_argument, "build_tcp_mesh: no rendezvous store");
  auto deadline = clock::now() + o.connect_timeout;
  std::vector<connection_ptr> conns(static_cast<std::size_t>(o.world));

  asio::io_context local;
  tcp::acceptor acceptor(local);
  tcp::endpoint want(o.listen_addr, o.listen_port);
  boost::system::error_code ec;
  acceptor.open(want.protocol(), ec);
  if (!ec)
    acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec)
    acceptor.bind(want, ec);
  if (!ec)
    acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec)
    acceptor.non_blocking(true, ec);
  if (ec)
    throw error(errc::connect_failed,
                rank_str(o.rank) + " cannot listen on " + to_string(want) + ": " + ec.message()
                  + (o.listen_port != 0 ? " (port from MCCL_PORT_BASE + rank; pick another "
                                          "MCCL_PORT_BASE or 0 for any free port)"
                                        : ""));
  auto bound = acceptor.local_endpoint();
  if (!o.advertise_addr.is_unspecified())
    bound.address(o.advertise_addr);
  o.rendezvous->set(o.key_prefix + "ep/" + std::to_string(o.rank), to_string(bound));
  MCCL_LOG(debug, rank_str(o.rank) << " listening on " << to_string(bound));

  // Lower ranks first: a rank accepts only after its own dials, and rank 0
  // dials nobody, so by induction every dial is eventually answered.
  for (int peer = 0; peer < o.rank; ++peer)
    conns[peer] = dial(monitor, o, peer, deadline);

  int expected = o.world - 1 - o.rank;
  while (expected > 0) {
    if (!wait_fd(acceptor.native_handle(), false, deadline)) {
      std::string missing;
      for (int r = o.rank + 1; r < o.world; ++r)
        if (!conns[r])
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      throw error(errc::connect_failed,
                  rank_str(o.rank) + " at " + to_string(bound) + " timed out after "
                    "MCCL_CONNECT_TIMEOUT_MS=" + std::to_string(o.connect_timeout.count())
                    + " waiting for rank(s) " + missing + " to connect");
    }
    tcp::socket s(local);
    acceptor.accept(s, ec);
    if (ec)
      continue; // would_block after a spurious wake-up, or an aborted connection
    s.non_blocking(true, ec);
    auto remote = s.remote_endpoint(ec);
    // A silent stray connection may hold us up for at most this long.
    auto hello_deadline = std::min(deadline, clock::now() + std::chrono::seconds(5));
    wire::frame_header h;
    std::vector<uint8_t> payload;
    auto err = read_control(s, hello_deadline, h, payload);
    wire::hello hi;
    if (err.empty()) {
      std::vector<bool> connected(conns.size());
      for (std::size_t r = 0; r < conns.size(); ++r)
        connected[r] = conns[r] != nullptr;
      err = vet_hello({o.rank, o.world, o.comm_id, o.token}, h, payload.data(), payload.size(),
                      connected, hi);
    }
    if (!err.empty()) {
      MCCL_LOG(warn, rank_str(o.rank) << " refused a connection from " << to_string(remote)
                                      << ": " << err);
      send_control(s, wire::frame_kind::refuse, o.comm_id, wire::encode_text(err),
                   std::min(deadline, clock::now() + std::chrono::milliseconds(200)));
      continue;
    }
    tune_socket(s, o.socket_buffer_bytes);
    wire::hello ack{static_cast<uint32_t>(o.rank), hi.from_rank, static_cast<uint32_t>(o.world),
                    o.token};
    err = send_control(s, wire::frame_kind::hello_ack, o.comm_id, wire::encode_hello(ack), deadline);
    if (!err.empty()) {
      MCCL_LOG(warn, rank_str(o.rank) << ": handshake with rank " << hi.from_rank << " failed: " << err);
      continue;
    }
    MCCL_LOG(debug, rank_str(o.rank) << " accepted rank " << hi.from_rank << " from "
                                     << to_string(remote));
    conns[hi.from_rank] = std::make_shared<tcp_connection>(
      monitor, std::move(s), rank_str(static_cast<int>(hi.from_rank)) + " at " + to_string(remote));
    --expected;
  }
  return conns;
}

} // namespace mccl::transport
