#include "transport/tcp/interfaces.hpp"

#include <mccl/error.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
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
    bool loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    if (i->ifa_addr->sa_family == AF_INET) {
      auto* sa = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
      asio::ip::address_v4::bytes_type b;
      std::memcpy(b.data(), &sa->sin_addr, 4);
      out.push_back({i->ifa_name, asio::ip::address_v4(b), loopback});
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      auto* sa = reinterpret_cast<sockaddr_in6*>(i->ifa_addr);
      asio::ip::address_v6::bytes_type b;
      std::memcpy(b.data(), &sa->sin6_addr, 16);
      out.push_back({i->ifa_name, asio::ip::address_v6(b, sa->sin6_scope_id), loopback});
    }
  }
  ::freeifaddrs(list);
  return out;
}

std::string describe_interfaces(const std::vector<interface_address>& all) {
  std::string out;
  for (const auto& i : all)
    out += (out.empty() ? "" : ", ") + i.name + " (" + i.address.to_string() + ")";
  return out.empty() ? "none" : out;
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

/// "eth0 (10.0.0.2)" for the interface that holds `a`, else just the address.
std::string name_address(const asio::ip::address& a, const std::vector<interface_address>& all) {
  for (const auto& i : all)
    if (i.address == a)
      return i.name + " (" + a.to_string() + ")";
  return a.to_string();
}

std::string join_named(const std::vector<asio::ip::address>& addrs,
                       const std::vector<interface_address>& all) {
  std::string out;
  for (const auto& a : addrs)
    out += (out.empty() ? "" : ", ") + name_address(a, all);
  return out;
}

} // namespace

std::vector<interface_address> match_ifname(const std::string& spec,
                                            const std::vector<interface_address>& all) {
  bool exclude = !spec.empty() && spec[0] == '^';
  auto prefixes = split_list(exclude ? spec.substr(1) : spec);
  std::vector<interface_address> out;
  for (const auto& i : all) {
    // An exclusion list means "any real network but these": loopback would
    // never reach another host, so it takes an explicit name.
    bool keep = exclude ? !has_prefix(i.name, prefixes) && !i.loopback : has_prefix(i.name, prefixes);
    if (keep)
      out.push_back(i);
  }
  return out;
}

std::vector<asio::ip::address> addresses_for_ifname(const std::string& spec,
                                                    const std::vector<interface_address>& all) {
  auto matched = match_ifname(spec, all);
  // Interface names in first-seen order, each with its preferred address.
  std::vector<std::string> names;
  for (const auto& i : matched)
    if (std::find(names.begin(), names.end(), i.name) == names.end())
      names.push_back(i.name);
  std::vector<asio::ip::address> out;
  for (const auto& name : names) {
    const interface_address* pick = nullptr;
    for (const auto& i : matched)
      if (i.name == name && (!pick || (i.address.is_v4() && !pick->address.is_v4())))
        pick = &i;
    out.push_back(pick->address);
  }
  if (out.empty())
    throw error(errc::invalid_config, "MCCL_IFNAME=\"" + spec + "\" matches no interface that is up; "
                                      "this host has: " + describe_interfaces(all));
  return out;
}

asio::ip::address checked_listen_addr(const std::string& text, const std::vector<interface_address>& all) {
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(text, ec);
  if (ec)
    throw error(errc::invalid_config, "MCCL_LISTEN_ADDR=\"" + text + "\" is not an IP address");
  if (addr.is_unspecified())
    return addr;
  for (const auto& i : all)
    if (i.address == addr)
      return addr;
  throw error(errc::invalid_config, "MCCL_LISTEN_ADDR=\"" + text + "\" is not an address of this "
                                    "host; this host has: " + describe_interfaces(all));
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

listen_choice choose_listen_addresses(const std::string& listen_addr, const std::string& ifname,
                                      const asio::ip::address& master,
                                      const std::vector<interface_address>& all) {
  listen_choice c;
  if (!listen_addr.empty()) {
    for (const auto& item : split_list(listen_addr))
      c.addresses.push_back(checked_listen_addr(item, all));
    c.reason = "MCCL_LISTEN_ADDR=" + listen_addr;
  } else if (!ifname.empty()) {
    c.addresses = addresses_for_ifname(ifname, all);
    c.reason = "MCCL_IFNAME=" + ifname + " matched " + join_named(c.addresses, all);
  } else {
    auto routed = address_routing_to(master);
    c.addresses.push_back(routed);
    c.reason = routed.is_unspecified()
                 ? "no route to MASTER_ADDR " + master.to_string() + ", so every interface"
                 : name_address(routed, all) + " routes to MASTER_ADDR " + master.to_string()
                     + " (set MCCL_IFNAME or MCCL_LISTEN_ADDR to choose another)";
  }
  for (const auto& a : c.addresses) {
    auto shown = a;
    if (a.is_unspecified()) {
      shown = address_routing_to(master);
      // Without a route either, loopback is all a peer could possibly use.
      if (shown.is_unspecified())
        shown = a.is_v4() ? asio::ip::address(asio::ip::address_v4::loopback())
                          : asio::ip::address(asio::ip::address_v6::loopback());
    }
    c.advertised.push_back(shown);
  }
  return c;
}

} // namespace mccl::transport
