#pragma once
/// The transport contract: one connection to one peer, a reliable ordered
/// byte stream. TCP (tcp/: one socket or several striped), shared memory
/// (shm/: two rings beside the pair's TCP socket, which carries wake-ups),
/// the simulated networks (sim/) and the fault decorator over any of them
/// (fault/) implement it; RDMA (rdma/) is only probed, with no data path
/// yet. Everything above it (the channel, channel.hpp, which the peer's
/// link owns, collectives/engine/peer_link.hpp, kept by the peer's link
/// actor, actors/link_actor.hpp) sees only this interface.
///
/// Threading: one thread at a time drives a connection (calls read_some,
/// write_some, notify_when_ready, poll_fd): the engine's leader, through
/// the peer's link. close()
/// and description() may be called from any thread. Nothing here ever
/// blocks, in the manner of NCCL's net plugin and Gloo's pair: a call does
/// what it can now and says how much.

#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

namespace mccl::transport {

/// Result of a non-blocking transfer: bytes moved, and whether the stream
/// failed (closed is true with an empty error when the peer closed cleanly).
struct io_result {
  std::size_t bytes = 0;
  bool closed = false;
  std::string error; // non-empty: the OS error text (errno), stream unusable
};

/// What an ABORT frame says: the rank that aborted first, the error code
/// and the reason. A transport that can leave it beside the stream does
/// (connection::release_buffers), for a peer whose stream cannot carry it.
struct abort_note {
  int origin = -1;
  uint32_t code = 0;
  std::string reason;
  /// A revoke's end (code revoked): the revoke point the aborting rank
  /// agreed, which its peers take if its REVOKE frame never reached them.
  uint64_t revoke_point = 0;
};

class connection;
using connection_ptr = std::shared_ptr<connection>;

class connection {
public:
  virtual ~connection() = default;

  /// Never blocks. Writes as much of the gathered buffers as the transport
  /// takes now (0 bytes when it takes nothing); the caller passes the rest
  /// again later. Bytes not reported written must stay unchanged until they
  /// are: a transport may read them after the call (shared memory's single
  /// copy lets the peer read them straight from the caller's memory), and
  /// skips, when they are passed again, those it took already.
  virtual io_result write_some(const iovec* iov, int count) = 0;
  /// Never blocks. The caller aborts, saying `note` (its ABORT frame goes
  /// next, if the stream can take it), and drops what was not reported
  /// written: from now on the connection references none of its buffers.
  /// Where it had taken some of those bytes already, the stream cannot go
  /// on and fails on both ends (the peer never gets them). Transports that
  /// copy what they take have nothing to drop. A transport with a way
  /// beside the stream (shared memory: the segment) leaves `note` there,
  /// so a peer whose stream ends without the ABORT frame (cut at a dropped
  /// buffer, or full while the peer was stopped) still learns why
  /// (peer_abort()).
  virtual void release_buffers(const abort_note& note) { (void)note; }

  /// Never blocks. Once a read found the stream ended or failed: the ABORT
  /// the peer left beside the stream (release_buffers), if any.
  virtual std::optional<abort_note> peer_abort() const { return std::nullopt; }

  /// Never blocks. Reads up to len bytes; bytes == 0 without closed or
  /// error means nothing is available now.
  virtual io_result read_some(void* data, std::size_t len) = 0;

  /// Never blocks. A hint: false only when read_some would certainly find
  /// nothing now (no bytes, no end of stream, no failure), so a pass over
  /// many idle connections can skip the read. Transports that cannot tell
  /// without trying (a socket) answer true.
  virtual bool maybe_readable() const { return true; }

  /// Never blocks. Asks for one call of `ready` once the connection is
  /// readable, or writable when `want_write`, or failed; at once (possibly
  /// on this thread) when that already holds. One callback per direction
  /// is kept; a new one replaces the old. The callback runs on whatever
  /// thread notices (TCP: the readiness monitor's; the simulated network:
  /// the thread that delivers bytes) and must only signal, never drive the
  /// connection. This is how a driver waits on any transport.
  virtual void notify_when_ready(bool want_write, std::function<void()> ready) = 0;

  /// Never blocks. Closes the stream; pending notifications are cancelled
  /// (their callbacks may still run once).
  virtual void close() = 0;

  /// Never blocks. An optional shortcut for waiting: a descriptor that
  /// poll(2) reports readable (writable) when read_some (write_some) can
  /// make progress, or -1 when there is none; then drivers wait through
  /// notify_when_ready. Correctness never depends on it. Ask again before
  /// every wait: it may change (a striped connection points it at the
  /// stripe its stream waits on; a fault decorator holding bytes back
  /// answers -1).
  virtual int poll_fd() const { return -1; }

  /// Never blocks. True when poll_fd() reports readable exactly when
  /// read_some can make progress (the transport holds no bytes of its own
  /// between reads): a pass over many peers may then skip reading a
  /// connection whose descriptor polls idle. A plain socket is exact; a
  /// striped or fault-injecting connection is not.
  virtual bool poll_fd_exact() const { return false; }

  /// A lost connection was re-established over `fresh`, a new connection
  /// to the same peer: returns what to use from now on. A decorator takes
  /// `fresh` as its new inner connection and keeps its own state (the
  /// fault injector's fire counts), so it returns itself.
  virtual connection_ptr resumed(connection_ptr fresh) { return fresh; }

  /// "rank 2 at 10.0.0.2:41234": for error messages.
  virtual const std::string& description() const = 0;
};

/// Re-establishes lost connections of one communicator
/// (MCCL_RECONNECT_MS); TCP implements it (tcp/tcp_link_resumer.hpp).
class resumer {
public:
  /// Called once per resume(), on a thread of the resumer's: the new
  /// connection, or null and why not (the deadline passed, or the
  /// resumer stopped).
  using done_fn = std::function<void(connection_ptr conn, const std::string& why)>;

  virtual ~resumer() = default;
  /// Never blocks. The connection to `peer` was lost: re-establish it
  /// before `deadline`. A second call for the same peer replaces the first
  /// (whose done is never called).
  virtual void resume(int peer, std::chrono::steady_clock::time_point deadline, done_fn done) = 0;
  /// Never blocks. Forget `peer`'s request.
  virtual void cancel(int peer) = 0;
};

} // namespace mccl::transport
