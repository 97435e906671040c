#pragma once
/// One transport connection to one peer, as a link actor sees it: a byte
/// stream with non-blocking reads and gathered writes, plus a way to be told
/// when it is worth trying again. TCP implements it, and so does the
/// simulated network for deterministic tests (sim_network.hpp); shared memory
/// and RDMA implement the same interface later.
///
/// Threading: read_some / write_some are called by whoever holds the
/// connection (its link actor, or a caller that borrowed it through the
/// link's lease), one thread at a time. notify_when_ready's callback runs on
/// a waiting thread (TCP: the readiness monitor's) and must only post a
/// message.

#include <sys/uio.h>

#include <cstddef>
#include <functional>
#include <memory>
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

class connection {
public:
  virtual ~connection() = default;

  /// Never blocks. Writes as much of the gathered buffers as the kernel takes.
  virtual io_result write_some(const iovec* iov, int count) = 0;

  /// Never blocks. Reads up to len bytes; bytes == 0 without closed/error
  /// means nothing is available now.
  virtual io_result read_some(void* data, std::size_t len) = 0;

  /// Never blocks. Asks for one call of `ready` (on a waiting thread) once
  /// the connection is readable, or writable when `want_write`, or failed.
  virtual void notify_when_ready(bool want_write, std::function<void()> ready) = 0;

  /// Never blocks. Closes the stream; pending notifications are cancelled
  /// (their callbacks may still run once).
  virtual void close() = 0;

  /// For a caller that drives the connection itself for a while (the inline
  /// path, actors/inline_path.hpp): a descriptor it can poll(2), or -1 when
  /// the connection has none (then it is never driven that way). Ask again
  /// before every poll: a connection over several sockets
  /// (striped_connection.hpp) points it at the ones its stream waits on.
  virtual int poll_fd() const { return -1; }
  /// Holds back notify_when_ready callbacks while someone else drives the
  /// connection; resume re-arms them (and fires at once if already ready).
  virtual void suspend_notifications() {}
  virtual void resume_notifications() {}

  /// A lost link was re-established (MCCL_RECONNECT_MS) over `fresh`, a
  /// new connection to the same peer: what the link uses from now on. A
  /// decorator takes `fresh` as its new inner connection and keeps its own
  /// state (the fault injector's fire counts), so returns itself.
  virtual std::shared_ptr<connection> resumed(std::shared_ptr<connection> fresh) { return fresh; }

  /// "rank 2 at 10.0.0.2:41234": for error messages.
  virtual const std::string& description() const = 0;
};

using connection_ptr = std::shared_ptr<connection>;

} // namespace mccl::transport
