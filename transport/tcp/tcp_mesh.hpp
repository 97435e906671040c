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
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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
};

/// Sockets between two ranks: `setting` (MCCL_SOCKETS_PER_PEER) when it is
/// not 0, else one per address the listening peer published, at most
/// max_stripes.
int stripes_for_pair(int setting, std::size_t peer_addresses);
constexpr int max_stripes = 16;

class tcp_link_resumer;

/// How many hosts the ranks of a built mesh run on: ranks whose first
/// published address is the same share a host (so every rank counts alike;
/// ranks on one machine all publish its loopback or the same interface).
/// Reads every rank's endpoint from o.rendezvous under o.key_prefix.
int count_hosts(const mesh_options& o);

/// Connections indexed by peer rank (null at the caller's own rank), woken
/// through `monitor`. Throws mccl::error naming the rank and address it could not
/// reach, or why a peer refused. With `resumer` set, the listening socket
/// stays open after the mesh is built and *resumer re-establishes lost links
/// (MCCL_RECONNECT_MS).
std::vector<connection_ptr> build_tcp_mesh(const std::shared_ptr<readiness_monitor>& monitor,
                                           const mesh_options& opts,
                                           std::shared_ptr<tcp_link_resumer>* resumer = nullptr);

/// Re-establishes lost links of one communicator (MCCL_RECONNECT_MS > 0).
/// The rank that dialled a link at first dials the peer's published address
/// again and sends a resume hello (handshake.hpp: resume_marker); the other
/// side accepts it on the mesh's listening socket, which stays open, only
/// while its own link to that rank waits to be resumed, with the same token,
/// communicator and rank checks as a fresh hello (vet_resume_hello). A
/// refused attempt (the peer has not noticed the loss yet) is retried every
/// 50 ms until the link's deadline. What each side already received is
/// settled afterwards by the channels themselves (transport/channel.hpp).
///
/// One thread per communicator: it waits on the listening socket and a
/// wake-up descriptor (in 200 ms steps, 20 ms while dialling, to check
/// deadlines), refuses strays, and dials with at most 500 ms per attempt.
class tcp_link_resumer : public resumer {
public:
  tcp_link_resumer(std::shared_ptr<readiness_monitor> monitor, mesh_options opts,
                   int listen_fd, std::vector<std::string> endpoints);
  ~tcp_link_resumer();
  tcp_link_resumer(const tcp_link_resumer&) = delete;
  tcp_link_resumer& operator=(const tcp_link_resumer&) = delete;

  /// The link to `peer` was lost: re-establish it before `deadline`. A
  /// second call for the same peer replaces the first (whose done is
  /// never called).
  void resume(int peer, std::chrono::steady_clock::time_point deadline, done_fn done) override;
  /// Forget `peer`'s request (its link gave up or stopped).
  void cancel(int peer) override;

private:
  struct request {
    std::chrono::steady_clock::time_point deadline;
    std::chrono::steady_clock::time_point next_try;
    done_fn done;
  };
  void run();
  void accept_one();
  /// One attempt to dial `peer`; "" and *conn set on success, else why not.
  std::string dial_once(int peer, std::chrono::steady_clock::time_point deadline,
                        connection_ptr* conn);
  void finish(int peer, connection_ptr conn, const std::string& why);
  void poke(); ///< wakes the thread


  std::shared_ptr<readiness_monitor> monitor_;
  mesh_options opts_;
  int listen_fd_;
  std::vector<std::string> endpoints_; ///< published "addr:port" by rank
  std::mutex mutex_;
  int wake_fd_ = -1; ///< eventfd: a new request or stop
  std::map<int, request> requests_; ///< by peer rank
  bool stop_ = false;
  std::thread thread_;
};

} // namespace mccl::transport
