#include "transport/sim/timed_network.hpp"

#include "transport/wire/frame.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <utility>

namespace mccl::transport {

namespace detail {

/// One direction of a pair of ranks.
struct timed_pipe {
  std::vector<uint8_t> readable; ///< arrived, not read: [read_pos, size)
  std::size_t read_pos = 0;
  std::size_t in_flight = 0; ///< written, not arrived
  double last_arrival = 0;   ///< bytes of one direction arrive in order
  bool writer_closed = false;
  bool reader_closed = false;
  bool reset = false;
  std::function<void()> on_readable;

  // Where the byte stream stands, to weigh payloads by payload_scale.
  uint8_t header[wire::header_size] = {};
  std::size_t header_have = 0;
  uint64_t payload_left = 0;
  bool payload_is_data = false;

  std::size_t available() const { return readable.size() - read_pos; }
};

struct arrival {
  double at;
  uint64_t order; ///< ties in write order
  int from;
  int to;
  std::vector<uint8_t> bytes;
  bool operator>(const arrival& o) const { return at != o.at ? at > o.at : order > o.order; }
};

struct port {
  double tx_free = 0;
  double rx_free = 0;
};

struct timed_state {
  timed_network_options opts;
  double now = 0;
  uint64_t writes = 0;
  std::size_t in_flight = 0;
  /// By from * world + to; null until the first byte or close. A slot
  /// costs a pointer (8 MiB for 1024 ranks); a pipe only once used.
  std::vector<std::unique_ptr<timed_pipe>> pipes;
  std::priority_queue<arrival, std::vector<arrival>, std::greater<arrival>> arrivals;
  std::vector<port> rank_ports;
  std::vector<port> nic_ports;
  /// By host: when its memory bus is free (host_bus_bytes_per_s).
  std::vector<double> bus_free;
  std::vector<char> dead;

  std::size_t slot(int from, int to) const {
    return static_cast<std::size_t>(from) * static_cast<std::size_t>(opts.world) + static_cast<std::size_t>(to);
  }

  timed_pipe* find(int from, int to) { return pipes[slot(from, to)].get(); }

  timed_pipe& pipe(int from, int to) {
    auto& p = pipes[slot(from, to)];
    if (!p)
      p = std::make_unique<timed_pipe>();
    return *p;
  }

  int host_of(int rank) const { return rank / std::max(1, opts.ranks_per_host); }

  /// Splits `n` bytes written on `p` at frame ends: (bytes, wire bytes) of
  /// each piece, payloads of data frames counting payload_scale times. Each
  /// piece arrives on its own, so a receiver gets the first frames of a
  /// large write while the rest are still on the wire.
  std::vector<std::pair<std::size_t, double>> pieces(timed_pipe& p, const uint8_t* data, std::size_t n) {
    std::vector<std::pair<std::size_t, double>> out;
    std::size_t start = 0;
    double w = 0;
    std::size_t i = 0;
    while (i < n) {
      if (p.payload_left > 0) {
        auto take = static_cast<std::size_t>(std::min<uint64_t>(p.payload_left, n - i));
        w += static_cast<double>(take) * (p.payload_is_data ? opts.payload_scale : 1.0);
        p.payload_left -= take;
        i += take;
        if (p.payload_left == 0) { // a frame ends here
          out.emplace_back(i - start, w);
          start = i;
          w = 0;
        }
        continue;
      }
      auto take = std::min(wire::header_size - p.header_have, n - i);
      std::memcpy(p.header + p.header_have, data + i, take);
      p.header_have += take;
      w += static_cast<double>(take);
      i += take;
      if (p.header_have == wire::header_size) {
        auto d = wire::decode_header(p.header, wire::header_size, wire::max_payload_limit);
        p.header_have = 0;
        p.payload_left = d.status == wire::decode_status::ok ? d.header.payload_len : 0;
        p.payload_is_data = d.header.kind == wire::frame_kind::data;
        if (p.payload_left == 0) { // a frame without payload ends here
          out.emplace_back(i - start, w);
          start = i;
          w = 0;
        }
      }
    }
    if (i > start)
      out.emplace_back(i - start, w);
    return out;
  }

