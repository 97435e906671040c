// Interface choice (MCCL_IFNAME, MCCL_LISTEN_ADDR, the route to MASTER_ADDR)
// over a made-up interface list, so the rules are checked whatever the test
// machine's real interfaces are.
#include <mccl/error.hpp>
#include "transport/tcp/interfaces.hpp"

#include <gtest/gtest.h>

namespace {

using mccl::transport::interface_address;
namespace ip = boost::asio::ip;

std::vector<interface_address> sample_host() {
  return {
    {"lo", ip::make_address("127.0.0.1"), true},
    {"lo", ip::make_address("::1"), true},
    {"eth0", ip::make_address("fe80::1"), false},
    {"eth0", ip::make_address("10.0.0.2"), false},
    {"eth1", ip::make_address("10.1.0.2"), false},
    {"enp3s0", ip::make_address("192.168.5.7"), false},
    {"docker0", ip::make_address("172.17.0.1"), false},
    {"ib0", ip::make_address("fd00::7"), false},
  };
}

std::vector<std::string> names(const std::vector<interface_address>& list) {
  std::vector<std::string> out;
  for (const auto& i : list)
    out.push_back(i.name + "=" + i.address.to_string());
  return out;
}

std::vector<std::string> texts(const std::vector<ip::address>& list) {
  std::vector<std::string> out;
  for (const auto& a : list)
    out.push_back(a.to_string());
  return out;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const mccl::error& e) {
    EXPECT_EQ(e.code(), mccl::errc::invalid_config);
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return {};
}

TEST(Interfaces, IfnamePrefixListKeepsOrder) {
  auto m = mccl::transport::match_ifname("en,eth", sample_host());
  EXPECT_EQ(names(m), (std::vector<std::string>{"eth0=fe80::1", "eth0=10.0.0.2", "eth1=10.1.0.2",
                                                "enp3s0=192.168.5.7"}));
}

TEST(Interfaces, IfnameExactNameIsAPrefixToo) {
  auto m = mccl::transport::match_ifname("eth1", sample_host());
  EXPECT_EQ(names(m), (std::vector<std::string>{"eth1=10.1.0.2"}));
}

TEST(Interfaces, ExclusionSkipsLoopbackUnlessNamed) {
  auto m = mccl::transport::match_ifname("^docker,eth", sample_host());
  EXPECT_EQ(names(m), (std::vector<std::string>{"enp3s0=192.168.5.7", "ib0=fd00::7"}));
  auto lo = mccl::transport::match_ifname("lo", sample_host());
  EXPECT_EQ(lo.size(), 2u);
}

TEST(Interfaces, OneAddressPerInterfacePreferringIPv4) {
  auto a = mccl::transport::addresses_for_ifname("eth,ib", sample_host());
  EXPECT_EQ(texts(a), (std::vector<std::string>{"10.0.0.2", "10.1.0.2", "fd00::7"}));
}

TEST(Interfaces, NoMatchListsWhatExists) {
  auto msg = message_of([] { mccl::transport::addresses_for_ifname("wlan", sample_host()); });
  EXPECT_NE(msg.find("MCCL_IFNAME=\"wlan\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("eth0 (10.0.0.2)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("docker0 (172.17.0.1)"), std::string::npos) << msg;
  // Excluding everything real leaves nothing: also an error, not loopback.
  msg = message_of([] { mccl::transport::addresses_for_ifname("^eth,en,docker,ib", sample_host()); });
  EXPECT_NE(msg.find("matches no interface"), std::string::npos) << msg;
}

TEST(Interfaces, ListenAddrMustBeLocal) {
  EXPECT_EQ(mccl::transport::checked_listen_addr("10.1.0.2", sample_host()).to_string(), "10.1.0.2");
  EXPECT_TRUE(mccl::transport::checked_listen_addr("0.0.0.0", sample_host()).is_unspecified());
  auto msg = message_of([] { mccl::transport::checked_listen_addr("10.9.9.9", sample_host()); });
  EXPECT_NE(msg.find("MCCL_LISTEN_ADDR=\"10.9.9.9\" is not an address of this host"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("enp3s0 (192.168.5.7)"), std::string::npos) << msg;
}

TEST(Interfaces, ChoiceOrderListenAddrThenIfnameThenRoute) {
  auto master = ip::make_address("127.0.0.1");
  auto c = mccl::transport::choose_listen_addresses("10.1.0.2,10.0.0.2", "enp", master, sample_host());
  EXPECT_EQ(texts(c.addresses), (std::vector<std::string>{"10.1.0.2", "10.0.0.2"}));
  EXPECT_EQ(texts(c.advertised), texts(c.addresses));
  EXPECT_NE(c.reason.find("MCCL_LISTEN_ADDR"), std::string::npos);

  c = mccl::transport::choose_listen_addresses("", "enp", master, sample_host());
  EXPECT_EQ(texts(c.addresses), (std::vector<std::string>{"192.168.5.7"}));
  EXPECT_NE(c.reason.find("matched enp3s0 (192.168.5.7)"), std::string::npos) << c.reason;

  // A loopback master is reached over loopback.
  c = mccl::transport::choose_listen_addresses("", "", master, sample_host());
  EXPECT_EQ(texts(c.addresses), (std::vector<std::string>{"127.0.0.1"}));
  EXPECT_NE(c.reason.find("routes to MASTER_ADDR 127.0.0.1"), std::string::npos) << c.reason;
}

TEST(Interfaces, UnspecifiedListenAddressAdvertisesTheRoute) {
  auto c = mccl::transport::choose_listen_addresses("0.0.0.0", "", ip::make_address("127.0.0.1"),
                                                    sample_host());
  ASSERT_EQ(c.addresses.size(), 1u);
  EXPECT_TRUE(c.addresses[0].is_unspecified());
  // Peers must never be told to dial 0.0.0.0 (that is their own host).
  EXPECT_EQ(c.advertised[0].to_string(), "127.0.0.1");
}

TEST(Interfaces, RealHostListsLoopback) {
  auto all = mccl::transport::local_interfaces();
  auto lo = mccl::transport::match_ifname("lo", all);
  ASSERT_FALSE(lo.empty()) << mccl::transport::describe_interfaces(all);
  EXPECT_TRUE(lo[0].loopback);
}

} // namespace
