#include "transport/tcp/striped_connection.hpp"

#include <mccl/error.hpp>

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mccl::transport {

/// What monitor callbacks touch: kept apart so that a callback running on
/// the monitor's thread while the connection is destroyed finds it alive.
struct striped_connection::shared_state {
  std::mutex mutex;
  pending waiting[2]; ///< [0] read, [1] write
};

namespace {

/// The iovecs covering bytes [skip, skip + limit) of `iov`, at most `cap`
/// of them; returns how many were written to `out`.
int slice_iov(const iovec* iov, int count, std::size_t skip, std::size_t limit, iovec* out, int cap) {
  int n = 0;
  for (int i = 0; i < count && limit > 0 && n < cap; ++i) {
    if (skip >= iov[i].iov_len) {
      skip -= iov[i].iov_len;
      continue;
    }
    auto len = std::min(iov[i].iov_len - skip, limit);
    out[n++] = iovec{static_cast<char*>(iov[i].iov_base) + skip, len};
    limit -= len;
    skip = 0;
  }
  return n;
}

std::size_t total_bytes(const iovec* iov, int count) {
  std::size_t total = 0;
  for (int i = 0; i < count; ++i)
    total += iov[i].iov_len;
  return total;
}

constexpr int max_slice_iov = 64;

} // namespace

striped_connection::striped_connection(std::shared_ptr<readiness_monitor> monitor,
                                       std::vector<stripe_socket> stripes, std::string description,
                                       std::size_t segment_bytes)
  : monitor_(std::move(monitor)), stripes_(std::move(stripes)), description_(std::move(description)),
    segment_(segment_bytes), state_(std::make_shared<shared_state>()) {
  if (stripes_.size() < 2 || segment_ == 0)
    throw error(errc::internal, "striped_connection to " + description_ + " needs at least two "
                                "stripes and a non-zero segment size");
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0)
    throw error(errc::internal, "striped connection to " + description_ + ": epoll_create1: "
                                  + std::strerror(errno));
  epoll_interest_.assign(stripes_.size(), 0);
  for (auto& s : stripes_) {
    ::fcntl(s.fd, F_SETFL, ::fcntl(s.fd, F_GETFL) | O_NONBLOCK);
    watch_ids_.push_back(monitor_->add(s.fd));
  }
}

striped_connection::~striped_connection() {
  close();
  for (auto& s : stripes_)
    ::close(s.fd);
  ::close(epoll_fd_);
}

bool striped_connection::advance(cursor& c, std::size_t n) noexcept {
  c.done += n;
  if (c.done < segment_)
    return false;
  c.done = 0;
  c.stripe.store((c.stripe.load(std::memory_order_relaxed) + 1) % stripes_.size(),
                 std::memory_order_relaxed);
  return true;
}

std::string striped_connection::stripe_error(std::size_t stripe, const std::string& what) const {
  return "stripe " + std::to_string(stripe) + " of " + std::to_string(stripes_.size()) + " ("
         + stripes_[stripe].name + ") " + what;
}

// One sendmsg per stripe visited: the current segment's remainder, then the
// next stripe's segment, until a stripe is full or the bytes run out.
io_result striped_connection::write_some(const iovec* iov, int count) {
  io_result r;
  auto want = total_bytes(iov, count);
  while (r.bytes < want) {
    iovec part[max_slice_iov];
    auto room = segment_ - wr_.done;
    int n = slice_iov(iov, count, r.bytes, room, part, max_slice_iov);
    msghdr msg{};
    msg.msg_iov = part;
    msg.msg_iovlen = static_cast<size_t>(n);
    auto sent = ::sendmsg(stripes_[wr_.stripe].fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        break;
      r.error = stripe_error(wr_.stripe, std::string("failed: ") + std::strerror(errno));
      return r;
    }
    auto moved = static_cast<std::size_t>(sent);
    r.bytes += moved;
    if (advance(wr_, moved))
      follow(true);
    else if (moved < total_bytes(part, n))
      break; // the stripe is full
  }
  write_blocked_.store(r.bytes < want, std::memory_order_relaxed);
  return r;
}

io_result striped_connection::read_some(void* data, std::size_t len) {
  io_result r;
  auto* out = static_cast<uint8_t*>(data);
  while (r.bytes < len) {
    auto want = std::min(len - r.bytes, segment_ - rd_.done);
    auto got = ::recv(stripes_[rd_.stripe].fd, out + r.bytes, want, MSG_DONTWAIT);
    if (got > 0) {
      auto moved = static_cast<std::size_t>(got);
      r.bytes += moved;
      if (advance(rd_, moved))
        follow(false);
      else if (moved < want)
        break; // nothing more on this stripe yet
      continue;
    }
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      break;
    // Report bytes already read first; the failure shows on the next call.
    if (r.bytes > 0)
      break;
    r.closed = true;
    r.error = got == 0 ? stripe_error(rd_.stripe, "was closed by the peer")
                       : stripe_error(rd_.stripe, std::string("failed: ") + std::strerror(errno));
    break;
  }
  return r;
}

void striped_connection::arm_locked(bool want_write, std::size_t stripe) {
  auto state = state_;
  auto generation = state->waiting[want_write].generation;
  monitor_->arm(watch_ids_[stripe], want_write, [state, want_write, generation] {
    std::function<void()> ready;
    {
      std::lock_guard<std::mutex> guard{state->mutex};
      auto& w = state->waiting[want_write];
      if (w.generation != generation || !w.ready)
        return; // fired already through another stripe's watch, or replaced
      ready = std::move(w.ready);
      w.ready = nullptr;
    }
    ready();
  });
}

void striped_connection::notify_when_ready(bool want_write, std::function<void()> ready) {
  if (closed_.load()) {
    ready(); // the link learns of the close on its next read
    return;
  }
  std::lock_guard<std::mutex> guard{state_->mutex};
  auto& w = state_->waiting[want_write];
  w.ready = std::move(ready);
  ++w.generation;
  arm_locked(want_write, want_write ? wr_.stripe : rd_.stripe);
}

// A notification armed on the previous stripe would wait for bytes the
// stream no longer needs from it: follow the stream to its new stripe. (The
// old watch may still fire once; that callback is spurious and harmless.)
void striped_connection::follow(bool want_write) {
  std::lock_guard<std::mutex> guard{state_->mutex};
  if (state_->waiting[want_write].ready)
    arm_locked(want_write, want_write ? wr_.stripe : rd_.stripe);
}

int striped_connection::poll_fd() const {
  for (std::size_t i = 0; i < stripes_.size(); ++i) {
    uint32_t want = (i == rd_.stripe ? EPOLLIN | EPOLLRDHUP : 0u)
                    | (write_blocked_ && i == wr_.stripe ? EPOLLOUT : 0u);
    auto had = epoll_interest_[i];
    if (want == had)
      continue;
    // Stripes the stream does not wait on are left out entirely: even with
    // no events asked for, epoll would report their hang-ups.
    epoll_event ev{};
    ev.events = want;
    ev.data.u64 = i;
    int op = had == 0 ? EPOLL_CTL_ADD : want == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
    ::epoll_ctl(epoll_fd_, op, stripes_[i].fd, &ev);
    epoll_interest_[i] = want;
  }
  return epoll_fd_;
}

void striped_connection::close() {
  if (closed_.exchange(true))
    return;
  for (std::size_t i = 0; i < stripes_.size(); ++i) {
    monitor_->remove(watch_ids_[i]);
    ::shutdown(stripes_[i].fd, SHUT_RDWR);
  }
}

} // namespace mccl::transport
