#pragma once
/// Connections accepted on a rank's listening sockets whose first frame
/// (a hello) has not arrived yet, read side by side. A peer is not
/// authenticated until its hello has been vetted, so nothing here trusts
/// it: every read is non-blocking, each connection has its own deadline
/// (the mesh: 5 s, the resumer: 500 ms), a frame's length is bounded before
/// anything is allocated, and at most max_pending connections wait at
/// once (the oldest is dropped for a newer one). A stray that says nothing,
/// closes, or sends something that is not an mccl frame costs the rank one
/// descriptor until its deadline and never delays the real peers.
///
/// Used by the mesh builder (tcp_mesh.cpp) and the link resumer
/// (tcp_link_resumer.cpp); what a hello must contain is checked by the
/// caller (transport/wire/handshake.hpp).
///
/// Blocking: wait() blocks the calling thread until a hello is complete,
/// a descriptor in `also` is readable, or its deadline passes.

#include "transport/tcp/socket_util.hpp"
#include "transport/wire/frame.hpp"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mccl::transport {

class hello_gate {
public:
  /// A connection whose first frame arrived whole (not yet vetted).
  struct arrival {
    std::unique_ptr<tcp::socket> socket; ///< non-blocking
    std::string remote;                  ///< "127.0.0.1:40000"
    wire::frame_header header;
    std::vector<uint8_t> payload;
  };

  /// `owner` names the rank in log lines ("rank 2"); malformed frames are
  /// answered with a refuse frame of communicator `comm_id`.
  hello_gate(boost::asio::io_context& io, std::string owner, uint32_t comm_id,
             std::chrono::milliseconds per_connection_limit, std::size_t max_pending = 128);
  ~hello_gate();
  hello_gate(const hello_gate&) = delete;
  hello_gate& operator=(const hello_gate&) = delete;

  /// Accepts what is waiting on `listeners` (non-blocking descriptors),
  /// reads every pending connection, and returns the hellos that are
  /// complete; waits for one until `until` or until a descriptor of `also`
  /// is readable, and returns empty then. Connections that fail, time out or
  /// send a malformed frame are logged at WARN and closed.
  std::vector<arrival> wait(const std::vector<int>& listeners, clock::time_point until,
                            const std::vector<int>& also = {});

  /// Connections dropped so far without a complete hello.
  std::size_t strays() const noexcept { return strays_; }
  /// Connections waiting now.
  std::size_t pending() const noexcept { return pending_.size(); }

private:
  struct waiting;
  void accept_from(int listener);
  /// Reads what `p` has; true when it is finished (complete or dropped).
  bool read_some(waiting& p, std::vector<arrival>& done);
  void drop(waiting& p, const std::string& why, bool refuse);

  boost::asio::io_context& io_;
  std::string owner_;
  uint32_t comm_id_;
  std::chrono::milliseconds limit_;
  std::size_t max_pending_;
  std::vector<std::unique_ptr<waiting>> pending_;
  std::size_t strays_ = 0;
};

} // namespace mccl::transport
