#include "transport/tcp/tcp_mesh.hpp"

#include <mccl/error.hpp>
#include "config/log.hpp"
#include "transport/wire/frame.hpp"
#include "transport/wire/handshake.hpp"
#include "transport/tcp/socket_util.hpp"
#include "transport/tcp/handshake_io.hpp"
#include "transport/tcp/hello_gate.hpp"
#include "transport/tcp/tcp_connection.hpp"
#include "transport/tcp/tcp_link_resumer.hpp"

#include <algorithm>
#include <thread>

#include <unistd.h>

namespace mccl::transport {

namespace asio = boost::asio;

namespace {

/// How often waits for peers call mesh_options::on_wait.
constexpr auto wait_slice = std::chrono::milliseconds(250);

/// One stripe's socket, connected and through the handshake.
struct handshaken {
  std::unique_ptr<tcp::socket> socket;
  std::string name; ///< the remote endpoint, "10.0.0.2:4000"
};

/// The connection over a pair's sockets: plain TCP for one, striped for more.
connection_ptr make_connection(const std::shared_ptr<readiness_monitor>& monitor, const mesh_options& o,
                               int peer, std::vector<handshaken> stripes) {
  if (stripes.size() == 1)
    return std::make_shared<tcp_connection>(monitor, std::move(*stripes[0].socket),
                                            rank_str(peer) + " at " + stripes[0].name);
  std::vector<stripe_socket> fds;
  for (auto& s : stripes) {
    s.socket->non_blocking(true);
    fds.push_back({s.socket->release(), s.name});
  }
  auto description = rank_str(peer) + " at " + fds[0].name + " (" + std::to_string(fds.size())
                     + " sockets)";
  return std::make_shared<striped_connection>(monitor, std::move(fds), std::move(description),
                                              o.stripe_segment_bytes);
}

/// Dials stripe `tag.index` of the pair with `peer` at `ep` and runs the
/// dialer's side of the handshake.
handshaken dial_stripe(const mesh_options& o, int peer, const std::string& ep_text, const tcp::endpoint& ep,
                       const stripe_tag& tag, asio::io_context& io, clock::time_point deadline) {
  auto s = std::make_unique<tcp::socket>(io);
  auto where = rank_str(peer) + " at " + ep_text
               + (tag.count > 1 ? " (stripe " + std::to_string(tag.index) + " of "
                                    + std::to_string(tag.count) + ")"
                                : "");
  auto err = connect_with_retry(*s, ep, deadline);
  if (!err.empty())
    throw error(errc::connect_failed,
                rank_str(o.rank) + " could not connect to " + where
                  + " within MCCL_CONNECT_TIMEOUT_MS=" + std::to_string(o.connect_timeout.count())
                  + ": " + err);
  tune_socket(*s, o.socket_buffer_bytes);
  wire::hello hi{static_cast<uint32_t>(o.rank), static_cast<uint32_t>(peer),
                 static_cast<uint32_t>(o.world), o.token};
  err = send_control(*s, wire::frame_kind::hello, o.comm_id, wire::encode_hello(hi), deadline, tag);
  // The peer answers once it is done dialling lower ranks: wait in slices.
  while (err.empty() && !wait_fd(s->native_handle(), false, std::min(deadline, clock::now() + wait_slice))) {
    if (clock::now() >= deadline)
      break;
    if (o.on_wait)
      o.on_wait();
  }
  wire::frame_header h;
  std::vector<uint8_t> payload;
  if (err.empty())
    err = read_control(*s, deadline, h, payload);
  if (!err.empty())
    throw error(errc::connect_failed, "handshake with " + where + " failed: " + err);
  if (h.kind == wire::frame_kind::refuse) {
    std::string why;
    auto text = wire::decode_text(payload.data(), payload.size(), &why);
    throw error(errc::handshake_refused, where + " refused the connection from " + rank_str(o.rank)
                                           + ": " + (text ? *text : why));
  }
  std::string why;
  auto ack = wire::decode_hello(payload.data(), payload.size(), &why);
  if (h.kind != wire::frame_kind::hello_ack || h.comm_id != o.comm_id || !ack
      || ack->from_rank != static_cast<uint32_t>(peer) || !tokens_equal(ack->token, o.token)
      || h.chunk != static_cast<uint32_t>(tag.index))
    throw error(errc::handshake_refused, "unexpected handshake reply from " + where + " ("
                                           + wire::to_string(h.kind) + (why.empty() ? "" : ": " + why) + ")");
  return {std::move(s), ep_text};
}

/// Dials every stripe of the pair with `peer`; *published gets what the
/// peer published (a resumer dials it again).
connection_ptr dial(const std::shared_ptr<readiness_monitor>& monitor, const mesh_options& o, int peer,
                    asio::io_context& io, clock::time_point deadline, std::string* published) {
  auto key = o.key_prefix + "ep/" + std::to_string(peer);
  for (;;) {
    if (auto v = o.rendezvous->try_get(key)) {
      *published = *v;
      break;
    }
    if (o.on_wait)
      o.on_wait();
    auto now = clock::now();
    if (now >= deadline)
      throw error(errc::connect_failed,
                  rank_str(o.rank) + " timed out after MCCL_CONNECT_TIMEOUT_MS="
                    + std::to_string(o.connect_timeout.count()) + " waiting for " + rank_str(peer)
                    + " to publish its endpoint");
    std::this_thread::sleep_for(std::min<clock::duration>(std::chrono::milliseconds(20), deadline - now));
  }
  auto eps = parse_endpoints(*published, peer);
  int count = stripes_for_pair(o.sockets_per_peer, eps.size());
  std::vector<handshaken> stripes;
  for (int i = 0; i < count; ++i) {
    const auto& [text, ep] = eps[static_cast<std::size_t>(i) % eps.size()];
    stripes.push_back(dial_stripe(o, peer, text, ep, stripe_tag{o.sockets_per_peer, count, i}, io, deadline));
  }
  if (count > 1)
    MCCL_LOG(debug, rank_str(o.rank) << ": " << count << " sockets to " << rank_str(peer));
  return make_connection(monitor, o, peer, std::move(stripes));
}

/// The stripes of one higher rank's pair that have arrived so far.
struct arriving {
  int count = 0;
  std::vector<handshaken> stripes; ///< by stripe index; empty socket = not yet
  int have = 0;
};

/// Checks an incoming hello (transport/wire/handshake.hpp), then the stripe it
/// names; returns "" to accept it or why it is refused.
std::string vet_hello(const mesh_options& o, const wire::frame_header& h,
                      const std::vector<uint8_t>& payload, const std::vector<connection_ptr>& conns,
                      const std::vector<arriving>& partial, wire::hello& out) {
  std::vector<bool> connected(conns.size());
  for (std::size_t r = 0; r < conns.size(); ++r)
    connected[r] = conns[r] != nullptr;
  auto err = transport::vet_hello({o.rank, o.world, o.comm_id, o.token}, h, payload.data(),
                                  payload.size(), connected, out);
  if (!err.empty())
    return err;
  auto from = rank_str(static_cast<int>(out.from_rank));
  if (h.seq != static_cast<uint64_t>(o.sockets_per_peer))
    return from + " uses MCCL_SOCKETS_PER_PEER=" + std::to_string(h.seq) + ", " + rank_str(o.rank)
           + " uses " + std::to_string(o.sockets_per_peer) + ": set the same value on every rank";
  auto count = stripes_in(h);
  if (count > static_cast<uint32_t>(max_stripes) || h.chunk >= count)
    return "stripe " + std::to_string(h.chunk) + " of " + std::to_string(count)
           + " is outside 1.." + std::to_string(max_stripes) + " sockets";
  const auto& a = partial[out.from_rank];
  if (a.count != 0 && a.count != static_cast<int>(count))
    return from + " announced " + std::to_string(count) + " sockets, earlier "
           + std::to_string(a.count);
  if (a.count != 0 && a.stripes[h.chunk].socket)
    return "duplicate connection from " + from + " for stripe " + std::to_string(h.chunk);
  return {};
}

/// One listening socket per address, all on the same port where possible
/// (one port to open in a firewall); returns what peers should dial.
std::string listen_everywhere(const mesh_options& o, asio::io_context& io,
                              std::vector<std::unique_ptr<tcp::acceptor>>& acceptors) {
  std::string published;
  unsigned short port = o.listen_port;
  for (std::size_t i = 0; i < o.listen_addrs.size(); ++i) {
    tcp::endpoint want(o.listen_addrs[i], port);
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto a = std::make_unique<tcp::acceptor>(io);
      boost::system::error_code ec;
      a->open(want.protocol(), ec);
      if (!ec)
        a->set_option(tcp::acceptor::reuse_address(true), ec);
      if (!ec)
        a->bind(want, ec);
      if (!ec)
        a->listen(asio::socket_base::max_listen_connections, ec);
      if (!ec)
        a->non_blocking(true, ec);
      if (ec && attempt == 0 && i > 0 && o.listen_port == 0) {
        want.port(0); // the first address's free port is taken here: any will do
        continue;
      }
      if (ec)
        throw error(errc::connect_failed,
                    rank_str(o.rank) + " cannot listen on " + to_string(want) + ": " + ec.message()
                      + (o.listen_port != 0 ? " (port from MCCL_PORT_BASE + rank; pick another "
                                              "MCCL_PORT_BASE or 0 for any free port)"
                                            : ""));
      auto bound = a->local_endpoint();
      if (i == 0)
        port = bound.port();
      if (i < o.advertise_addrs.size() && !o.advertise_addrs[i].is_unspecified())
        bound.address(o.advertise_addrs[i]);
      published += (published.empty() ? "" : ",") + to_string(bound);
      acceptors.push_back(std::move(a));
      break;
    }
  }
  return published;
}

} // namespace