  /// When `w` wire bytes written now from `from` to `to` arrive; occupies
  /// the ports (and NICs) they pass.
  double schedule(int from, int to, double w) {
    bool same_host = host_of(from) == host_of(to);
    const auto& link = same_host ? opts.host : opts.net;
    double duration = w / link.bytes_per_s;
    auto& tx = same_host ? rank_ports[from] : nic_ports[host_of(from)];
    auto& rx = same_host ? rank_ports[to] : nic_ports[host_of(to)];
    double start = std::max(now, tx.tx_free);
    double sent = start + duration;
    if (same_host && opts.host_bus_bytes_per_s > 0) {
      auto& bus = bus_free[static_cast<std::size_t>(host_of(from))];
      bus = std::max(now, bus) + w / opts.host_bus_bytes_per_s;
      sent = std::max(sent, bus);
    }
    tx.tx_free = sent;
    // The last byte lands α after it left, or later when the receiving port
    // was still busy with other senders' bytes.
    double received = std::max(sent + link.alpha, rx.rx_free + duration);
    rx.rx_free = received;
    return received;
  }
};

namespace {

class timed_connection : public connection {
public:
  timed_connection(std::shared_ptr<timed_state> st, int self, int peer)
    : st_(std::move(st)), self_(self), peer_(peer),
      description_("rank " + std::to_string(peer) + " (simulated)") {}

  io_result write_some(const iovec* iov, int count) override {
    io_result r;
    auto& out = st_->pipe(self_, peer_);
    if (out.writer_closed) {
      r.error = "write on a closed connection (simulated)";
      return r;
    }
    if (out.reset || st_->dead[static_cast<std::size_t>(peer_)]) {
      r.error = "connection reset by peer (simulated)";
      return r;
    }
    if (out.reader_closed) {
      r.error = "broken pipe (simulated)";
      return r;
    }
    std::vector<uint8_t> bytes;
    for (int i = 0; i < count; ++i) {
      auto p = static_cast<const uint8_t*>(iov[i].iov_base);
      bytes.insert(bytes.end(), p, p + iov[i].iov_len);
    }
    std::size_t at_byte = 0;
    for (auto [len, w] : st_->pieces(out, bytes.data(), bytes.size())) {
      double at = std::max(st_->schedule(self_, peer_, w), out.last_arrival);
      out.last_arrival = at;
      auto first = bytes.begin() + static_cast<std::ptrdiff_t>(at_byte);
      st_->arrivals.push(arrival{at, st_->writes++, self_, peer_,
                                 std::vector<uint8_t>(first, first + static_cast<std::ptrdiff_t>(len))});
      at_byte += len;
    }
    out.in_flight += bytes.size();
    st_->in_flight += bytes.size();
    r.bytes = bytes.size();
    return r;
  }

  io_result read_some(void* data, std::size_t len) override {
    io_result r;
    auto* in = in_ ? in_ : (in_ = st_->find(peer_, self_));
    if (in != nullptr && in->available() > 0) {
      auto n = std::min(len, in->available());
      std::memcpy(data, in->readable.data() + in->read_pos, n);
      in->read_pos += n;
      if (in->read_pos == in->readable.size()) {
        in->readable.clear();
        in->read_pos = 0;
      }
      r.bytes = n;
      return r;
    }
    if ((in != nullptr && in->reset) || st_->dead[static_cast<std::size_t>(peer_)]) {
      r.error = "connection reset by peer (simulated)";
      return r;
    }
    if (in != nullptr && in->writer_closed && in->in_flight == 0)
      r.closed = true;
    return r;
  }

  bool maybe_readable() const override {
    auto* in = in_ ? in_ : st_->find(peer_, self_);
    return (in != nullptr && (in->available() > 0 || in->reset || in->writer_closed))
           || st_->dead[static_cast<std::size_t>(peer_)];
  }

  void notify_when_ready(bool want_write, std::function<void()> ready) override {
    if (want_write) {
      ready(); // writes are never refused for lack of room
      return;
    }
    auto* in = st_->find(peer_, self_);
    if ((in != nullptr && (in->available() > 0 || in->reset || in->writer_closed))
        || st_->dead[static_cast<std::size_t>(peer_)]) {
      ready();
      return;
    }
    st_->pipe(peer_, self_).on_readable = std::move(ready);
  }

