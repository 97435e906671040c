#pragma once
/// Waits in the kernel for TCP connections on behalf of drivers that cannot
/// block (connection::notify_when_ready: the progress actor parks this way),
/// on a thread of its own.
///
/// Why not the Asio reactor: Asio registers every socket edge-triggered and
/// always armed, so every segment that arrives wakes the reactor thread, even
/// while a driver is reading that socket itself. On a two-core machine those
/// wake-ups compete with the ranks for the CPUs. Here a descriptor is armed
/// one-shot, only when a driver asks.
///
/// Thread-safe: add/arm/remove may be called from any thread.
/// Callbacks run on the monitor's thread and must only post a message.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace mccl::transport {

class readiness_monitor {
public:
  using callback = std::function<void()>;

  readiness_monitor();
  /// Stops the thread; callbacks not yet run are dropped.
  ~readiness_monitor();

  readiness_monitor(const readiness_monitor&) = delete;
  readiness_monitor& operator=(const readiness_monitor&) = delete;

  /// Registers a descriptor (not armed). The id names it in the calls below.
  uint64_t add(int fd);
  /// Calls `ready` once when the descriptor is readable (or writable when
  /// want_write), or has failed. One callback per direction is kept; a new
  /// one replaces the old.
  void arm(uint64_t id, bool want_write, callback ready);
  /// Forgets the descriptor (before it is closed). A callback already
  /// running may still finish.
  void remove(uint64_t id);

private:
  struct watch {
    int fd = -1;
    callback on_read;
    callback on_write;
  };

  void run();
  /// epoll_ctl for w's current interest; the caller holds mutex_.
  void rearm(const watch& w, uint64_t id);

  int epoll_fd_ = -1;
  int stop_fd_ = -1; ///< eventfd that ends run()
  std::mutex mutex_;
  std::unordered_map<uint64_t, watch> watches_;
  uint64_t next_id_ = 1;
  std::thread thread_;
};

} // namespace mccl::transport
