#include "transport/sim/sim_network.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

namespace mccl::transport {

namespace detail {

using callback = std::function<void()>;
using callbacks = std::vector<callback>;

/// One direction of a connected pair.
struct sim_pipe {
  std::deque<uint8_t> in_flight;
  std::deque<uint8_t> readable;
  std::size_t capacity = 0;   ///< bytes in flight + readable; 0 = unlimited
  bool writer_closed = false; ///< the sender closed its end (EOF behind in_flight)
  bool reader_closed = false; ///< the receiver closed its end
  bool reset = false;         ///< break_link
  callbacks on_readable;      ///< the receiver's waiting read notifications
  callbacks on_writable;      ///< the sender's waiting write notifications

  std::size_t used() const { return in_flight.size() + readable.size(); }

  bool eof_visible() const { return writer_closed && in_flight.empty(); }

  bool read_ready() const {
    return !readable.empty() || reader_closed || reset || eof_visible();
  }

  bool write_ready() const {
    return writer_closed || reader_closed || reset || capacity == 0 || used() < capacity;
  }
};

struct sim_state {
  mutable std::mutex mutex;
  std::map<std::pair<int, int>, sim_pipe> pipes; ///< keyed by (from, to)
  bool auto_deliver = false;
  std::size_t default_capacity = 0;

  sim_pipe& pipe(int from, int to) {
    auto i = pipes.find({from, to});
    if (i == pipes.end())
      throw std::invalid_argument("sim_network: ranks " + std::to_string(from) + " and "
                                  + std::to_string(to) + " are not connected");
    return i->second;
  }

  const sim_pipe& pipe(int from, int to) const {
    return const_cast<sim_state*>(this)->pipe(from, to);
  }
};

namespace {

void take(callbacks& from, callbacks& into) {
  for (auto& cb : from)
    into.push_back(std::move(cb));
  from.clear();
}

void take_if(bool cond, callbacks& from, callbacks& into) {
  if (cond)
    take(from, into);
}

void run_all(callbacks& cbs) {
  for (auto& cb : cbs)
    cb();
}

/// Moves up to max bytes of p from in flight to readable; returns them.
std::size_t move_bytes(sim_pipe& p, std::size_t max) {
  auto n = std::min(max, p.in_flight.size());
  auto end = p.in_flight.begin() + static_cast<std::ptrdiff_t>(n);
  p.readable.insert(p.readable.end(), p.in_flight.begin(), end);
  p.in_flight.erase(p.in_flight.begin(), end);
  return n;
}

class sim_connection : public connection {
public:
  sim_connection(std::shared_ptr<sim_state> st, int self, int peer)
    : st_(std::move(st)), self_(self), peer_(peer),
      description_("rank " + std::to_string(peer) + " (simulated)") {}

  ~sim_connection() override { close(); }

  io_result write_some(const iovec* iov, int count) override {
    io_result r;
    callbacks fire;
    {
      std::lock_guard<std::mutex> lock(st_->mutex);
      auto& out = st_->pipe(self_, peer_);
      if (out.writer_closed) {
        r.error = "write on a closed connection (simulated)";
        return r;
      }
      if (out.reset) {
        r.error = "connection reset by peer (simulated)";
        return r;
      }
      if (out.reader_closed) {
        r.error = "broken pipe (simulated)";
        return r;
      }
      std::size_t room = out.capacity == 0 ? SIZE_MAX
                         : out.used() < out.capacity ? out.capacity - out.used() : 0;
      auto& dst = st_->auto_deliver ? out.readable : out.in_flight;
      for (int i = 0; i < count && room > 0; ++i) {
        auto n = std::min(room, iov[i].iov_len);
        auto p = static_cast<const uint8_t*>(iov[i].iov_base);
        dst.insert(dst.end(), p, p + n);
        r.bytes += n;
        room -= n;
      }
      if (st_->auto_deliver && r.bytes > 0)
        take(out.on_readable, fire);
    }
    run_all(fire);
    return r;
  }

  io_result read_some(void* data, std::size_t len) override {
    io_result r;
    callbacks fire;
    {
      std::lock_guard<std::mutex> lock(st_->mutex);
      auto& in = st_->pipe(peer_, self_);
      if (in.reader_closed) {
        r.closed = true;
        r.error = "read on a closed connection (simulated)";
        return r;
      }
      if (!in.readable.empty()) {
        auto n = std::min(len, in.readable.size());
        auto end = in.readable.begin() + static_cast<std::ptrdiff_t>(n);
        std::copy(in.readable.begin(), end, static_cast<uint8_t*>(data));
        in.readable.erase(in.readable.begin(), end);
        r.bytes = n;
        // Space freed: a sender held back by the capacity may go on.
        take_if(in.write_ready(), in.on_writable, fire);
      } else if (in.reset) {
        r.closed = true;
        r.error = "connection reset by peer (simulated)";
      } else if (in.eof_visible()) {
        r.closed = true;
      }
    }
    run_all(fire);
    return r;
  }

