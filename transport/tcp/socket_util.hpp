#pragma once
/// Bounded, blocking socket helpers for the bootstrap phase (rendezvous and
/// connection set-up), which runs in the caller's thread before any actor
/// exists. Every call takes a deadline; none can wait longer.

#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace mccl::transport {

using clock = std::chrono::steady_clock;
using tcp = boost::asio::ip::tcp;

/// Waits until fd is readable (or writable) or the deadline passes.
/// Returns false on timeout; throws nothing.
bool wait_fd(int fd, bool for_write, clock::time_point deadline) noexcept;

/// Waits until one of `fds` is readable (or failed) or the deadline passes.
/// Returns its index, or -1 on timeout; throws nothing.
int wait_any_readable(const std::vector<int>& fds, clock::time_point deadline) noexcept;

/// Writes all of [data, data+len) on a non-blocking socket before the
/// deadline. Returns "" on success or a description of the failure.
std::string write_all(tcp::socket& sock, const void* data, std::size_t len,
                      clock::time_point deadline);

/// Reads exactly len bytes before the deadline; "" on success, else why not
/// ("timed out", "connection closed by peer", an errno text).
std::string read_exact(tcp::socket& sock, void* data, std::size_t len,
                       clock::time_point deadline);

/// Tries to connect to ep until the deadline (retrying refused connections
/// every few milliseconds, as the peer may not listen yet). On success the
/// socket is connected and non-blocking; on failure returns the last error.
std::string connect_with_retry(tcp::socket& sock, const tcp::endpoint& ep,
                               clock::time_point deadline);

/// Resolves "host" (name or literal) to an IPv4/IPv6 address; throws
/// mccl::error(invalid_argument) naming `what` when it cannot.
boost::asio::ip::address resolve_host(const std::string& host, const std::string& what);

/// Sets TCP_NODELAY and SO_SNDBUF/SO_RCVBUF. A connection that leaves this
/// host gets `buffer_bytes` for both, or OS autotuning when it is 0. A
/// same-host connection gets a receive buffer of `buffer_bytes` (default
/// same_host_receive_buffer_bytes when 0), a send buffer of a quarter of
/// that, so a sender rarely waits for the window, at most
/// same_host_notsent_lowat bytes waiting unsent in the kernel, and Reno
/// congestion control (see socket_util.cpp for why).
void tune_socket(tcp::socket& sock, std::size_t buffer_bytes);

constexpr std::size_t same_host_receive_buffer_bytes = std::size_t{4} << 20;
constexpr std::size_t same_host_notsent_lowat = std::size_t{256} << 10;

/// True when both ends of a connected socket are on this host (a loopback
/// peer, or a peer at our own address).
bool is_same_host(const tcp::socket& sock);

/// "127.0.0.1:4321".
std::string to_string(const tcp::endpoint& ep);

} // namespace mccl::transport
