#pragma once
/// One direction of a shared-memory link: a single-producer single-consumer
/// byte ring in memory both processes map (shm_segment.hpp). The writer
/// copies gathered buffers in, the reader copies bytes out; each side
/// publishes its position with a release store and reads the other's with
/// an acquire load, so the hot path is two memcpy and no system call.
///
/// Single copy. A large buffer need not pass through the ring at all: the
/// writer may post it as a splice (its address and length, at the ring
/// position where it belongs in the stream) and the reader copies it
/// straight out of the writer's memory with process_vm_readv, where it
/// would land anyway. Up to max_splices splices may be open, with ring
/// bytes between them, so the writer goes on while the reader copies. The
/// writer reports bytes written only in stream order: those after an open
/// splice once the reader has taken it, so a caller keeps every buffer
/// untouched until the reader is done with it (and passes the unreported
/// rest again, as after any short write; write() skips what it already
/// took). Splices are posted only once the reader has proved it can read
/// the writer's memory (probe_splices()); until then everything goes
/// through the ring.
///
/// Sleeping is the caller's business: a reader (writer) that found nothing
/// to read (no room) and is about to block sets its waiting flag with
/// arm_reader() (arm_writer()); the other side, after publishing, checks the
/// flag with take_reader_waiting() (take_writer_waiting()) and, when it was
/// set, wakes the sleeper (shm_connection.hpp rings a doorbell). The flag and
/// the position are both sequentially consistent, so either the sleeper sees
/// the new bytes when it re-checks after arming, or the publisher sees the
/// flag: a wake-up is never lost.

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

namespace mccl::transport {

/// Splices open at once per ring.
constexpr int max_splices = 8;
/// Bytes of an ABORT's reason a ring's control block keeps (the most an
/// ABORT frame carries, wire::max_text_size).
constexpr std::size_t shm_note_capacity = 1024;

/// A posted splice: `len` bytes at `addr` in the writer's memory, which
/// come in the stream right before ring position `at`'s byte.
struct shm_splice {
  std::atomic<uint64_t> at{0};
  std::atomic<uint64_t> addr{0};
  std::atomic<uint64_t> len{0};
};

/// The shared part of a ring: positions and flags on separate cache lines
/// (no false sharing between the two processes), then the data.
struct shm_ring_control {
  alignas(64) std::atomic<uint64_t> head{0}; ///< bytes ever written (writer)
  alignas(64) std::atomic<uint64_t> tail{0}; ///< bytes ever read (reader)
  alignas(64) std::atomic<uint32_t> reader_waiting{0};
  alignas(64) std::atomic<uint32_t> writer_waiting{0};
  // Splices: entry n % max_splices holds splice n while posted > n >= taken.
  alignas(64) std::atomic<uint64_t> posted{0}; ///< splices ever posted (writer)
  std::atomic<uint64_t> probe_addr{0};         ///< where writer_pid is in the writer's memory
  std::atomic<int32_t> writer_pid{0};          ///< set once splices may be posted
  /// Set when the writer dropped the buffers of open splices (an abort):
  /// what the reader copied of them may be anything, and the stream ends.
  std::atomic<uint32_t> revoked{0};
  shm_splice splices[max_splices];
  alignas(64) std::atomic<uint64_t> taken{0};   ///< splices ever taken whole (reader)
  std::atomic<uint64_t> spliced{0};             ///< splice bytes ever taken (reader)
  /// The reader's verdict on reading the writer's memory: 0 not yet
  /// probed, 1 it can, 2 it cannot.
  std::atomic<uint32_t> reader_splices{0};
  /// The writer's ABORT, left beside the stream (shm_ring::leave_note):
  /// origin, code and text are written before `noted` is set, and read
  /// only after it is seen.
  alignas(64) std::atomic<uint32_t> noted{0};
  int32_t note_origin;
  uint32_t note_code;
  uint64_t note_revoke_point;
  uint32_t note_len;
  uint8_t note_text[shm_note_capacity];
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

  /// Takes as much of the gathered buffers as it can (into the ring, or as
  /// splices) and returns the bytes it can report written, in stream
  /// order. `iov` starts at the first unreported byte; what was taken
  /// before and not yet reported is skipped, not taken twice.
  std::size_t write(const iovec* iov, int count) noexcept;
  /// Copies up to `len` bytes of the stream out: ring bytes, or those of a
  /// splice straight from the writer's memory. Returns the bytes read, or
  /// -1 with errno set when the writer's memory could not be read (or the
  /// writer revoked its splices: ECANCELED).
  std::ptrdiff_t read(void* out, std::size_t len) noexcept;

