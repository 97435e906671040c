#include "transport/shm/shm_connection.hpp"

#include <mccl/error.hpp>
#include "config/log.hpp"
#include "transport/wire/frame.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace mccl::transport {
namespace {

/// Empty polls between two looks at the doorbell socket while spinning:
/// a few microseconds of polling, one system call; and the longest time
/// between two looks when polls are rare (a driver passing by now and then).
constexpr unsigned polls_per_peer_check = 256;
constexpr auto peer_check_interval = std::chrono::milliseconds(5);

} // namespace

shm_connection::shm_connection(shm_segment segment, std::size_t ring_bytes, bool is_creator,
                               connection_ptr doorbell, std::string description,
                               std::size_t single_copy_bytes)
  : segment_(std::move(segment)), tx_(pair_ring(segment_, ring_bytes, is_creator ? 0 : 1)),
    rx_(pair_ring(segment_, ring_bytes, is_creator ? 1 : 0)), doorbell_(std::move(doorbell)),
    description_(std::move(description)) {
  tx_.enable_splices(single_copy_bytes);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  self_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || self_fd_ < 0) {
    std::string why = std::strerror(errno);
    for (int fd : {epoll_fd_, self_fd_})
      if (fd >= 0)
        ::close(fd);
    throw error(errc::internal, "shared-memory link to " + description_ + ": " + why);
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = self_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, self_fd_, &ev);
}

shm_connection::~shm_connection() {
  close();
  ::close(epoll_fd_);
  ::close(self_fd_);
}

io_result shm_connection::write_some(const iovec* iov, int count) {
  if (closed_.load(std::memory_order_relaxed))
    return {0, true, "closed"};
  if (!peer_error_.empty() || peer_closed_)
    return {0, true, peer_error_};
  std::size_t want = 0;
  for (int i = 0; i < count; ++i)
    want += iov[i].iov_len;
  auto n = tx_.write(iov, count);
  write_blocked_ = n < want;
  if (n > 0 || tx_.unreported()) { // a splice just posted is news too
    if (tx_.take_reader_waiting())
      ring_peer();
    if (n > 0)
      return {n, false, {}};
  }
  if (peer_check_due())
    check_peer();
  if (!peer_error_.empty() || peer_closed_)
    return {0, true, peer_error_};
  return {};
}

io_result shm_connection::read_some(void* data, std::size_t len) {
  if (closed_.load(std::memory_order_relaxed))
    return {0, true, "closed"};
  probe_single_copy();
  auto n = rx_.read(data, len);
  if (n < 0)
    return {0, true, errno == ECANCELED
                       ? "the peer dropped a payload it had offered for single copy (it aborted)"
                       : "single copy from " + description_ + ": process_vm_readv: " + std::strerror(errno)};
  if (n > 0) {
    if (rx_.take_writer_waiting())
      ring_peer();
    return {static_cast<std::size_t>(n), false, {}};
  }
  if (peer_check_due())
    check_peer();
  if (!peer_error_.empty() || peer_closed_) {
    // The peer's last bytes may have come after our read and before its
    // close: the stream ends only once the ring is empty.
    n = rx_.read(data, len);
    if (n > 0)
      return {static_cast<std::size_t>(n), false, {}};
    return {0, true, peer_error_};
  }
  return {};
}

void shm_connection::release_buffers(const abort_note& note) {
  // Beside the ring, which may be full (a stopped reader) or cut at a
  // revoked splice below: a peer that wakes up reads why either way.
  auto text = wire::encode_text(note.reason);
  tx_.leave_note(note.origin, note.code, note.revoke_point, text.data(), text.size());
  if (!tx_.unreported())
    return; // everything taken is in the ring: the stream goes on
  tx_.revoke_splices();
  peer_closed_ = true;
  if (peer_error_.empty())
    peer_error_ = "aborted with payloads in flight to the peer for single copy: the link is closed";
  ring_peer(); // a sleeping reader wakes, meets the revoked splice and fails
}

