#pragma once
/// One direction of a shared-memory link: a single-producer single-consumer
/// byte ring in memory both processes map (shm_segment.hpp). The writer
/// copies gathered buffers in, the reader copies bytes out; each side
/// publishes its position with a release store and reads the other's with
/// an acquire load, so the hot path is two memcpy and no system call.
///
/// Sleeping is the caller's business: a reader (writer) that found nothing
/// to read (no room) and is about to block sets its waiting flag with
/// arm_reader() (arm_writer()); the other side, after publishing, checks the
/// flag with take_reader_waiting() (take_writer_waiting()) and, when it was
/// set, wakes the sleeper (shm_connection.hpp rings a doorbell). The flag and
/// the position are both sequentially consistent, so either the sleeper sees
/// the new bytes when it re-checks after arming, or the publisher sees the
/// flag: a wake-up is never lost.

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace mccl::transport {

/// The shared part of a ring: positions and flags on separate cache lines
/// (no false sharing between the two processes), then the data.
struct shm_ring_control {
  alignas(64) std::atomic<uint64_t> head{0}; ///< bytes ever written (writer)
  alignas(64) std::atomic<uint64_t> tail{0}; ///< bytes ever read (reader)
  alignas(64) std::atomic<uint32_t> reader_waiting{0};
  alignas(64) std::atomic<uint32_t> writer_waiting{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared rings need lock-free 64-bit atomics");

/// A process's view of one ring: `control` and `capacity` bytes of data,
/// both inside the mapped segment. Each process uses it as writer or as
/// reader, never both.
class shm_ring {
public:
  shm_ring() = default;
  shm_ring(shm_ring_control* control, uint8_t* data, std::size_t capacity) noexcept
    : ctl_(control), data_(data), capacity_(capacity) {}

  /// Copies as much of the gathered buffers as fits; returns the bytes taken.
  std::size_t write(const iovec* iov, int count) noexcept;
  /// Copies up to `len` bytes out; returns the bytes read.
  std::size_t read(void* out, std::size_t len) noexcept;

  /// Bytes the reader could read now.
  std::size_t readable() const noexcept;
  /// Bytes the writer could write now.
  std::size_t writable() const noexcept;

  /// The reader is about to sleep; true when bytes came meanwhile (then it
  /// must not sleep).
  bool arm_reader() noexcept;
  /// The writer is about to sleep for room; true when room came meanwhile.
  bool arm_writer() noexcept;
  /// After publishing: whether the other side asked to be woken (clears it).
  bool take_reader_waiting() noexcept;
  bool take_writer_waiting() noexcept;

  std::size_t capacity() const noexcept { return capacity_; }

private:
  shm_ring_control* ctl_ = nullptr;
  uint8_t* data_ = nullptr;
  std::size_t capacity_ = 0;
  // The other side's position as last seen: refreshed only when it would
  // not suffice, so the other side's cache line is read rarely.
  uint64_t seen_tail_ = 0; ///< writer's copy of tail
  uint64_t seen_head_ = 0; ///< reader's copy of head
};

} // namespace mccl::transport
