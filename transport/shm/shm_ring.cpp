#include "transport/shm/shm_ring.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mccl::transport {

std::size_t shm_ring::write(const iovec* iov, int count) noexcept {
  if (splice_min_ > 0 && !splices_accepted_)
    splices_accepted_ = ctl_->reader_splices.load(std::memory_order_acquire) == 1;
  ring_full_ = slots_full_ = false;
  uint64_t head = ctl_->head.load(std::memory_order_relaxed); // ours
  uint64_t added = 0; // ring bytes copied in by this call, not yet published
  std::size_t mask = capacity_ - 1;
  std::size_t skip = static_cast<std::size_t>(accepted_ - reported_);
  for (int i = 0; i < count; ++i) {
    auto* src = static_cast<const uint8_t*>(iov[i].iov_base);
    std::size_t len = iov[i].iov_len;
    if (skip >= len) { // taken by an earlier call, not reported yet
      skip -= len;
      continue;
    }
    src += skip;
    len -= skip;
    skip = 0;
    if (splices_accepted_ && len >= splice_min_) {
      if (posted_ - ctl_->taken.load(std::memory_order_acquire) >= max_splices) {
        slots_full_ = true;
        break;
      }
      // The ring bytes before it are published first: the reader meets
      // the splice at exactly that position.
      head += added;
      if (added > 0)
        ctl_->head.store(head, std::memory_order_seq_cst);
      added = 0;
      post(src, len, head);
      continue;
    }
    std::size_t room = capacity_ - static_cast<std::size_t>(head + added - seen_tail_);
    if (room < len) {
      seen_tail_ = ctl_->tail.load(std::memory_order_acquire);
      room = capacity_ - static_cast<std::size_t>(head + added - seen_tail_);
    }
    std::size_t n = std::min(len, room);
    std::size_t at = static_cast<std::size_t>(head + added) & mask;
    std::size_t first = std::min(n, capacity_ - at); // up to the end of the data, then from its start
    std::memcpy(data_ + at, src, first);
    std::memcpy(data_, src + first, n - first);
    added += n;
    accepted_ += n;
    if (n < len) {
      ring_full_ = true;
      break;
    }
  }
  if (added > 0)
    ctl_->head.store(head + added, std::memory_order_seq_cst);
  auto upto = delivered();
  auto n = static_cast<std::size_t>(upto - reported_);
  reported_ = upto;
  return n;
}

/// Publishes splice number posted_ (read() finds it by that number).
void shm_ring::post(const uint8_t* data, std::size_t len, uint64_t ring_at) noexcept {
  auto& e = ctl_->splices[posted_ % max_splices];
  e.at.store(ring_at, std::memory_order_relaxed);
  e.addr.store(reinterpret_cast<uint64_t>(data), std::memory_order_relaxed);
  e.len.store(len, std::memory_order_relaxed);
  open_.push_back({accepted_, len, spliced_out_});
  accepted_ += len;
  spliced_out_ += len;
  ++posted_;
  ctl_->posted.store(posted_, std::memory_order_seq_cst);
}

uint64_t shm_ring::delivered() noexcept {
  if (open_.empty())
    return accepted_;
  // The reader takes splices in order, so its byte count says how far
  // into which splice it got.
  auto taken = ctl_->spliced.load(std::memory_order_acquire);
  seen_spliced_ = taken;
  while (!open_.empty()) {
    const auto& s = open_.front();
    auto progress = taken > s.spliced_before ? std::min(taken - s.spliced_before, s.len) : 0;
    if (progress < s.len)
      return s.stream_at + progress;
    open_.pop_front();
  }
  return accepted_;
}

void shm_ring::revoke_splices() noexcept {
  ctl_->revoked.store(1, std::memory_order_seq_cst);
  splice_min_ = 0;
  splices_accepted_ = false;
}

void shm_ring::leave_note(int32_t origin, uint32_t code, uint64_t revoke_point, const uint8_t* text,
                          std::size_t len) noexcept {
  if (ctl_->noted.load(std::memory_order_acquire) != 0)
    return;
  len = std::min(len, shm_note_capacity);
  ctl_->note_origin = origin;
  ctl_->note_code = code;
  ctl_->note_revoke_point = revoke_point;
  ctl_->note_len = static_cast<uint32_t>(len);
  std::memcpy(ctl_->note_text, text, len);
  ctl_->noted.store(1, std::memory_order_release);
}

bool shm_ring::note(int32_t& origin, uint32_t& code, uint64_t& revoke_point, std::string& text) const {
  if (ctl_->noted.load(std::memory_order_acquire) == 0)
    return false;
  origin = ctl_->note_origin;
  code = ctl_->note_code;
  revoke_point = ctl_->note_revoke_point;
  // The peer's memory: bounded whatever it wrote.
  auto len = std::min<std::size_t>(ctl_->note_len, shm_note_capacity);
  text.assign(reinterpret_cast<const char*>(ctl_->note_text), len);
  return true;
}

