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

/// A stripe dialled and greeted whose answer (hello_ack) has not been read.
struct greeted {
  int peer = -1;
  stripe_tag tag;
  std::unique_ptr<tcp::socket> socket; ///< null once answered
  std::string ep_text;                 ///< the address dialled, "10.0.0.2:4000"
  std::string where;                   ///< "rank 1 at 10.0.0.2:4000 (stripe 0 of 2)"
};

/// Dials stripe `tag.index` of the pair with `peer` at `ep` and sends the
/// hello; the answer is read later (take_answer), so a rank dials all its
/// lower peers and serves its higher ones side by side.
greeted greet(const mesh_options& o, int peer, const std::string& ep_text, const tcp::endpoint& ep,
              const stripe_tag& tag, asio::io_context& io, clock::time_point deadline) {
  greeted g{peer, tag, std::make_unique<tcp::socket>(io), ep_text,
            rank_str(peer) + " at " + ep_text
              + (tag.count > 1 ? " (stripe " + std::to_string(tag.index) + " of "
                                   + std::to_string(tag.count) + ")"
                               : "")};
  auto err = connect_with_retry(*g.socket, ep, deadline);
  if (!err.empty())
    throw error(errc::connect_failed,
                rank_str(o.rank) + " could not connect to " + g.where
                  + " within MCCL_CONNECT_TIMEOUT_MS=" + std::to_string(o.connect_timeout.count())
                  + ": " + err);
  tune_socket(*g.socket, o.socket_buffer_bytes);
  wire::hello hi{static_cast<uint32_t>(o.rank), static_cast<uint32_t>(peer),
                 static_cast<uint32_t>(o.world), o.token};
  err = send_control(*g.socket, wire::frame_kind::hello, o.comm_id, wire::encode_hello(hi), deadline, tag);
  if (!err.empty())
    throw error(errc::connect_failed, "handshake with " + g.where + " failed: " + err);
  return g;
}

/// Reads and checks the peer's answer to `g`'s hello (its socket is
/// readable); returns the stripe, or throws why the peer refused.
handshaken take_answer(const mesh_options& o, greeted& g, clock::time_point deadline) {
  wire::frame_header h;
  std::vector<uint8_t> payload;
  auto err = read_control(*g.socket, deadline, h, payload);
  if (!err.empty())
    throw error(errc::connect_failed, "handshake with " + g.where + " failed: " + err);
  if (h.kind == wire::frame_kind::refuse) {
    std::string why;
    auto text = wire::decode_text(payload.data(), payload.size(), &why);
    throw error(errc::handshake_refused, g.where + " refused the connection from " + rank_str(o.rank)
                                           + ": " + (text ? *text : why));
  }
  std::string why;
  auto ack = wire::decode_hello(payload.data(), payload.size(), &why);
  if (h.kind != wire::frame_kind::hello_ack || h.comm_id != o.comm_id || !ack
      || ack->from_rank != static_cast<uint32_t>(g.peer) || !tokens_equal(ack->token, o.token)
      || h.chunk != static_cast<uint32_t>(g.tag.index))
    throw error(errc::handshake_refused, "unexpected handshake reply from " + g.where + " ("
                                           + wire::to_string(h.kind) + (why.empty() ? "" : ": " + why) + ")");
  return {std::move(g.socket), g.ep_text};
}

/// What `peer` published in the store (its listening addresses), waiting
/// for it until `deadline`.
std::string published_by(const mesh_options& o, int peer, clock::time_point deadline) {
  auto key = o.key_prefix + "ep/" + std::to_string(peer);
  for (;;) {
    if (auto v = o.rendezvous->try_get(key))
      return *v;
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
}

/// The stripes of one pair that are through the handshake so far.
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

  // Every rank dials its lower peers and accepts its higher ones. The dials
  // only connect and send the hello; their answers are read in the same
  // loop that accepts, so nobody waits for a peer to finish its own dials
  // first (waiting made a chain as long as the world: 64 ranks spent most of
  // their setup in it).
  std::vector<std::string> endpoints(static_cast<std::size_t>(o.world));
  std::vector<greeted> greetings;
  std::vector<arriving> partial(static_cast<std::size_t>(o.world));
  for (int peer = 0; peer < o.rank; ++peer) {
    endpoints[peer] = published_by(o, peer, deadline);
    auto eps = parse_endpoints(endpoints[peer], peer);
    int count = stripes_for_pair(o.sockets_per_peer, eps.size());
    partial[peer].count = count;
    partial[peer].stripes.resize(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
      const auto& [text, ep] = eps[static_cast<std::size_t>(i) % eps.size()];
      greetings.push_back(greet(o, peer, text, ep, stripe_tag{o.sockets_per_peer, count, i}, local, deadline));
    }
    if (count > 1)
      MCCL_LOG(debug, rank_str(o.rank) << ": " << count << " sockets to " << rank_str(peer));
  }
  auto add_stripe = [&](int peer, int index, handshaken stripe) {
    auto& a = partial[peer];
    a.stripes[static_cast<std::size_t>(index)] = std::move(stripe);
    if (++a.have == a.count)
      conns[peer] = make_connection(monitor, o, peer, std::move(a.stripes));
  };

  std::vector<int> listening;
  for (auto& a : acceptors)
    listening.push_back(a->native_handle());
  // Strays (idle, slow or garbage connections) are read side by side with
  // the real peers, each for at most 5 s: any number of them cannot hold
  // the job up.
  hello_gate gate(local, rank_str(o.rank), o.comm_id, std::chrono::seconds(5));
  auto missing = [&](int from, int to) {
    std::string out;
    for (int r = from; r < to; ++r)
      if (!conns[r])
        out += (out.empty() ? "" : ", ") + std::to_string(r)
               + (partial[r].have > 0 ? " (" + std::to_string(partial[r].have) + " of "
                                          + std::to_string(partial[r].count) + " sockets)"
                                      : "");
    return out;
  };
  for (;;) {
    auto unanswered = missing(0, o.rank), unconnected = missing(o.rank + 1, o.world);
    if (unanswered.empty() && unconnected.empty())
      break;
    if (clock::now() >= deadline)
      throw error(errc::connect_failed,
                  rank_str(o.rank) + " at " + published + " timed out after "
                    "MCCL_CONNECT_TIMEOUT_MS=" + std::to_string(o.connect_timeout.count())
                    + " waiting for rank(s) "
                    + (unconnected.empty() ? unanswered + " to answer its hello"
                                           : unconnected + " to connect"
                                               + (unanswered.empty() ? ""
                                                                     : " and rank(s) " + unanswered
                                                                         + " to answer its hello"))
                    + (gate.strays() > 0 ? " (meanwhile it refused " + std::to_string(gate.strays())
                                             + " stray connection(s), logged above)"
                                         : ""));
    if (o.on_wait)
      o.on_wait();
    std::vector<int> awaiting_answers;
    for (auto& g : greetings)
      if (g.socket)
        awaiting_answers.push_back(g.socket->native_handle());
    for (auto& in : gate.wait(listening, std::min(deadline, clock::now() + wait_slice), awaiting_answers)) {
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
      add_stripe(static_cast<int>(hi.from_rank), tag.index, handshaken{std::move(s), in.remote});
    }
    for (auto& g : greetings)
      if (g.socket && wait_fd(g.socket->native_handle(), false, clock::now()))
        add_stripe(g.peer, g.tag.index, take_answer(o, g, deadline));
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
