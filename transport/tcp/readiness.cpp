#include "transport/tcp/readiness.hpp"

#include <mccl/error.hpp>
#include "config/log.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace mccl::transport {

namespace {
constexpr uint64_t stop_id = 0;
}

readiness_monitor::readiness_monitor() {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || stop_fd_ < 0)
    throw error(errc::internal, std::string("readiness monitor: ") + std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = stop_id;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_, &ev);
  thread_ = std::thread([this] { run(); });
}

readiness_monitor::~readiness_monitor() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(stop_fd_, &one, sizeof one);
  if (thread_.joinable())
    thread_.join();
  ::close(stop_fd_);
  ::close(epoll_fd_);
}

uint64_t readiness_monitor::add(int fd) {
  std::lock_guard<std::mutex> guard{mutex_};
  auto id = next_id_++;
  watches_[id].fd = fd;
  // One-shot with no interest yet: nothing is reported until arm().
  epoll_event ev{};
  ev.events = EPOLLONESHOT;
  ev.data.u64 = id;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
    throw error(errc::internal, std::string("readiness monitor: epoll_ctl ADD: ") + std::strerror(errno));
  return id;
}

void readiness_monitor::rearm(const watch& w, uint64_t id) {
  epoll_event ev{};
  ev.events = EPOLLONESHOT;
  if (w.on_read)
    ev.events |= EPOLLIN | EPOLLRDHUP;
  if (w.on_write)
    ev.events |= EPOLLOUT;
  ev.data.u64 = id;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, w.fd, &ev);
}

void readiness_monitor::arm(uint64_t id, bool want_write, callback ready) {
  std::lock_guard<std::mutex> guard{mutex_};
  auto i = watches_.find(id);
  if (i == watches_.end())
    return;
  (want_write ? i->second.on_write : i->second.on_read) = std::move(ready);
  rearm(i->second, id);
}

void readiness_monitor::remove(uint64_t id) {
  std::lock_guard<std::mutex> guard{mutex_};
  auto i = watches_.find(id);
  if (i == watches_.end())
    return;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, i->second.fd, nullptr);
  watches_.erase(i);
}

void readiness_monitor::run() {
  epoll_event events[64];
  std::vector<callback> due;
  for (;;) {
    int n = ::epoll_wait(epoll_fd_, events, 64, -1);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      MCCL_LOG(error, "readiness monitor: epoll_wait: " << std::strerror(errno));
      return;
    }
    for (int k = 0; k < n; ++k) {
      auto id = events[k].data.u64;
      if (id == stop_id)
        return;
      auto what = events[k].events;
      std::lock_guard<std::mutex> guard{mutex_};
      auto i = watches_.find(id);
      if (i == watches_.end())
        continue; // removed
      auto& w = i->second;
      bool failed = what & (EPOLLERR | EPOLLHUP);
      if (w.on_read && (failed || (what & (EPOLLIN | EPOLLRDHUP))))
        due.push_back(std::move(w.on_read)), w.on_read = nullptr;
      if (w.on_write && (failed || (what & EPOLLOUT)))
        due.push_back(std::move(w.on_write)), w.on_write = nullptr;
      // One-shot disarmed everything: re-arm what is still wanted.
      if (w.on_read || w.on_write)
        rearm(w, id);
    }
    for (auto& cb : due)
      cb();
    due.clear();
  }
}

} // namespace mccl::transport
