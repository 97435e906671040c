#include "transport/tcp/tcp_connection.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mccl::transport {

tcp_connection::tcp_connection(std::shared_ptr<readiness_monitor> monitor, boost::asio::ip::tcp::socket&& connected,
                               std::string description)
  : monitor_(std::move(monitor)), description_(std::move(description)) {
  connected.non_blocking(true);
  // release() also takes the descriptor out of Asio's reactor, so arriving
  // data wakes nobody unless this connection asked for it.
  fd_ = connected.release();
  watch_id_ = monitor_->add(fd_);
}

tcp_connection::~tcp_connection() {
  close();
  ::close(fd_);
}

// The hot path uses the system calls directly on the descriptor: one
// sendmsg/recv per call, no reactor involvement, so a spinning link pays
// exactly one syscall per attempt.
io_result tcp_connection::write_some(const iovec* iov, int count) {
  io_result r;
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(count);
  for (;;) {
    auto n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      r.bytes = static_cast<std::size_t>(n);
      return r;
    }
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return r;
    r.error = std::strerror(errno);
    return r;
  }
}

io_result tcp_connection::read_some(void* data, std::size_t len) {
  io_result r;
  for (;;) {
    auto n = ::recv(fd_, data, len, MSG_DONTWAIT);
    if (n > 0) {
      r.bytes = static_cast<std::size_t>(n);
      return r;
    }
    if (n == 0) {
      r.closed = true;
      return r;
    }
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return r;
    r.error = std::strerror(errno);
    r.closed = true;
    return r;
  }
}

void tcp_connection::notify_when_ready(bool want_write, std::function<void()> ready) {
  if (closed_.load()) {
    ready(); // the link learns of the close on its next read
    return;
  }
  monitor_->arm(watch_id_, want_write, std::move(ready));
}

void tcp_connection::close() {
  if (closed_.exchange(true))
    return;
  // shutdown() so the peer sees EOF at once; the descriptor itself is closed
  // with the object, when no link or inline op can still be using it.
  monitor_->remove(watch_id_);
  ::shutdown(fd_, SHUT_RDWR);
}

} // namespace mccl::transport