void shm_ring::enable_splices(std::size_t min_bytes) noexcept {
  splice_min_ = min_bytes;
  if (min_bytes == 0)
    return;
  ctl_->probe_addr.store(reinterpret_cast<uint64_t>(&ctl_->writer_pid), std::memory_order_relaxed);
  ctl_->writer_pid.store(static_cast<int32_t>(::getpid()), std::memory_order_release);
}

int shm_ring::probe_splices() noexcept {
  if (writer_ != 0)
    return 0; // decided
  auto pid = ctl_->writer_pid.load(std::memory_order_acquire);
  if (pid == 0)
    return 0; // not enabled (yet)
  writer_ = pid;
  int32_t seen = 0;
  iovec local{&seen, sizeof seen};
  iovec remote{reinterpret_cast<void*>(ctl_->probe_addr.load(std::memory_order_relaxed)), sizeof seen};
  errno = 0;
  bool ok = ::process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof seen)
            && seen == pid;
  int why = errno != 0 ? errno : EIO;
  ctl_->reader_splices.store(ok ? 1 : 2, std::memory_order_release);
  errno = ok ? 0 : why;
  return ok ? 1 : 2;
}

std::ptrdiff_t shm_ring::read(void* out, std::size_t len) noexcept {
  uint64_t tail = ctl_->tail.load(std::memory_order_relaxed); // ours
  std::size_t have = static_cast<std::size_t>(seen_head_ - tail);
  if (have < len) {
    // head before posted: a splice posted before ring bytes we see is seen.
    seen_head_ = ctl_->head.load(std::memory_order_acquire);
    have = static_cast<std::size_t>(seen_head_ - tail);
  }
  if (writer_ > 0 && ctl_->posted.load(std::memory_order_acquire) > taken_) {
    const auto& e = ctl_->splices[taken_ % max_splices];
    uint64_t at = e.at.load(std::memory_order_relaxed);
    if (at == tail) {
      uint64_t total = e.len.load(std::memory_order_relaxed);
      auto m = static_cast<std::size_t>(std::min<uint64_t>(len, total - in_done_));
      iovec local{out, m};
      iovec remote{reinterpret_cast<void*>(e.addr.load(std::memory_order_relaxed) + in_done_), m};
      auto got = ::process_vm_readv(writer_, &local, 1, &remote, 1, 0);
      // Checked after the copy: the writer revokes before it lets its
      // buffers go, so a copy that finished before the revocation is seen
      // to have read the buffer while it was still the payload.
      if (ctl_->revoked.load(std::memory_order_seq_cst) != 0) {
        errno = ECANCELED;
        return -1;
      }
      if (got <= 0) {
        if (got == 0)
          errno = EIO;
        return -1;
      }
      in_done_ += static_cast<uint64_t>(got);
      spliced_ += static_cast<uint64_t>(got);
      if (in_done_ == total) {
        in_done_ = 0;
        ++taken_;
        ctl_->taken.store(taken_, std::memory_order_release);
      }
      ctl_->spliced.store(spliced_, std::memory_order_seq_cst);
      return got;
    }
    have = std::min<std::size_t>(have, static_cast<std::size_t>(at - tail)); // stop at the splice
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
  return static_cast<std::ptrdiff_t>(n);
}

std::size_t shm_ring::readable() const noexcept {
  return static_cast<std::size_t>(ctl_->head.load(std::memory_order_acquire)
                                  - ctl_->tail.load(std::memory_order_relaxed));
}

bool shm_ring::has_input() const noexcept {
  return readable() > 0 || ctl_->posted.load(std::memory_order_acquire) > taken_;
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
  bool ready = ctl_->head.load(std::memory_order_seq_cst) != ctl_->tail.load(std::memory_order_relaxed)
               || ctl_->posted.load(std::memory_order_seq_cst) > taken_;
  if (ready)
    ctl_->reader_waiting.store(0, std::memory_order_relaxed);
  return ready;
}

bool shm_ring::arm_writer() noexcept {
  ctl_->writer_waiting.store(1, std::memory_order_seq_cst);
  // What it waits for: the reader taking splice bytes (reported after
  // them), a free splice entry, or room (when it stopped for room, or has
  // no splice open that it could be waiting on instead).
  bool ready =
    (!open_.empty() && ctl_->spliced.load(std::memory_order_seq_cst) != seen_spliced_)
    || (slots_full_ && posted_ - ctl_->taken.load(std::memory_order_seq_cst) < max_splices)
    || ((ring_full_ || open_.empty())
        && ctl_->head.load(std::memory_order_relaxed) - ctl_->tail.load(std::memory_order_seq_cst) < capacity_);
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
