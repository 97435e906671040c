#include "api/status/status_server.hpp"

#include <mccl/error.hpp>
#include "config/log.hpp"

#include <chrono>

namespace mccl {

namespace asio = boost::asio;
using asio::ip::tcp;

/// One connection: the request is read (at most 8 KiB, within 2 s), then
/// one answer is written and the connection closed.
struct status_server::session {
  explicit session(asio::io_context& io) : socket(io), timer(io) {}
  tcp::socket socket;
  asio::steady_timer timer;
  asio::streambuf request{8192};
  std::string reply;
};

status_server::status_server(const std::string& address, unsigned short port, handler metrics,
                             handler status)
  : acceptor_(io_), metrics_(std::move(metrics)), status_(std::move(status)) {
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(address, ec);
  if (ec)
    throw error(errc::invalid_config, "MCCL_METRICS_ADDR=\"" + address + "\": " + ec.message());
  tcp::endpoint ep(addr, port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec)
    acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec)
    acceptor_.bind(ep, ec);
  if (!ec)
    acceptor_.listen(16, ec);
  if (ec)
    throw error(errc::invalid_config, "MCCL_METRICS_PORT: cannot serve metrics on " + address + ":"
                                        + std::to_string(port) + ": " + ec.message());
  port_ = acceptor_.local_endpoint().port();
  accept();
  thread_ = std::thread([this] { io_.run(); });
}

status_server::~status_server() {
  io_.stop();
  if (thread_.joinable())
    thread_.join();
}

void status_server::accept() {
  auto s = std::make_shared<session>(io_);
  acceptor_.async_accept(s->socket, [this, s](const boost::system::error_code& ec) {
    if (ec == asio::error::operation_aborted)
      return;
    if (!ec) {
      s->timer.expires_after(std::chrono::seconds(2));
      s->timer.async_wait([s](const boost::system::error_code& e) {
        if (!e)
          s->socket.close(); // a client that never finished its request
      });
      asio::async_read_until(s->socket, s->request, "\r\n\r\n",
                             [this, s](const boost::system::error_code& e, std::size_t) {
                               if (!e)
                                 answer(s);
                               else
                                 s->timer.cancel();
                             });
    }
    accept();
  });
}

void status_server::answer(const std::shared_ptr<session>& s) {
  // The request is in: the deadline was for reading it. (A status answer
  // may take a while; the reply is small and goes out at once.)
  s->timer.cancel();
  std::istream in(&s->request);
  std::string method, path;
  in >> method >> path;
  std::string status_line = "200 OK";
  page p;
  try {
    if (method != "GET") {
      status_line = "405 Method Not Allowed";
      p = {"text/plain", "mccl serves GET /metrics and GET /status\n"};
    } else if (path == "/metrics") {
      p = metrics_();
    } else if (path == "/status") {
      p = status_();
    } else {
      status_line = "404 Not Found";
      p = {"text/plain", "mccl serves /metrics (Prometheus) and /status (JSON)\n"};
    }
  } catch (const std::exception& e) {
    status_line = "500 Internal Server Error";
    p = {"text/plain", std::string(e.what()) + "\n"};
  }
  s->reply = "HTTP/1.0 " + status_line + "\r\nContent-Type: " + p.content_type
             + "\r\nContent-Length: " + std::to_string(p.body.size())
             + "\r\nConnection: close\r\n\r\n" + p.body;
  asio::async_write(s->socket, asio::buffer(s->reply), [s](const boost::system::error_code&, std::size_t) {
    boost::system::error_code ignored;
    s->socket.shutdown(tcp::socket::shutdown_both, ignored);
    s->socket.close(ignored);
  });
}

} // namespace mccl