  void notify_when_ready(bool want_write, std::function<void()> ready) override {
    {
      std::lock_guard<std::mutex> lock(st_->mutex);
      if (want_write) {
        auto& out = st_->pipe(self_, peer_);
        if (!out.write_ready()) {
          out.on_writable.assign(1, std::move(ready)); // one per direction: it replaces the last
          return;
        }
      } else {
        auto& in = st_->pipe(peer_, self_);
        if (!in.read_ready()) {
          in.on_readable.assign(1, std::move(ready)); // one per direction: it replaces the last
          return;
        }
      }
    }
    ready();
  }

  void close() override {
    callbacks fire;
    {
      std::lock_guard<std::mutex> lock(st_->mutex);
      auto& out = st_->pipe(self_, peer_);
      auto& in = st_->pipe(peer_, self_);
      if (out.writer_closed)
        return;
      out.writer_closed = true;
      in.reader_closed = true;
      in.in_flight.clear(); // nobody will read these any more
      in.readable.clear();
      // Our own waiting notifications: cancelled, i.e. run once.
      take(in.on_readable, fire);
      take(out.on_writable, fire);
      // The peer: its reads see EOF once our in-flight bytes are delivered,
      // its writes fail now.
      take_if(out.read_ready(), out.on_readable, fire);
      take(in.on_writable, fire);
    }
    run_all(fire);
  }

  const std::string& description() const override { return description_; }

private:
  std::shared_ptr<sim_state> st_;
  int self_;
  int peer_;
  std::string description_;
};

} // namespace
} // namespace detail

sim_network::sim_network(bool auto_deliver) : state_(std::make_shared<detail::sim_state>()) {
  state_->auto_deliver = auto_deliver;
}

sim_network::~sim_network() = default;

std::pair<connection_ptr, connection_ptr> sim_network::connect(int rank_a, int rank_b) {
  if (rank_a == rank_b)
    throw std::invalid_argument("sim_network: cannot connect rank " + std::to_string(rank_a)
                                + " to itself");
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->pipes.count({rank_a, rank_b}) > 0)
      throw std::invalid_argument("sim_network: ranks " + std::to_string(rank_a) + " and "
                                  + std::to_string(rank_b) + " are already connected");
    state_->pipes[{rank_a, rank_b}].capacity = state_->default_capacity;
    state_->pipes[{rank_b, rank_a}].capacity = state_->default_capacity;
  }
  return {std::make_shared<detail::sim_connection>(state_, rank_a, rank_b),
          std::make_shared<detail::sim_connection>(state_, rank_b, rank_a)};
}

std::vector<std::vector<connection_ptr>> sim_network::mesh(int world) {
  std::vector<std::vector<connection_ptr>> m(static_cast<std::size_t>(world),
                                             std::vector<connection_ptr>(static_cast<std::size_t>(world)));
  for (int r = 0; r < world; ++r)
    for (int p = r + 1; p < world; ++p) {
      auto [a, b] = connect(r, p);
      m[static_cast<std::size_t>(r)][static_cast<std::size_t>(p)] = std::move(a);
      m[static_cast<std::size_t>(p)][static_cast<std::size_t>(r)] = std::move(b);
    }
  return m;
}

std::vector<sim_pipe_id> sim_network::pending() const {
  std::vector<sim_pipe_id> out;
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (auto& [key, p] : state_->pipes)
    if (!p.in_flight.empty())
      out.push_back({key.first, key.second, p.in_flight.size()});
  return out;
}

std::size_t sim_network::deliver(int from, int to, std::size_t max_bytes) {
  detail::callbacks fire;
  std::size_t n;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto& p = state_->pipe(from, to);
    n = detail::move_bytes(p, max_bytes);
    detail::take_if(p.read_ready(), p.on_readable, fire);
  }
  detail::run_all(fire);
  return n;
}

std::size_t sim_network::deliver_all() {
  detail::callbacks fire;
  std::size_t n = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (auto& [key, p] : state_->pipes) {
      n += detail::move_bytes(p, SIZE_MAX);
      detail::take_if(p.read_ready(), p.on_readable, fire);
    }
  }
  detail::run_all(fire);
  return n;
}

void sim_network::set_auto_deliver(bool on) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->auto_deliver = on;
  }
  if (on)
    deliver_all();
}

bool sim_network::auto_deliver() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->auto_deliver;
}

std::size_t sim_network::in_flight(int from, int to) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->pipe(from, to).in_flight.size();
}

std::size_t sim_network::readable(int from, int to) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->pipe(from, to).readable.size();
}

void sim_network::set_capacity(std::size_t bytes) {
  detail::callbacks fire;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->default_capacity = bytes;
    for (auto& [key, p] : state_->pipes) {
      p.capacity = bytes;
      detail::take_if(p.write_ready(), p.on_writable, fire);
    }
  }
  detail::run_all(fire);
}

void sim_network::set_capacity(int from, int to, std::size_t bytes) {
  detail::callbacks fire;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto& p = state_->pipe(from, to);
    p.capacity = bytes;
    detail::take_if(p.write_ready(), p.on_writable, fire);
  }
  detail::run_all(fire);
}

void sim_network::break_link(int a, int b) {
  detail::callbacks fire;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (auto* p : {&state_->pipe(a, b), &state_->pipe(b, a)}) {
      p->reset = true;
      p->in_flight.clear();
      detail::take(p->on_readable, fire);
      detail::take(p->on_writable, fire);
    }
  }
  detail::run_all(fire);
}

} // namespace mccl::transport