  void close() override {
    if (closed_)
      return;
    closed_ = true;
    st_->pipe(self_, peer_).writer_closed = true;
    if (auto* in = st_->find(peer_, self_)) {
      in->reader_closed = true;
      in->on_readable = nullptr;
    }
  }

  const std::string& description() const override { return description_; }

private:
  std::shared_ptr<timed_state> st_;
  int self_;
  int peer_;
  timed_pipe* in_ = nullptr; ///< cached once the pipe exists
  bool closed_ = false;
  std::string description_;
};

} // namespace
} // namespace detail

timed_network::timed_network(const timed_network_options& options)
  : state_(std::make_shared<detail::timed_state>()) {
  if (options.world < 1 || options.ranks_per_host < 1 || options.net.bytes_per_s <= 0
      || options.host.bytes_per_s <= 0 || options.host_bus_bytes_per_s < 0 || options.payload_scale < 1)
    throw std::invalid_argument("timed_network: world, ranks per host, rates and scale must be positive");
  state_->opts = options;
  state_->rank_ports.resize(static_cast<std::size_t>(options.world));
  state_->nic_ports.resize(static_cast<std::size_t>(state_->host_of(options.world - 1) + 1));
  state_->bus_free.assign(state_->nic_ports.size(), 0.0);
  state_->dead.assign(static_cast<std::size_t>(options.world), 0);
  state_->pipes.resize(static_cast<std::size_t>(options.world) * static_cast<std::size_t>(options.world));
}

timed_network::~timed_network() = default;

std::vector<connection_ptr> timed_network::connections(int rank) {
  std::vector<connection_ptr> out(static_cast<std::size_t>(state_->opts.world));
  for (int peer = 0; peer < state_->opts.world; ++peer)
    if (peer != rank)
      out[static_cast<std::size_t>(peer)] = std::make_shared<detail::timed_connection>(state_, rank, peer);
  return out;
}

double timed_network::now() const {
  return state_->now;
}

double timed_network::next_arrival() const {
  return state_->arrivals.empty() ? std::numeric_limits<double>::infinity() : state_->arrivals.top().at;
}

std::vector<std::pair<int, int>> timed_network::advance_to(double t) {
  auto& st = *state_;
  st.now = std::max(st.now, t);
  std::vector<std::pair<int, int>> receivers;
  std::vector<std::function<void()>> notify;
  while (!st.arrivals.empty() && st.arrivals.top().at <= st.now) {
    // priority_queue::top is const; the element is popped right after its
    // bytes were used, so reading through a const_cast is safe.
    auto& a = const_cast<detail::arrival&>(st.arrivals.top());
    auto& p = st.pipe(a.from, a.to);
    p.in_flight -= a.bytes.size();
    st.in_flight -= a.bytes.size();
    if (!p.reset && !p.reader_closed && !st.dead[static_cast<std::size_t>(a.to)]) {
      p.readable.insert(p.readable.end(), a.bytes.begin(), a.bytes.end());
      receivers.emplace_back(a.to, a.from);
      if (p.on_readable)
        notify.push_back(std::exchange(p.on_readable, nullptr));
    }
    st.arrivals.pop();
  }
  std::sort(receivers.begin(), receivers.end());
  receivers.erase(std::unique(receivers.begin(), receivers.end()), receivers.end());
  for (auto& cb : notify)
    cb();
  return receivers;
}

std::size_t timed_network::in_flight() const {
  return state_->in_flight;
}

void timed_network::kill(int rank) {
  auto& st = *state_;
  st.dead[static_cast<std::size_t>(rank)] = 1;
  for (int peer = 0; peer < st.opts.world; ++peer)
    for (auto* p : {st.find(rank, peer), st.find(peer, rank)})
      if (p != nullptr) {
        p->reset = true;
        if (p->on_readable)
          std::exchange(p->on_readable, nullptr)();
      }
}

} // namespace mccl::transport