std::vector<std::string> host_addresses(const mesh_options& o) {
  std::vector<std::string> out;
  for (int r = 0; r < o.world; ++r) {
    auto published = o.rendezvous->get(o.key_prefix + "ep/" + std::to_string(r), o.connect_timeout);
    auto first = published.substr(0, published.find(','));
    out.push_back(first.substr(0, first.rfind(':')));
  }
  return out;
}

int stripes_for_pair(int setting, std::size_t peer_addresses) {
  if (setting > 0)
    return std::min(setting, max_stripes);
  return static_cast<int>(std::clamp<std::size_t>(peer_addresses, 1, max_stripes));
}

std::vector<connection_ptr> build_tcp_mesh(const std::shared_ptr<readiness_monitor>& monitor,
                                           const mesh_options& o,
                                           std::shared_ptr<tcp_link_resumer>* resumer) {
  if (!o.rendezvous)
    throw error(errc::invalid_argument, "build_tcp_mesh: no rendezvous store");
  if (o.listen_addrs.empty())
    throw error(errc::invalid_argument, "build_tcp_mesh: no listen address");
  auto deadline = clock::now() + o.connect_timeout;
  std::vector<connection_ptr> conns(static_cast<std::size_t>(o.world));

  asio::io_context local;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  auto published = listen_everywhere(o, local, acceptors);
  o.rendezvous->set(o.key_prefix + "ep/" + std::to_string(o.rank), published);
  MCCL_LOG(debug, rank_str(o.rank) << " listening on " << published);

  // Lower ranks first: a rank accepts only after its own dials, and rank 0
  // dials nobody, so by induction every dial is eventually answered.
  std::vector<std::string> endpoints(static_cast<std::size_t>(o.world));
  for (int peer = 0; peer < o.rank; ++peer)
    conns[peer] = dial(monitor, o, peer, local, deadline, &endpoints[peer]);

  std::vector<int> listening;
  for (auto& a : acceptors)
    listening.push_back(a->native_handle());
  std::vector<arriving> partial(static_cast<std::size_t>(o.world));
  // Strays (idle, slow or garbage connections) are read side by side with
  // the real peers, each for at most 5 s: any number of them cannot hold
  // the job up.
  hello_gate gate(local, rank_str(o.rank), o.comm_id, std::chrono::seconds(5));
  int expected = o.world - 1 - o.rank;
  while (expected > 0) {
    if (clock::now() >= deadline) {
      std::string missing;
      for (int r = o.rank + 1; r < o.world; ++r)
        if (!conns[r])
          missing += (missing.empty() ? "" : ", ") + std::to_string(r)
                     + (partial[r].have > 0 ? " (" + std::to_string(partial[r].have) + " of "
                                                + std::to_string(partial[r].count) + " sockets)"
                                            : "");
      throw error(errc::connect_failed,
                  rank_str(o.rank) + " at " + published + " timed out after "
                    "MCCL_CONNECT_TIMEOUT_MS=" + std::to_string(o.connect_timeout.count())
                    + " waiting for rank(s) " + missing + " to connect"
                    + (gate.strays() > 0 ? " (meanwhile it refused " + std::to_string(gate.strays())
                                             + " stray connection(s), logged above)"
                                         : ""));
    }
    if (o.on_wait)
      o.on_wait();
    for (auto& in : gate.wait(listening, std::min(deadline, clock::now() + wait_slice))) {
      auto& s = in.socket;
      const auto& h = in.header;
      wire::hello hi;
      auto err = vet_hello(o, h, in.payload, conns, partial, hi);
      if (!err.empty()) {
        MCCL_LOG(warn, rank_str(o.rank) << " refused a connection from " << in.remote << ": " << err);
        send_control(*s, wire::frame_kind::refuse, o.comm_id, wire::encode_text(err),
                     std::min(deadline, clock::now() + std::chrono::milliseconds(200)));
        continue;
      }
      tune_socket(*s, o.socket_buffer_bytes);
      wire::hello ack{static_cast<uint32_t>(o.rank), hi.from_rank, static_cast<uint32_t>(o.world),
                      o.token};
      stripe_tag tag{o.sockets_per_peer, static_cast<int>(stripes_in(h)), static_cast<int>(h.chunk)};
      err = send_control(*s, wire::frame_kind::hello_ack, o.comm_id, wire::encode_hello(ack), deadline, tag);
      if (!err.empty()) {
        MCCL_LOG(warn, rank_str(o.rank) << ": handshake with rank " << hi.from_rank << " failed: " << err);
        continue;
      }
      MCCL_LOG(debug, rank_str(o.rank) << " accepted rank " << hi.from_rank << " from " << in.remote
                                       << (tag.count > 1 ? " (stripe " + std::to_string(tag.index) + " of "
                                                             + std::to_string(tag.count) + ")"
                                                         : std::string()));
      auto& a = partial[hi.from_rank];
      if (a.count == 0) {
        a.count = tag.count;
        a.stripes.resize(static_cast<std::size_t>(tag.count));
      }
      a.stripes[h.chunk] = handshaken{std::move(s), in.remote};
      if (++a.have < a.count)
        continue;
      conns[hi.from_rank] = make_connection(monitor, o, static_cast<int>(hi.from_rank), std::move(a.stripes));
      --expected;
    }
  }
  if (gate.strays() + gate.pending() > 0)
    MCCL_LOG(warn, rank_str(o.rank) << " refused " << gate.strays() << " stray connection(s) to "
                                    << published << " while its peers connected (each logged above)"
                                    << (gate.pending() > 0 ? " and closes " + std::to_string(gate.pending())
                                                               + " that have sent no hello yet"
                                                           : std::string()));
  if (resumer) {
    // Resumes come to the first address; a resumed link uses one socket,
    // whatever MCCL_SOCKETS_PER_PEER gave it before.
    int fd = ::dup(acceptors.front()->native_handle());
    if (fd < 0)
      throw error(errc::connect_failed, rank_str(o.rank) + " cannot keep its listening socket "
                                          "open for reconnects (MCCL_RECONNECT_MS): dup failed");
    *resumer = std::make_shared<tcp_link_resumer>(monitor, o, fd, std::move(endpoints));
  }
  return conns;
}

} // namespace mccl::transport
