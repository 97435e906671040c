#pragma once
/// Which local address a rank listens on: MCCL_LISTEN_ADDR if set, else an
/// address of the interface MCCL_IFNAME selects, else the address that
/// routes to MASTER_ADDR (loopback when the master is local).

#include <boost/asio/ip/address.hpp>

#include <string>
#include <vector>

namespace mccl::transport {

struct interface_address {
  std::string name;
  boost::asio::ip::address address;
};

/// Every (interface, address) pair of this host that is up.
std::vector<interface_address> local_interfaces();

/// Applies an MCCL_IFNAME spec ("eth0", "eth,en" prefixes, "^docker,lo" to
/// exclude) and returns the first matching IPv4 address (else IPv6).
/// Throws mccl::error(invalid_config) listing the interfaces that exist.
boost::asio::ip::address address_for_ifname(const std::string& spec);

/// The local address the kernel would use to reach `target`.
boost::asio::ip::address address_routing_to(const boost::asio::ip::address& target);

} // namespace mccl::transport
