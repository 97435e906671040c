#include "transport/interfaces.hpp"

#include "config/error.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstring>
#include <sstream>

namespace mccl::transport {

namespace asio = boost::asio;

std::vector<interface_address> local_interfaces() {
  std::vector<interface_address> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0)
    return out;
  for (auto* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
      continue;
    if (i->ifa_addr->sa_family == AF_INET) {
      auto* sa = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
      asio::ip::address_v4::bytes_type b;
      std::memcpy(b.data(), &sa->sin_addr, 4);
      out.push_back({i->ifa_name, asio::ip::address_v4(b)});
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      auto* sa = reinterpret_cast<sockaddr_in6*>(i->ifa_addr);
      asio::ip::address_v6::bytes_type b;
      std::memcpy(b.data(), &sa->sin6_addr, 16);
      out.push_back({i->ifa_name, asio::ip::address_v6(b, sa->sin6_scope_id)});
    }
  }
  ::freeifaddrs(list);
  return out;
}

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty())
      out.push_back(item);
  return out;
}

bool has_prefix(const std::string& name, const std::vector<std::string>& prefixes) {
  for (const auto& p : prefixes)
    if (name.compare(0, p.size(), p) == 0)
      return true;
  return false;
}

} // namespace

asio::ip::address address_for_ifname(const std::string& spec) {
  bool exclude = !spec.empty() && spec[0] == '^';
  auto prefixes = split_list(exclude ? spec.substr(1) : spec);
  auto all = local_interfaces();
  const interface_address* v6 = nullptr;
  for (const auto& i : all) {
    if (has_prefix(i.name, prefixes) == exclude)
      continue;
    if (i.address.is_v4())
      return i.address;
    if (!v6)
      v6 = &i;
  }
  if (v6)
    return v6->address;
  std::string known;
  for (const auto& i : all)
    known += (known.empty() ? "" : ", ") + i.name + " (" + i.address.to_string() + ")";
  throw error(errc::invalid_config, "MCCL_IFNAME=\"" + spec + "\" matches no interface that is up; "
                                    "this host has: " + (known.empty() ? "none" : known));
}

asio::ip::address address_routing_to(const asio::ip::address& target) {
  if (target.is_loopback())
    return target;
  // Connecting a UDP socket sends nothing; it only asks the kernel for the
  // route, whose source address is the one peers can reach us at.
  asio::io_context io;
  asio::ip::udp::socket s(io);
  boost::system::error_code ec;
  s.connect(asio::ip::udp::endpoint(target, 9), ec);
  if (!ec) {
    auto local = s.local_endpoint(ec);
    if (!ec)
      return local.address();
  }
  return target.is_v4() ? asio::ip::address(asio::ip::address_v4::any())
                        : asio::ip::address(asio::ip::address_v6::any());
}

} // namespace mccl::transport
