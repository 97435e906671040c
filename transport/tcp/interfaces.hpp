#pragma once
/// Which local addresses a rank listens on: MCCL_LISTEN_ADDR if set, else the
/// addresses of the interfaces MCCL_IFNAME selects, else the address that
/// routes to MASTER_ADDR (loopback when the master is local).
///
/// The matching is done by pure functions over an interface list so that it
/// can be tested without the host's real interfaces; local_interfaces()
/// supplies the real list.

#include <boost/asio/ip/address.hpp>

#include <string>
#include <vector>

namespace mccl::transport {

struct interface_address {
  std::string name;
  boost::asio::ip::address address;
  bool loopback = false;
};

/// Every (interface, address) pair of this host that is up.
std::vector<interface_address> local_interfaces();

/// "eth0 (10.0.0.2), lo (127.0.0.1)", or "none": for error messages.
std::string describe_interfaces(const std::vector<interface_address>& all);

/// The entries of `all` an MCCL_IFNAME spec selects: "eth0" or "eth,en" keep
/// names starting with one of the prefixes; "^docker,lo" keeps every other
/// name except loopback ones (loopback is used only when named). Keeps the
/// order of `all`.
std::vector<interface_address> match_ifname(const std::string& spec,
                                            const std::vector<interface_address>& all);

/// One address per selected interface (its first IPv4 address, else its first
/// IPv6 one), in interface order. Throws mccl::error(invalid_config) naming
/// the spec and listing the interfaces that exist when nothing matches.
std::vector<boost::asio::ip::address> addresses_for_ifname(const std::string& spec,
                                                           const std::vector<interface_address>& all);

/// Checks one MCCL_LISTEN_ADDR address: it must be assigned to an interface of
/// `all` (or be the unspecified address 0.0.0.0 / ::). Throws
/// mccl::error(invalid_config) listing the interfaces that exist otherwise.
boost::asio::ip::address checked_listen_addr(const std::string& text,
                                             const std::vector<interface_address>& all);

/// The local address the kernel would use to reach `target`.
boost::asio::ip::address address_routing_to(const boost::asio::ip::address& target);

/// Where a rank listens and why (the reason is logged).
struct listen_choice {
  std::vector<boost::asio::ip::address> addresses; ///< to bind; at least one
  /// What peers dial, one per entry of `addresses`: the same address, except
  /// that an unspecified one (0.0.0.0) is replaced by the route to the master.
  std::vector<boost::asio::ip::address> advertised;
  std::string reason; ///< "MCCL_IFNAME=eth matched eth0 (10.0.0.2)"
};

/// Applies MCCL_LISTEN_ADDR (`listen_addr`: empty, or addresses separated by
/// commas), MCCL_IFNAME
/// (`ifname`, may be empty) and, with neither, the route to `master`.
listen_choice choose_listen_addresses(const std::string& listen_addr, const std::string& ifname,
                                      const boost::asio::ip::address& master,
                                      const std::vector<interface_address>& all);

} // namespace mccl::transport
