#pragma once
/// The default rendezvous store: rank 0 serves a small key-value store on
/// MASTER_ADDR:MASTER_PORT (on the runtime's reactor thread); every rank,
/// rank 0 included, talks to it as a client.
///
/// Wire (all little-endian): request = op u8 (1 set, 2 check, 3 set if
/// absent), key_len u32, key, value_len u32, value. Reply = status u8 (0 ok,
/// 1 missing), len u32, value (check: the value; set if absent: the value
/// the key holds afterwards). Keys are capped at 1 KiB and values at 1 MiB before allocation.

#include <mccl/store.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <memory>

namespace mccl {

/// Serves the store until destroyed. Binds before returning, so clients that
/// start afterwards (or retry) find it.
class tcp_store_server {
public:
  /// Throws mccl::error(rendezvous_failed) naming the address when it cannot bind.
  tcp_store_server(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& where);
  ~tcp_store_server();

  /// The port actually bound (useful when asked for port 0).
  unsigned short port() const noexcept;

  struct impl;

private:
  std::shared_ptr<impl> impl_;
};

/// Client side. Each call connects once (retrying until connect_timeout on
/// first use, since rank 0 may start later) and keeps the connection. Once
/// an established connection fails, the store is taken for gone (rank 0,
/// which serves it, exited): every later call fails at once, saying so,
/// instead of retrying for connect_timeout.
class tcp_store_client : public store {
public:
  /// `what` and `server` name the store and who serves it in errors: by
  /// default the rendezvous store at MASTER_ADDR:MASTER_PORT and rank 0;
  /// a standby store (api/communicator/standby_store.hpp) names its own.
  tcp_store_client(std::string host, unsigned short port, int rank,
                   std::chrono::milliseconds connect_timeout,
                   std::string what = "the rendezvous store at MASTER_ADDR:MASTER_PORT",
                   std::string server = "rank 0");
  ~tcp_store_client() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::optional<std::string> try_get(const std::string& key) override;
  std::string set_if_absent(const std::string& key, const std::string& value) override;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace mccl
