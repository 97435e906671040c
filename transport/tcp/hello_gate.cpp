#include "transport/tcp/hello_gate.hpp"

#include "config/log.hpp"
#include "transport/tcp/handshake_io.hpp"
#include "transport/wire/handshake.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace mccl::transport {

namespace asio = boost::asio;

struct hello_gate::waiting {
  std::unique_ptr<tcp::socket> socket;
  std::string remote;
  clock::time_point accepted;
  clock::time_point deadline;
  uint8_t head[wire::header_size];
  std::size_t have = 0; ///< bytes of head, then of payload
  bool header_done = false;
  wire::frame_header header;
  std::vector<uint8_t> payload;
  bool finished = false;
};

hello_gate::hello_gate(asio::io_context& io, std::string owner, uint32_t comm_id,
                       std::chrono::milliseconds per_connection_limit, std::size_t max_pending)
  : io_(io), owner_(std::move(owner)), comm_id_(comm_id), limit_(per_connection_limit),
    max_pending_(std::max<std::size_t>(max_pending, 1)) {}

hello_gate::~hello_gate() = default;

void hello_gate::drop(waiting& p, const std::string& why, bool refuse) {
  ++strays_;
  MCCL_LOG(warn, owner_ << " refused a connection from " << p.remote << ": " << why);
  if (refuse) // a short, bounded courtesy: the stray learns why
    send_control(*p.socket, wire::frame_kind::refuse, comm_id_, wire::encode_text(why),
                 clock::now() + std::chrono::milliseconds(100));
  boost::system::error_code ec;
  p.socket->close(ec);
  p.finished = true;
}

void hello_gate::accept_from(int listener) {
  // Everything waiting on this listener, not one per wake-up: a burst of
  // strays must not queue the real peers behind it.
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage addr{};
    socklen_t addr_len = sizeof addr;
    int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&addr), &addr_len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return; // nothing (more) waiting, or the dialer gave up already
    auto p = std::make_unique<waiting>();
    p->socket = std::make_unique<tcp::socket>(io_);
    boost::system::error_code ec;
    p->socket->assign(addr.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
    if (ec) {
      ::close(fd);
      continue;
    }
    // Asio must know: its blocking reads would otherwise poll with no
    // deadline on EAGAIN.
    p->socket->non_blocking(true, ec);
    auto remote = p->socket->remote_endpoint(ec);
    p->remote = ec ? std::string("(address unknown)") : to_string(remote);
    p->accepted = clock::now();
    p->deadline = p->accepted + limit_;
    if (pending_.size() >= max_pending_) {
      auto& oldest = *pending_.front();
      drop(oldest, "it sent no complete hello, and " + std::to_string(max_pending_)
                     + " connections are waiting for theirs (a flood of strays?)", false);
      pending_.erase(pending_.begin());
    }
    pending_.push_back(std::move(p));
  }
}

bool hello_gate::read_some(waiting& p, std::vector<arrival>& done) {
  for (;;) {
    uint8_t* where;
    std::size_t want;
    if (!p.header_done) {
      where = p.head + p.have;
      want = sizeof p.head - p.have;
    } else {
      where = p.payload.data() + p.have;
      want = p.payload.size() - p.have;
    }
    if (want > 0) {
      boost::system::error_code ec;
      auto n = p.socket->read_some(asio::buffer(where, want), ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again)
        return false;
      if (ec == asio::error::eof) {
        drop(p, "it closed after " + std::to_string(p.have) + " byte(s), before a complete hello",
             false);
        return true;
      }
      if (ec) {
        drop(p, "reading its hello failed: " + ec.message(), false);
        return true;
      }
      p.have += n;
      if (n < want)
        continue;
    }
    if (!p.header_done) {
      auto res = wire::decode_header(p.head, sizeof p.head, max_handshake_payload);
      if (res.status != wire::decode_status::ok) {
        drop(p, "malformed frame: " + res.reason, true);
        return true;
      }
      p.header = res.header;
      p.header_done = true;
      p.have = 0;
      p.payload.resize(p.header.payload_len);
      continue;
    }
    arrival a;
    a.socket = std::move(p.socket);
    a.remote = std::move(p.remote);
    a.header = p.header;
    a.payload = std::move(p.payload);
    done.push_back(std::move(a));
    p.finished = true;
    return true;
  }
}

std::vector<hello_gate::arrival> hello_gate::wait(const std::vector<int>& listeners,
                                                  clock::time_point until,
                                                  const std::vector<int>& also) {
  std::vector<arrival> done;
  for (;;) {
    auto now = clock::now();
    for (auto& p : pending_)
      if (!p->finished && now >= p->deadline)
        drop(*p, "it sent no complete hello within "
                   + std::to_string(limit_.count()) + " ms (" + std::to_string(p->have)
                   + " byte(s) received)", false);
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                  [](const auto& p) { return p->finished; }),
                   pending_.end());
    if (!done.empty())
      return done;
    // Wake for the next arrival, the next stray deadline, or `until`.
    auto wake = until;
    for (auto& p : pending_)
      wake = std::min(wake, p->deadline);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now);
    if (now >= until)
      return done;
    std::vector<pollfd> fds;
    for (int fd : listeners)
      fds.push_back({fd, POLLIN, 0});
    for (int fd : also)
      fds.push_back({fd, POLLIN, 0});
    for (auto& p : pending_)
      fds.push_back({p->socket->native_handle(), POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(),
                    static_cast<int>(std::clamp<long long>(left.count() + 1, 0, 1000)));
    if (rc < 0 && errno != EINTR)
      return done; // the caller's next accept or read says what is wrong
    if (rc <= 0)
      continue;
    std::size_t i = 0;
    for (; i < listeners.size(); ++i)
      if (fds[i].revents)
        accept_from(listeners[i]);
    bool woken = false;
    for (std::size_t j = 0; j < also.size(); ++j, ++i)
      woken |= fds[i].revents != 0;
    // fds beyond here follow pending_ as it was before accept_from added
    // (or dropped) entries; read every live connection, which is cheap and
    // avoids matching indices.
    for (auto& p : pending_)
      if (!p->finished)
        read_some(*p, done);
    if (woken && done.empty()) {
      pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                    [](const auto& p) { return p->finished; }),
                     pending_.end());
      return done;
    }
  }
}

} // namespace mccl::transport