std::optional<abort_note> shm_connection::peer_abort() const {
  abort_note n;
  std::string bytes;
  if (!rx_.note(n.origin, n.code, n.revoke_point, bytes))
    return std::nullopt;
  std::string why;
  auto text = wire::decode_text(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &why);
  n.reason = text ? *text : "(unreadable reason: " + why + ")";
  return n;
}

void shm_connection::probe_single_copy() {
  switch (rx_.probe_splices()) {
    case 1:
      MCCL_LOG(debug, description_ << ": large buffers copied once, straight from the peer's memory");
      break;
    case 2:
      MCCL_LOG(info, description_ << ": large buffers pass through the ring (two copies): "
                                  << "process_vm_readv of the peer's memory failed: " << std::strerror(errno));
      break;
    default:
      break;
  }
}

bool shm_connection::maybe_readable() const {
  return closed_.load(std::memory_order_relaxed) || rx_.has_input() || peer_closed_ || !peer_error_.empty()
         || peer_check_due();
}

bool shm_connection::peer_check_due() const {
  if (armed_ || ++idle_polls_ % polls_per_peer_check == 0)
    return true;
  return std::chrono::steady_clock::now() - last_peer_check_ >= peer_check_interval;
}

void shm_connection::check_peer() {
  armed_ = false;
  last_peer_check_ = std::chrono::steady_clock::now();
  if (self_signalled_) {
    uint64_t drained;
    [[maybe_unused]] auto r = ::read(self_fd_, &drained, sizeof drained);
    self_signalled_ = false;
  }
  if (peer_closed_ || !peer_error_.empty())
    return;
  uint8_t bells[64];
  for (;;) {
    auto r = doorbell_->read_some(bells, sizeof bells);
    if (r.closed) {
      peer_closed_ = true;
      peer_error_ = r.error;
      return;
    }
    if (r.bytes < sizeof bells)
      return;
  }
}

void shm_connection::ring_peer() {
  uint8_t bell = 1;
  iovec v{&bell, 1};
  auto r = doorbell_->write_some(&v, 1);
  if (r.closed && peer_error_.empty()) {
    peer_closed_ = true;
    peer_error_ = r.error;
  }
  // bytes == 0 (socket buffer full) means the peer has unread bells: it is
  // awake already.
}

void shm_connection::self_signal() const {
  uint64_t one = 1;
  [[maybe_unused]] auto r = ::write(self_fd_, &one, sizeof one);
  self_signalled_ = true;
}

bool shm_connection::arm() const {
  armed_ = true;
  bool ready = rx_.arm_reader();
  if (write_blocked_)
    ready |= tx_.arm_writer();
  return ready;
}

int shm_connection::poll_fd() const {
  int fd = doorbell_->poll_fd();
  if (fd != watched_fd_) {
    if (watched_fd_ >= 0)
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, watched_fd_, nullptr);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (fd >= 0)
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    watched_fd_ = fd;
  }
  if (fd < 0)
    return -1; // drivers wait through notify_when_ready
  if (arm())
    self_signal();
  return epoll_fd_;
}

void shm_connection::notify_when_ready(bool want_write, std::function<void()> ready) {
  {
    std::lock_guard<std::mutex> guard{wake_->mutex};
    (want_write ? wake_->on_writable : wake_->on_readable) = ready;
  }
  if (arm()) {
    ready();
    return;
  }
  // Both directions wake through the doorbell socket becoming readable (a
  // bell, or the peer's close). The callback holds the shared state, not
  // this object: it may run once after close().
  doorbell_->notify_when_ready(false, [wake = wake_] {
    std::function<void()> r, w;
    {
      std::lock_guard<std::mutex> guard{wake->mutex};
      r = std::move(wake->on_readable);
      w = std::move(wake->on_writable);
    }
    if (r)
      r();
    if (w)
      w();
  });
}

void shm_connection::close() {
  if (closed_.exchange(true))
    return;
  doorbell_->close();
}

} // namespace mccl::transport
