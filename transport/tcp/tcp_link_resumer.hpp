#pragma once
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
/// One thread per communicator: it waits on the listening socket, the
/// sockets of its own resume hellos and a wake-up descriptor (in 200 ms
/// steps, 20 ms while dialling, to check deadlines), reads every connection
/// that has not sent its hello yet side by side and without blocking
/// (hello_gate.hpp: at most 500 ms each, so an idle stray delays neither a
/// resume nor the rank's exit), refuses strays, and dials with at most
/// 500 ms per attempt to connect and send the hello.
///
/// A resume hello once sent is never given up while the link's window
/// lasts: the dialler waits for the answer (a hello_ack, a refusal, or the
/// connection failing) however late it comes. The side that accepts
/// resumes the link as soon as it has sent its hello_ack; had the dialler
/// dropped the connection after a timeout of its own, a slow acceptor (a
/// loaded or briefly stopped process) would resume over a connection
/// nobody holds and lose the link again right after.

#include "transport/connection.hpp"
#include "transport/tcp/hello_gate.hpp"
#include "transport/tcp/readiness.hpp"
#include "transport/tcp/tcp_mesh.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mccl::transport {

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
    uint64_t id = 0; ///< tells a request from the one that replaced it
  };
  /// A resume hello sent to a peer, waiting for its answer (run's thread
  /// only).
  struct dial {
    uint64_t request_id = 0;
    std::unique_ptr<tcp::socket> socket;
  };
  void run();
  /// Vets a resume hello that arrived whole and answers it.
  void answer(hello_gate::arrival& in);
  /// Connects to `peer` and sends a resume hello, both before `deadline`:
  /// the dial then waits in dials_ for its answer; else why not.
  std::string start_dial(int peer, uint64_t request_id, std::chrono::steady_clock::time_point deadline);
  /// Reads the answer to the hello of dials_[peer] (readable now): the
  /// resumed connection, or why not (the dial is over either way).
  std::string take_answer(int peer, connection_ptr* conn);
  /// A failed attempt: the next in resume_retry_pause.
  void retry_later(int peer);
  void finish(int peer, connection_ptr conn, const std::string& why);
  void poke(); ///< wakes the thread


  std::shared_ptr<readiness_monitor> monitor_;
  mesh_options opts_;
  int listen_fd_;
  std::vector<std::string> endpoints_; ///< published "addr:port" by rank
  std::mutex mutex_;
  int wake_fd_ = -1; ///< eventfd: a new request or stop
  std::map<int, request> requests_; ///< by peer rank
  uint64_t next_request_id_ = 1;
  bool stop_ = false;
  boost::asio::io_context io_;         ///< owns accepted sockets until they are vetted, and dials' sockets
  std::map<int, dial> dials_;          ///< by peer rank (run's thread only)
  std::unique_ptr<hello_gate> gate_;  ///< connections not yet authenticated (run's thread only)
  std::thread thread_;
};

} // namespace mccl::transport
