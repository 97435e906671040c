#include "transport/store/tcp_store.hpp"

#include <mccl/error.hpp>
#include "config/log.hpp"
#include "transport/tcp/socket_util.hpp"

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <future>
#include <thread>

namespace mccl {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using transport::clock;

namespace {

constexpr uint8_t op_set = 1;
constexpr uint8_t op_check = 2;
constexpr uint8_t op_set_if_absent = 3;
constexpr uint32_t max_key = 1024;
constexpr uint32_t max_value = 1 << 20;
// Bounds on what all clients together may store, so a stray or buggy client
// cannot grow rank 0's memory without limit (a job stores a few keys per
// rank and communicator).
constexpr std::size_t max_keys = 1 << 16;
constexpr std::size_t max_total_bytes = 64u << 20;

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

uint32_t get_u32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

} // namespace

// ---- server -------------------------------------------------------------------

struct tcp_store_server::impl : std::enable_shared_from_this<impl> {
  explicit impl(asio::io_context& io) : acceptor(io) {}

  tcp::acceptor acceptor;
  std::map<std::string, std::string> values; // touched on the reactor thread only
  std::size_t total_bytes = 0;                // keys and values in `values`
  bool stopped = false;

  /// One client connection: reads requests one at a time and answers them.
  struct session : std::enable_shared_from_this<session> {
    session(std::shared_ptr<impl> owner, tcp::socket s)
      : owner(std::move(owner)), socket(std::move(s)) {}
    std::shared_ptr<impl> owner;
    tcp::socket socket;
    uint8_t head[5];
    std::string key;
    uint8_t len_buf[4];
    std::string value;
    std::string reply;

    void start() { read_head(); }

    void drop(const std::string& why) {
      boost::system::error_code ec;
      auto who = socket.remote_endpoint(ec);
      MCCL_LOG(warn, "rendezvous store: dropping client "
                       << (ec ? std::string("(address unknown)") : transport::to_string(who)) << ": "
                       << why);
      socket.close(ec);
    }

    void read_head() {
      auto self = shared_from_this();
      asio::async_read(socket, asio::buffer(head), [self](auto ec, std::size_t) {
        if (ec)
          return; // client went away: normal at the end of rendezvous
        uint32_t klen = get_u32(self->head + 1);
        if (self->head[0] < op_set || self->head[0] > op_set_if_absent || klen == 0 || klen > max_key)
          return self->drop("malformed request (op " + std::to_string(self->head[0])
                            + ", key length " + std::to_string(klen) + ")");
        self->key.assign(klen, '\0');
        asio::async_read(self->socket, asio::buffer(self->key), [self](auto ec2, std::size_t) {
          if (ec2)
            return;
          asio::async_read(self->socket, asio::buffer(self->len_buf), [self](auto ec3, std::size_t) {
            if (ec3)
              return;
            uint32_t vlen = get_u32(self->len_buf);
            if (vlen > max_value)
              return self->drop("value of " + std::to_string(vlen) + " bytes exceeds 1 MiB");
            self->value.assign(vlen, '\0');
            asio::async_read(self->socket, asio::buffer(self->value), [self](auto ec4, std::size_t) {
              if (!ec4)
                self->answer();
            });
          });
        });
      });
    }

    void answer() {
      reply.clear();
      if (head[0] == op_set_if_absent) {
        auto held = owner->values.find(key);
        if (held != owner->values.end()) {
          reply.push_back(0);
          put_u32(reply, static_cast<uint32_t>(held->second.size()));
          reply += held->second;
          return send_reply();
        }
      }
      if (head[0] == op_set || head[0] == op_set_if_absent) {
        auto old = owner->values.find(key);
        std::size_t freed = old == owner->values.end() ? 0 : old->first.size() + old->second.size();
        std::size_t total = owner->total_bytes - freed + key.size() + value.size();
        if ((old == owner->values.end() && owner->values.size() >= max_keys) || total > max_total_bytes)
          return drop("the store is full (" + std::to_string(owner->values.size()) + " keys, "
                      + std::to_string(owner->total_bytes) + " bytes); refusing key of "
                      + std::to_string(key.size() + value.size()) + " bytes");
        owner->total_bytes = total;
        owner->values[key] = value;
        reply.push_back(0);
        if (head[0] == op_set_if_absent) {
          put_u32(reply, static_cast<uint32_t>(value.size()));
          reply += value;
        } else {
          put_u32(reply, 0);
        }
      } else {
        auto i = owner->values.find(key);
        if (i == owner->values.end()) {
          reply.push_back(1);
          put_u32(reply, 0);
        } else {
          reply.push_back(0);
          put_u32(reply, static_cast<uint32_t>(i->second.size()));
          reply += i->second;
        }
      }
      send_reply();
    }

    void send_reply() {
      auto self = shared_from_this();
      asio::async_write(socket, asio::buffer(reply), [self](auto ec, std::size_t) {
        if (!ec)
          self->read_head();
      });
    }
  };

  void accept() {
    auto self = shared_from_this();
    acceptor.async_accept([self](boost::system::error_code ec, tcp::socket s) {
      if (self->stopped)
        return;
      if (!ec) {
        boost::system::error_code ignored;
        s.set_option(tcp::no_delay(true), ignored);
        std::make_shared<session>(self, std::move(s))->start();
      }
      self->accept();
    });
  }
};

tcp_store_server::tcp_store_server(asio::io_context& io, const tcp::endpoint& where)
  : impl_(std::make_shared<impl>(io)) {
  boost::system::error_code ec;
  impl_->acceptor.open(where.protocol(), ec);
  if (!ec)
    impl_->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec)
    impl_->acceptor.bind(where, ec);
  if (!ec)
    impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw error(errc::rendezvous_failed,
                "rank 0 cannot serve the rendezvous store on MASTER_ADDR:MASTER_PORT = "
                  + transport::to_string(where) + ": " + ec.message()
                  + (ec == asio::error::address_in_use
                       ? " (another job or a stale process holds MASTER_PORT; pick another port)"
                       : ""));
  auto i = impl_;
  asio::post(io, [i] { i->accept(); });
}

