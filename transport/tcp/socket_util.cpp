#include "transport/tcp/socket_util.hpp"

#include <mccl/error.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <thread>

namespace mccl::transport {

namespace asio = boost::asio;

bool wait_fd(int fd, bool for_write, clock::time_point deadline) noexcept {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() < 0)
      return false;
    pollfd p{fd, static_cast<short>(for_write ? POLLOUT : POLLIN), 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count() + 1, 1000)));
    if (rc > 0)
      return true; // readable, writable, or an error the next call will report
    if (rc < 0 && errno != EINTR)
      return true;
  }
}

int wait_any_readable(const std::vector<int>& fds, clock::time_point deadline) noexcept {
  std::vector<pollfd> polled;
  for (int fd : fds)
    polled.push_back(pollfd{fd, POLLIN, 0});
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() < 0)
      return -1;
    int rc = ::poll(polled.data(), polled.size(), static_cast<int>(std::min<long long>(left.count() + 1, 1000)));
    if (rc < 0 && errno != EINTR)
      return 0; // the next accept reports what is wrong
    for (std::size_t i = 0; rc > 0 && i < polled.size(); ++i)
      if (polled[i].revents != 0)
        return static_cast<int>(i);
  }
}

std::string write_all(tcp::socket& sock, const void* data, std::size_t len,
                      clock::time_point deadline) {
  auto p = static_cast<const char*>(data);
  while (len > 0) {
    boost::system::error_code ec;
    auto n = sock.write_some(asio::buffer(p, len), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      if (!wait_fd(sock.native_handle(), true, deadline))
        return "timed out while sending";
      continue;
    }
    if (ec)
      return ec.message();
    p += n;
    len -= n;
  }
  return {};
}

std::string read_exact(tcp::socket& sock, void* data, std::size_t len,
                       clock::time_point deadline) {
  auto p = static_cast<char*>(data);
  while (len > 0) {
    boost::system::error_code ec;
    auto n = sock.read_some(asio::buffer(p, len), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      if (!wait_fd(sock.native_handle(), false, deadline))
        return "timed out while receiving";
      continue;
    }
    if (ec == asio::error::eof)
      return "connection closed by peer";
    if (ec)
      return ec.message();
    p += n;
    len -= n;
  }
  return {};
}

std::string connect_with_retry(tcp::socket& sock, const tcp::endpoint& ep,
                               clock::time_point deadline) {
  std::string last = "timed out";
  auto backoff = std::chrono::milliseconds(2);
  while (clock::now() < deadline) {
    boost::system::error_code ec;
    if (sock.is_open())
      sock.close(ec);
    sock.open(ep.protocol(), ec);
    if (ec)
      return ec.message();
    sock.non_blocking(true, ec);
    sock.connect(ep, ec);
    if (ec == asio::error::in_progress || ec == asio::error::would_block) {
      if (!wait_fd(sock.native_handle(), true, deadline))
        return last == "timed out" ? "timed out while connecting" : last;
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(sock.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len);
      ec.assign(err, boost::system::system_category());
    }
    if (!ec)
      return {};
    last = ec.message();
    // The peer may not be listening yet: retry with a short, growing pause.
    auto pause = std::min(backoff, std::chrono::duration_cast<std::chrono::milliseconds>(
                                     deadline - clock::now()));
    if (pause.count() > 0)
      std::this_thread::sleep_for(pause);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
  boost::system::error_code ignored;
  sock.close(ignored);
  return last;
}

asio::ip::address resolve_host(const std::string& host, const std::string& what) {
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (!ec)
    return addr;
  asio::io_context io;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(host, "", ec);
  if (ec || results.empty())
    throw error(errc::invalid_argument,
                what + "=\"" + host + "\" cannot be resolved: " + (ec ? ec.message() : "no address"));
  // Prefer IPv4: loopback set-ups and most clusters listen there.
  for (const auto& r : results)
    if (r.endpoint().address().is_v4())
      return r.endpoint().address();
  return results.begin()->endpoint().address();
}

bool is_same_host(const tcp::socket& sock) {
  boost::system::error_code ec;
  auto local = sock.local_endpoint(ec);
  if (ec)
    return false;
  auto remote = sock.remote_endpoint(ec);
  if (ec)
    return false;
  return remote.address().is_loopback() || remote.address() == local.address();
}

void tune_socket(tcp::socket& sock, std::size_t buffer_bytes) {
  boost::system::error_code ec;
  sock.set_option(tcp::no_delay(true), ec);
  if (!is_same_host(sock)) {
    if (buffer_bytes > 0) {
      sock.set_option(asio::socket_base::send_buffer_size(static_cast<int>(buffer_bytes)), ec);
      sock.set_option(asio::socket_base::receive_buffer_size(static_cast<int>(buffer_bytes)), ec);
    }
    return;
  }
  // Between two ranks on one host, the kernel's TCP settings for real
  // networks cost most of the bandwidth (measured on 2 vCPUs, Linux 6.x):
  //
  // - Autotuning starts at 16 KiB of send and 128 KiB of receive buffer and
  //   grows once per round trip, so a 1 MiB chunk needs several write/read
  //   rounds between the two ranks' threads. Fixed buffers take a chunk in
  //   one call (the kernel caps them at net.core.wmem_max / rmem_max).
  // - Loopback delivers each segment through the backlog of the CPU that
  //   transmits it. A sender whose data waits for the receive window is
  //   transmitted from wherever the window-opening ACK is processed (the
  //   peer's CPU), or, with a pacing congestion control such as BBR, from a
  //   timer: segments of one stream then cross two CPUs' backlogs, arrive
  //   out of order, and trigger spurious fast retransmits, SACK recovery and
  //   stalls of milliseconds (nstat: thousands of TcpRetransSegs per GiB).
  //   A send buffer well below the receive buffer keeps the sender from
  //   waiting for the window most of the time, so segments leave from the
  //   sender's own sendmsg; Reno (always allowed, no pacing) keeps timers
  //   out of it. Congestion control has nothing to control on a loopback
  //   path. When the peer stops reading for a while (it is reducing) the
  //   window still fills; TCP_NOTSENT_LOWAT then bounds what waits unsent in
  //   the kernel for the window-opening ACK to same_host_notsent_lowat, and
  //   the rest stays in the link's queue until the socket is writable again.
  //
  // 2-rank allreduce with all three: about 1.4x the busbw at 64 MiB, 1.7x
  // at 1 MiB; retransmitted segments per run from ~1900 to a few.
  std::size_t receive_bytes = buffer_bytes > 0 ? buffer_bytes : same_host_receive_buffer_bytes;
  std::size_t send_bytes = std::max<std::size_t>(receive_bytes / 4, 64 * 1024);
  sock.set_option(asio::socket_base::send_buffer_size(static_cast<int>(send_bytes)), ec);
  sock.set_option(asio::socket_base::receive_buffer_size(static_cast<int>(receive_bytes)), ec);
  static const char reno[] = "reno";
  // Best effort: a kernel without Reno keeps its default.
  ::setsockopt(sock.native_handle(), IPPROTO_TCP, TCP_CONGESTION, reno, sizeof reno - 1);
  int lowat = static_cast<int>(same_host_notsent_lowat);
  ::setsockopt(sock.native_handle(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat);
}

std::string to_string(const tcp::endpoint& ep) {
  auto a = ep.address();
  return (a.is_v6() ? "[" + a.to_string() + "]" : a.to_string()) + ":" + std::to_string(ep.port());
}

} // namespace mccl::transport
