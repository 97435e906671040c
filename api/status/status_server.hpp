#pragma once
/// A small HTTP endpoint on one rank's host (MCCL_METRICS_PORT): GET
/// /metrics answers in Prometheus' text format, GET /status with what every
/// communicator of the process is doing (JSON, for tools/mcclstatus). Its
/// own thread and io_context: a query that waits for an engine never holds
/// up the connections of the reactor.

#include <boost/asio.hpp>

#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace mccl {

class status_server {
public:
  /// Each answer: content type and body.
  struct page {
    std::string content_type;
    std::string body;
  };
  using handler = std::function<page()>;

  /// Listens on address:port (port 0: any free one). Throws
  /// mccl::error(invalid_config) naming MCCL_METRICS_PORT when it cannot.
  status_server(const std::string& address, unsigned short port, handler metrics, handler status);
  /// Stops serving and joins the thread.
  ~status_server();

  status_server(const status_server&) = delete;
  status_server& operator=(const status_server&) = delete;

  unsigned short port() const noexcept { return port_; }

private:
  struct session;
  void accept();
  void answer(const std::shared_ptr<session>& s);

  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  handler metrics_;
  handler status_;
  unsigned short port_ = 0;
  std::thread thread_;
};

} // namespace mccl