tcp_store_server::~tcp_store_server() {
  auto i = impl_;
  // Close on the reactor thread, where the acceptor lives; wait for it so
  // the port is free when the destructor returns.
  std::promise<void> done;
  auto fut = done.get_future();
  asio::post(i->acceptor.get_executor(), [i, &done] {
    i->stopped = true;
    boost::system::error_code ec;
    i->acceptor.close(ec);
    done.set_value();
  });
  fut.wait_for(std::chrono::seconds(1));
}

unsigned short tcp_store_server::port() const noexcept {
  boost::system::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

// ---- client -------------------------------------------------------------------

struct tcp_store_client::impl {
  impl(std::string h, unsigned short p, int r, std::chrono::milliseconds t, std::string w, std::string s)
    : host(std::move(h)), port(p), rank(r), connect_timeout(t), what(std::move(w)), server(std::move(s)) {}
  std::string host;
  unsigned short port;
  int rank;
  std::chrono::milliseconds connect_timeout;
  std::string what;   ///< "the rendezvous store at MASTER_ADDR:MASTER_PORT", for errors
  std::string server; ///< "rank 0": whose process serves it, for errors
  asio::io_context io;
  tcp::socket socket{io};
  std::mutex mutex; // one request at a time on the one connection
  std::string lost; ///< why an established connection failed; "" while none did

  std::string where() const { return host + ":" + std::to_string(port); }

  void ensure_connected() {
    if (socket.is_open())
      return;
    if (!lost.empty())
      throw error(errc::rendezvous_failed,
                  "rank " + std::to_string(rank) + " lost " + what + " = " + where() + " (" + lost + "): "
                    + server + ", which serves it, has exited or was killed");
    auto addr = transport::resolve_host(host, "MASTER_ADDR");
    auto deadline = clock::now() + connect_timeout;
    auto err = transport::connect_with_retry(socket, tcp::endpoint(addr, port), deadline);
    if (!err.empty())
      throw error(errc::rendezvous_failed,
                  "rank " + std::to_string(rank) + " cannot reach " + what + " = " + where()
                    + " within MCCL_CONNECT_TIMEOUT_MS=" + std::to_string(connect_timeout.count()) + ": " + err
                    + (what.find("MASTER_ADDR") != std::string::npos
                         ? " (is rank 0 running, and is MASTER_ADDR an address of rank 0's host?)"
                         : " (is " + server + " running, and is " + where() + " an address of its host?)"));
    boost::system::error_code ec;
    socket.set_option(tcp::no_delay(true), ec);
  }

  /// Sends one request and returns (status, value).
  std::pair<uint8_t, std::string> call(uint8_t op, const std::string& key, const std::string& value) {
    if (key.empty() || key.size() > max_key || value.size() > max_value)
      throw error(errc::invalid_argument, "rendezvous store: key or value too large: " + key);
    ensure_connected();
    std::string req;
    req.push_back(static_cast<char>(op));
    put_u32(req, static_cast<uint32_t>(key.size()));
    req += key;
    put_u32(req, static_cast<uint32_t>(value.size()));
    req += value;
    auto deadline = clock::now() + connect_timeout;
    auto fail = [&](const std::string& why) {
      boost::system::error_code ec;
      socket.close(ec);
      lost = why;
      return error(errc::rendezvous_failed,
                   "rank " + std::to_string(rank) + " lost " + what + " = " + where() + " (" + why + "): "
                     + server + ", which serves it, has exited or was killed");
    };
    auto err = transport::write_all(socket, req.data(), req.size(), deadline);
    if (!err.empty())
      throw fail(err);
    uint8_t head[5];
    err = transport::read_exact(socket, head, sizeof head, deadline);
    if (!err.empty())
      throw fail(err);
    uint32_t len = get_u32(head + 1);
    if (head[0] > 1 || len > max_value)
      throw fail("malformed reply");
    std::string out(len, '\0');
    err = transport::read_exact(socket, out.data(), len, deadline);
    if (!err.empty())
      throw fail(err);
    return {head[0], std::move(out)};
  }
};

tcp_store_client::tcp_store_client(std::string host, unsigned short port, int rank,
                                   std::chrono::milliseconds connect_timeout, std::string what,
                                   std::string server)
  : impl_(std::make_unique<impl>(std::move(host), port, rank, connect_timeout, std::move(what),
                                 std::move(server))) {
}

tcp_store_client::~tcp_store_client() = default;

void tcp_store_client::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> guard{impl_->mutex};
  impl_->call(op_set, key, value);
}

std::string tcp_store_client::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> guard{impl_->mutex};
  auto deadline = clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    auto [status, value] = impl_->call(op_check, key, {});
    if (status == 0)
      return value;
    if (clock::now() >= deadline)
      throw error(errc::rendezvous_failed,
                  "rank " + std::to_string(impl_->rank) + ": key \"" + key
                    + "\" was not published to the rendezvous store at " + impl_->where()
                    + " within " + std::to_string(timeout.count()) + " ms");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

std::optional<std::string> tcp_store_client::try_get(const std::string& key) {
  std::lock_guard<std::mutex> guard{impl_->mutex};
  auto [status, value] = impl_->call(op_check, key, {});
  if (status != 0)
    return std::nullopt;
  return value;
}

std::string tcp_store_client::set_if_absent(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> guard{impl_->mutex};
  return impl_->call(op_set_if_absent, key, value).second;
}

} // namespace mccl
