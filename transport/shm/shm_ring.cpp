#include "transport/shm/shm_ring.hpp"

#include <algorithm>
#include <cstring>

namespace mccl::transport {

std::size_t shm_ring::write(const iovec* iov, int count) noexcept {
  uint64_t head = ctl_->head.load(std::memory_order_relaxed); // ours
  std::size_t room = capacity_ - static_cast<std::size_t>(head - seen_tail_);
  std::size_t want = 0;
  for (int i = 0; i < count; ++i)
    want += iov[i].iov_len;
  if (room < want) {
    seen_tail_ = ctl_->tail.load(std::memory_order_acquire);
    room = capacity_ - static_cast<std::size_t>(head - seen_tail_);
  }
  std::size_t mask = capacity_ - 1;
  std::size_t taken = 0;
  for (int i = 0; i < count && room > 0; ++i) {
    auto* src = static_cast<const uint8_t*>(iov[i].iov_base);
    std::size_t n = std::min(iov[i].iov_len, room);
    std::size_t at = static_cast<std::size_t>(head + taken) & mask;
    std::size_t first = std::min(n, capacity_ - at); // up to the end of the data, then from its start
    std::memcpy(data_ + at, src, first);
    std::memcpy(data_, src + first, n - first);
    taken += n;
    room -= n;
  }
  if (taken > 0)
    ctl_->head.store(head + taken, std::memory_order_seq_cst);
  return taken;
}

std::size_t shm_ring::read(void* out, std::size_t len) noexcept {
  uint64_t tail = ctl_->tail.load(std::memory_order_relaxed); // ours
  std::size_t have = static_cast<std::size_t>(seen_head_ - tail);
  if (have < len) {
    seen_head_ = ctl_->head.load(std::memory_order_acquire);
    have = static_cast<std::size_t>(seen_head_ - tail);
  }
  std::size_t n = std::min(have, len);
  if (n == 0)
    return 0;
  std::size_t at = static_cast<std::size_t>(tail) & (capacity_ - 1);
  std::size_t first = std::min(n, capacity_ - at);
  auto* dst = static_cast<uint8_t*>(out);
  std::memcpy(dst, data_ + at, first);
  std::memcpy(dst + first, data_, n - first);
  ctl_->tail.store(tail + n, std::memory_order_seq_cst);
  return n;
}

std::size_t shm_ring::readable() const noexcept {
  return static_cast<std::size_t>(ctl_->head.load(std::memory_order_acquire)
                                  - ctl_->tail.load(std::memory_order_relaxed));
}

std::size_t shm_ring::writable() const noexcept {
  return capacity_ - static_cast<std::size_t>(ctl_->head.load(std::memory_order_relaxed)
                                              - ctl_->tail.load(std::memory_order_acquire));
}

// Arming and taking are a store and a load on each side, all seq_cst with
// the position stores above: the classic store-then-load handshake.
// A side that finds its wish granted after arming withdraws the flag (a
// doorbell the other side rang meanwhile only wakes it once for nothing).
bool shm_ring::arm_reader() noexcept {
  ctl_->reader_waiting.store(1, std::memory_order_seq_cst);
  bool ready = ctl_->head.load(std::memory_order_seq_cst) != ctl_->tail.load(std::memory_order_relaxed);
  if (ready)
    ctl_->reader_waiting.store(0, std::memory_order_relaxed);
  return ready;
}

bool shm_ring::arm_writer() noexcept {
  ctl_->writer_waiting.store(1, std::memory_order_seq_cst);
  bool ready = ctl_->head.load(std::memory_order_relaxed) - ctl_->tail.load(std::memory_order_seq_cst)
               < capacity_;
  if (ready)
    ctl_->writer_waiting.store(0, std::memory_order_relaxed);
  return ready;
}

bool shm_ring::take_reader_waiting() noexcept {
  return ctl_->reader_waiting.load(std::memory_order_seq_cst) != 0
         && ctl_->reader_waiting.exchange(0, std::memory_order_seq_cst) != 0;
}

bool shm_ring::take_writer_waiting() noexcept {
  return ctl_->writer_waiting.load(std::memory_order_seq_cst) != 0
         && ctl_->writer_waiting.exchange(0, std::memory_order_seq_cst) != 0;
}

} // namespace mccl::transport
