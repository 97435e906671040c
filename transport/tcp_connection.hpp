#pragma once
/// TCP implementation of transport::connection over a Boost.Asio socket in
/// non-blocking mode, with TCP_NODELAY and the link profile's buffer sizes.

#include "transport/connection.hpp"

#include <boost/asio/ip/tcp.hpp>

namespace mccl::transport {

class tcp_connection : public connection,
                       public std::enable_shared_from_this<tcp_connection> {
public:
  /// Takes a connected socket; re-homes it on `io` (the reactor's context).
  tcp_connection(boost::asio::io_context& io, boost::asio::ip::tcp::socket&& connected,
                 std::string description);
  ~tcp_connection() override;

  io_result write_some(const iovec* iov, int count) override;
  io_result read_some(void* data, std::size_t len) override;
  void notify_when_ready(bool want_write, std::function<void()> ready) override;
  void close() override;
  const std::string& description() const override { return description_; }

private:
  boost::asio::io_context& io_;
  boost::asio::ip::tcp::socket socket_;
  int fd_;
  std::string description_;
};

} // namespace mccl::transport
