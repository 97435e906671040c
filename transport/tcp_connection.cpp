#include "transport/tcp_connection.hpp"

#include <boost/asio/post.hpp>

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace mccl::transport {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

tcp_connection::tcp_connection(asio::io_context& io, tcp::socket&& connected,
                               std::string description)
  : io_(io), socket_(io), description_(std::move(description)) {
  auto protocol = connected.local_endpoint().protocol();
  auto fd = connected.release();
  socket_.assign(protocol, fd);
  socket_.non_blocking(true);
  fd_ = socket_.native_handle();
}

tcp_connection::~tcp_connection() {
  boost::system::error_code ec;
  socket_.close(ec);
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
  // Arm on the reactor thread so the socket object is only ever touched
  // there (Asio sockets are not safe for concurrent use).
  auto self = shared_from_this();
  asio::post(io_, [self, want_write, ready = std::move(ready)]() mutable {
    if (!self->socket_.is_open()) {
      ready();
      return;
    }
    auto what = want_write ? tcp::socket::wait_write : tcp::socket::wait_read;
    self->socket_.async_wait(what, [ready = std::move(ready)](const boost::system::error_code&) {
      ready();
    });
  });
}

void tcp_connection::close() {
  auto self = shared_from_this();
  // shutdown() first so the peer sees EOF even if a reactor wait still holds
  // the descriptor for a moment.
  ::shutdown(fd_, SHUT_RDWR);
  asio::post(io_, [self] {
    boost::system::error_code ec;
    self->socket_.close(ec);
  });
}

} // namespace mccl::transport
