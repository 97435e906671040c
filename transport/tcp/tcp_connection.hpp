#pragma once
/// TCP implementation of transport::connection: a connected, non-blocking
/// socket with TCP_NODELAY and the link profile's buffer sizes. Bytes move
/// with plain system calls on the descriptor; readiness comes from the
/// runtime's readiness_monitor, not from an Asio reactor.

#include "transport/connection.hpp"
#include "transport/tcp/readiness.hpp"

#include <boost/asio/ip/tcp.hpp>

namespace mccl::transport {

class tcp_connection : public connection {
public:
  /// Takes the descriptor of a connected socket (the Asio socket is left
  /// empty) and registers it with `monitor`, which it keeps alive.
  tcp_connection(std::shared_ptr<readiness_monitor> monitor, boost::asio::ip::tcp::socket&& connected,
                 std::string description);
  ~tcp_connection() override;

  io_result write_some(const iovec* iov, int count) override;
  io_result read_some(void* data, std::size_t len) override;
  void notify_when_ready(bool want_write, std::function<void()> ready) override;
  void close() override;
  const std::string& description() const override { return description_; }
  int poll_fd() const override { return fd_; }
  bool poll_fd_exact() const override { return true; }

private:
  std::shared_ptr<readiness_monitor> monitor_;
  int fd_;
  uint64_t watch_id_;
  std::atomic<bool> closed_{false};
  std::string description_;
};

} // namespace mccl::transport
