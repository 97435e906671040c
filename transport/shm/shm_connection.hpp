#pragma once
/// The shared-memory implementation of transport::connection between two
/// ranks of one host: bytes go through two rings in a shared segment
/// (shm_ring.hpp, shm_segment.hpp), never through the kernel, while both
/// sides keep polling.
///
/// The TCP connection the pair was built with stays open beside the rings
/// as the doorbell and the lifeline. A side about to sleep arms its flag
/// in the ring (in poll_fd() or notify_when_ready(), which drivers call
/// right before they wait); the other side, after publishing bytes or room,
/// sends one byte on the socket only if that flag was set. The kernel closes
/// the socket when a process dies, so a crashed peer is seen at once by a
/// sleeping rank, within a few microseconds of polling by a spinning one
/// and within 5 ms by a driver that polls now and then, as over TCP; a
/// clean close is read after the last bytes in the ring.
///
/// Large buffers take one copy instead of two: the reader copies them
/// straight out of the writer's memory (splices, shm_ring.hpp), where the
/// kernel lets it (the same user, ptrace permission); otherwise, and for
/// everything smaller, bytes pass through the ring.
///
/// A lost link resumed (MCCL_RECONNECT_MS) continues over the fresh TCP
/// connection: the rings are left behind with the old one.

#include "transport/connection.hpp"
#include "transport/shm/shm_segment.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

namespace mccl::transport {

class shm_connection : public connection {
public:
  /// `segment`: a pair segment (pair_segment_bytes(ring_bytes));
  /// `doorbell`: the connected TCP link to the same peer; `is_creator`:
  /// this side created the segment (it writes direction 0);
  /// `single_copy_bytes`: buffers of at least this size go to the peer as
  /// splices (shm_ring.hpp) once it can read them; 0: never.
  shm_connection(shm_segment segment, std::size_t ring_bytes, bool is_creator, connection_ptr doorbell,
                 std::string description, std::size_t single_copy_bytes = 0);
  ~shm_connection() override;

  io_result write_some(const iovec* iov, int count) override;
  io_result read_some(void* data, std::size_t len) override;
  /// Ring bytes or a splice to read, the peer's close or failure known,
  /// or read_some's periodic look at the peer (check_peer) due: without a
  /// system call, so a pass over many idle rings skips their reads.
  bool maybe_readable() const override;
  /// Leaves `note` in the segment for the peer (peer_abort()), then, with
  /// splices open, revokes them: the peer's reader fails at the first (it
  /// never uses bytes of a buffer we let go), and so does this side.
  void release_buffers(const abort_note& note) override;
  std::optional<abort_note> peer_abort() const override;
  void notify_when_ready(bool want_write, std::function<void()> ready) override;
  void close() override;
  int poll_fd() const override;
  const std::string& description() const override { return description_; }
  /// Bytes received as splices, straight from the peer's memory.
  uint64_t single_copy_bytes() const noexcept { return rx_.spliced(); }


private:
  /// Arms the wake-up flags before a wait; true when there is something
  /// to do already.
  bool arm() const;
  /// Wakes the peer if it sleeps waiting for what we just published.
  void ring_peer();
  /// Reads doorbell bytes; records the peer's close or failure. Called
  /// when the ring is empty after an armed wait, and every few hundred empty
  /// polls (a spinning rank notices a crash as fast as a sleeping one).
  void check_peer();
  bool peer_check_due() const;
  void self_signal() const;
  /// Once the peer offers splices: whether we can take them (logged).
  void probe_single_copy();

  shm_segment segment_;
  mutable shm_ring tx_;
  mutable shm_ring rx_;
  connection_ptr doorbell_;
  std::string description_;
  int epoll_fd_ = -1;
  int self_fd_ = -1;              ///< eventfd: "look again" when arming found work
  mutable int watched_fd_ = -1;   ///< the doorbell's descriptor in epoll_fd_
  mutable bool armed_ = false;    ///< a doorbell may be waiting to be drained
  mutable bool self_signalled_ = false;
  bool write_blocked_ = false;    ///< the last write_some left bytes behind
  mutable unsigned idle_polls_ = 0;
  std::chrono::steady_clock::time_point last_peer_check_{};
  bool peer_closed_ = false;
  std::string peer_error_;
  std::atomic<bool> closed_{false};

  /// notify_when_ready()'s callbacks, shared with the doorbell's.
  struct wake_callbacks {
    std::mutex mutex;
    std::function<void()> on_readable;
    std::function<void()> on_writable;
  };
  std::shared_ptr<wake_callbacks> wake_ = std::make_shared<wake_callbacks>();
};

} // namespace mccl::transport