  /// Bytes the reader could read now from the ring (splices not counted).
  std::size_t readable() const noexcept;
  /// Something to read now: ring bytes, or a splice posted and not taken.
  bool has_input() const noexcept;
  /// Bytes the writer could write now.
  std::size_t writable() const noexcept;

  /// The reader is about to sleep; true when something came meanwhile
  /// (then it must not sleep).
  bool arm_reader() noexcept;
  /// The writer is about to sleep; true when what it waits for (room, a
  /// splice taken) came meanwhile.
  bool arm_writer() noexcept;
  /// After publishing: whether the other side asked to be woken (clears it).
  bool take_reader_waiting() noexcept;
  bool take_writer_waiting() noexcept;

  /// Writer: post buffers of at least `min_bytes` as splices from now on,
  /// once the reader accepts (0: never).
  void enable_splices(std::size_t min_bytes) noexcept;
  /// Reader: once the writer enabled splices, checks that this process
  /// can read the writer's memory and tells the writer. Returns 1 when it
  /// just accepted, 2 when it just refused (errno says why), 0 when there
  /// was nothing to decide (not enabled yet, or decided before).
  int probe_splices() noexcept;
  /// Writer: bytes taken but not yet reported (behind an open splice).
  bool unreported() const noexcept { return accepted_ != reported_; }
  /// Writer: the caller drops its buffers now; the reader must not use
  /// what it copies from the open splices (read() fails from then on).
  void revoke_splices() noexcept;
  /// Writer: leaves the ABORT it sends (origin, code, revoke point,
  /// reason's bytes, cut at shm_note_capacity) in the control block, beside
  /// the stream, for a reader whose stream ends before the frame (note()).
  /// The first note stays.
  void leave_note(int32_t origin, uint32_t code, uint64_t revoke_point, const uint8_t* text,
                  std::size_t len) noexcept;
  /// Reader: the writer's note, if it left one: true and the fields.
  bool note(int32_t& origin, uint32_t& code, uint64_t& revoke_point, std::string& text) const;
  /// Reader: splice bytes taken so far, ever.
  uint64_t spliced() const noexcept { return spliced_; }

  std::size_t capacity() const noexcept { return capacity_; }

private:
  /// Writer: a splice not yet taken whole, by stream offset.
  struct open_splice {
    uint64_t stream_at;     ///< its first byte's offset in the stream
    uint64_t len;
    uint64_t spliced_before; ///< splice bytes of all splices before it
  };
  void post(const uint8_t* data, std::size_t len, uint64_t ring_at) noexcept;
  /// Writer: the stream offset up to which every byte reached the reader
  /// or the ring.
  uint64_t delivered() noexcept;

  shm_ring_control* ctl_ = nullptr;
  uint8_t* data_ = nullptr;
  std::size_t capacity_ = 0;
  // The other side's position as last seen: refreshed only when it would
  // not suffice, so the other side's cache line is read rarely.
  uint64_t seen_tail_ = 0; ///< writer's copy of tail
  uint64_t seen_head_ = 0; ///< reader's copy of head

  // Writer.
  std::size_t splice_min_ = 0;
  bool splices_accepted_ = false;
  uint64_t accepted_ = 0;    ///< stream bytes taken (ring or splice)
  uint64_t reported_ = 0;    ///< stream bytes reported written
  uint64_t spliced_out_ = 0; ///< splice bytes ever posted
  uint64_t posted_ = 0;      ///< splices ever posted
  std::deque<open_splice> open_;
  bool ring_full_ = false;       ///< the last write stopped for want of room
  bool slots_full_ = false;      ///< ... for want of a free splice entry
  uint64_t seen_spliced_ = 0;    ///< the reader's spliced count at the last write
  // Reader.
  uint64_t spliced_ = 0;   ///< splice bytes taken, ever
  uint64_t taken_ = 0;     ///< splices taken whole, ever
  uint64_t in_done_ = 0;   ///< bytes taken of splice taken_
  pid_t writer_ = 0;
};

} // namespace mccl::transport
