// Standby stores (api/communicator/standby_store.hpp): one per process, served on the
// runtime's reactor; clients to another process's.

#include "api/communicator/standby_store.hpp"

#include "config/log.hpp"
#include "transport/store/tcp_store.hpp"
#include "transport/tcp/interfaces.hpp"
#include "transport/tcp/socket_util.hpp"

#include <cstdlib>

namespace mccl::detail {

namespace {

struct host_port {
  std::string host;
  unsigned short port = 0;
};

/// "10.0.0.2:4242" or "[::1]:4242"; nullopt when malformed.
std::optional<host_port> split_address(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= address.size())
    return std::nullopt;
  host_port out;
  out.host = address.substr(0, colon);
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']')
    out.host = out.host.substr(1, out.host.size() - 2);
  char* end = nullptr;
  long port = std::strtol(address.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port < 1 || port > 65535)
    return std::nullopt;
  out.port = static_cast<unsigned short>(port);
  return out;
}

} // namespace

void check_store_address(const std::string& address, const std::string& what) {
  if (!split_address(address))
    throw error(errc::invalid_argument, what + ": store address " + mccl::quoted(address)
                                          + " is not ip:port (an IPv6 address in brackets)");
}

std::string store_host(const std::string& address) {
  auto where = split_address(address);
  return where ? where->host : std::string("127.0.0.1");
}

std::string serve_standby(runtime::impl& rt, const std::string& ip) {
  std::lock_guard<std::mutex> guard{rt.standby_mutex};
  if (rt.standby)
    return rt.standby_address;
  auto addr = transport::resolve_host(ip, "the standby store's address");
  rt.standby = std::make_shared<tcp_store_server>(rt.reactor->io(), boost::asio::ip::tcp::endpoint(addr, 0));
  rt.standby_address = transport::to_string(boost::asio::ip::tcp::endpoint(addr, rt.standby->port()));
  MCCL_LOG(debug, "standby rendezvous store of this process at " << rt.standby_address);
  return rt.standby_address;
}

std::string serve_standby(runtime::impl& rt, const config& cfg, const std::string& master_addr) {
  {
    std::lock_guard<std::mutex> guard{rt.standby_mutex};
    if (rt.standby)
      return rt.standby_address;
  }
  auto master = transport::resolve_host(master_addr.empty() ? "127.0.0.1" : master_addr, "MASTER_ADDR");
  auto choice = transport::choose_listen_addresses(cfg.listen_addr, cfg.ifname, master,
                                                   transport::local_interfaces());
  return serve_standby(rt, choice.advertised.front().to_string());
}

store_ptr standby_client(const std::string& address, int rank, std::chrono::milliseconds timeout,
                         const std::string& server) {
  auto where = split_address(address);
  if (!where)
    throw error(errc::invalid_argument, "rank " + std::to_string(rank) + ": standby store address "
                                          + mccl::quoted(address) + " is not ip:port");
  return std::make_shared<tcp_store_client>(where->host, where->port, rank, timeout,
                                            "the standby rendezvous store of " + server, server);
}

} // namespace mccl::detail
