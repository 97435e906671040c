#include "transport/shm/shm_board.hpp"

#include <mccl/config.hpp>

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <ctime>
#include <utility>

namespace mccl::transport {
namespace {

constexpr std::size_t log_entries = 64;
/// As the engine's loss grace (collectives/engine/engine.hpp).
constexpr auto departure_grace = std::chrono::milliseconds(100);

/// One noted collective: a seqlock-like pair, the seq written last.
struct log_entry {
  std::atomic<uint64_t> seq_plus_one{0};
  board_tag tag;
};

struct board_header {
  alignas(64) std::atomic<uint32_t> sleepers{0};
};

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

/// True when counter value `posted` says op n was posted (modulo 2^32).
bool has_posted(uint32_t posted, uint64_t n) noexcept {
  return static_cast<int32_t>(posted - static_cast<uint32_t>(n + 1)) >= 0;
}

/// A slot's header takes one page; its banks follow, cache-line aligned
/// (the stage and result banks page aligned).
constexpr std::size_t slot_header_bytes = 4096;

std::size_t round_up(std::size_t n, std::size_t to) noexcept {
  return (n + to - 1) / to * to;
}

/// One slot: header, two banks, two stage banks, two result banks.
std::size_t stride_of(std::size_t slot_bytes, std::size_t stage_bytes, std::size_t result_bytes) noexcept {
  return round_up(slot_header_bytes + 2 * slot_bytes, stage_bytes > 0 ? 4096 : 64) + 2 * stage_bytes
         + 2 * result_bytes;
}

} // namespace

/// A rank's slot: its counter alone on a cache line (the peers spin on it),
/// the tags of both banks, its seq log, then the banks.
struct shm_board::slot {
  alignas(64) std::atomic<uint32_t> posted{0};
  /// Collectives issued + 1 once the rank finalized; 0 while it runs.
  std::atomic<uint64_t> departed_issued_plus_one{0};
  alignas(64) board_tag tags[2];
  uint64_t seqs[2] = {0, 0};
  log_entry log[log_entries];
};

std::size_t shm_board::result_bytes(int world, std::size_t stage_bytes) noexcept {
  if (stage_bytes == 0 || world < 1)
    return 0;
  // A share is ceil(elements / world) rounded up to 64 bytes' worth of
  // elements: at most stage_bytes / world + 64 bytes.
  return round_up(round_up(stage_bytes, static_cast<std::size_t>(world)) / static_cast<std::size_t>(world), 64) + 64;
}

std::size_t shm_board::segment_bytes(int world, std::size_t slot_bytes, std::size_t stage_bytes) noexcept {
  static_assert(sizeof(slot) <= slot_header_bytes, "a slot's header fits its page");
  return 64 + static_cast<std::size_t>(world) * stride_of(slot_bytes, stage_bytes, result_bytes(world, stage_bytes));
}

shm_board::shm_board(shm_segment segment, int world, int rank, std::size_t slot_bytes, std::size_t stage_bytes)
  : segment_(std::move(segment)), world_(world), rank_(rank), slot_bytes_(slot_bytes), stage_bytes_(stage_bytes),
    result_bytes_(result_bytes(world, stage_bytes)), stride_(stride_of(slot_bytes, stage_bytes, result_bytes_)),
    stage_offset_(round_up(slot_header_bytes + 2 * slot_bytes, 4096)), yield_while_polling_(cpus_per_rank(world) < 2) {}

shm_board::slot& shm_board::slot_of(int r) const noexcept {
  auto* at = segment_.data() + 64 + static_cast<std::size_t>(r) * stride_;
  return *reinterpret_cast<slot*>(at);
}

uint8_t* shm_board::bank_of(int r, uint64_t n) const noexcept {
  return reinterpret_cast<uint8_t*>(&slot_of(r)) + slot_header_bytes + (n & 1) * slot_bytes_;
}

uint8_t* shm_board::stage_of(int r, uint64_t n) const noexcept {
  return reinterpret_cast<uint8_t*>(&slot_of(r)) + stage_offset_ + (n & 1) * stage_bytes_;
}

uint8_t* shm_board::result_of(int r, uint64_t n) const noexcept {
  return stage_of(r, 0) + 2 * stage_bytes_ + (n & 1) * result_bytes_;
}

const uint8_t* shm_board::bytes_of(int peer, uint64_t n) const noexcept {
  return bank_of(peer, n);
}

void shm_board::note(uint64_t seq, const board_tag& tag) {
  auto& e = slot_of(rank_).log[seq % log_entries];
  e.seq_plus_one.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  e.tag = tag;
  e.seq_plus_one.store(seq + 1, std::memory_order_release);
}

void shm_board::depart(uint64_t issued) {
  auto& s = slot_of(rank_);
  s.departed_issued_plus_one.store(issued + 1, std::memory_order_seq_cst);
  auto* header = reinterpret_cast<board_header*>(segment_.data());
  if (header->sleepers.load(std::memory_order_seq_cst) > 0)
    futex(&s.posted, FUTEX_WAKE, INT_MAX, nullptr);
}

void shm_board::post(uint64_t n, uint64_t seq, const board_tag& tag, const void* data, std::size_t bytes) {
  auto& s = slot_of(rank_);
  if (bytes > 0)
    std::memcpy(bank_of(rank_, n), data, bytes);
  s.tags[n & 1] = tag;
  s.seqs[n & 1] = seq;
  s.posted.store(static_cast<uint32_t>(n + 1), std::memory_order_seq_cst);
  auto* header = reinterpret_cast<board_header*>(segment_.data());
  if (header->sleepers.load(std::memory_order_seq_cst) > 0)
    futex(&s.posted, FUTEX_WAKE, INT_MAX, nullptr);
}

shm_board::wait_result shm_board::wait(int peer, uint64_t n, uint64_t seq, const board_tag& mine,
                                       const waiting& how, board_tag* theirs, uint64_t* issued) {
  auto& s = slot_of(peer);
  auto* header = reinterpret_cast<board_header*>(segment_.data());
  auto& entry = s.log[seq % log_entries];
  auto spin_until = clock::now() + how.spin;
  clock::time_point departed_seen{};
  for (unsigned round = 0;; ++round) {
    uint32_t posted = s.posted.load(std::memory_order_acquire);
    if (has_posted(posted, n)) {
      *theirs = s.tags[n & 1];
      return *theirs == mine ? wait_result::posted : wait_result::other_tag;
    }
    if (round % 64 != 0)
      continue;
    // A collective of another path at our seq: its tag in the log.
    auto at = entry.seq_plus_one.load(std::memory_order_acquire);
    if (at == seq + 1) {
      board_tag seen = entry.tag;
      std::atomic_thread_fence(std::memory_order_acquire);
      if (entry.seq_plus_one.load(std::memory_order_relaxed) == at && seen != mine) {
        *theirs = seen;
        return wait_result::other_path;
      }
    }
    if (how.stop())
      return wait_result::stopped;
    auto now = clock::now();
    // A departure is the verdict only after a grace period in which an
    // ABORT the peer sent before leaving (over the links) may explain it.
    auto departed = s.departed_issued_plus_one.load(std::memory_order_acquire);
    if (departed != 0 && departed - 1 <= seq) {
      if (departed_seen == clock::time_point{})
        departed_seen = now;
      if (now - departed_seen >= departure_grace) {
        *issued = departed - 1;
        return wait_result::departed;
      }
    }
    if (now >= how.deadline)
      return wait_result::timed_out;
    if (now < spin_until) {
      // With more ranks than cores (4 ranks on 2 cores) the peer we wait
      // for may need this core to get here, and with one core each this
      // rank's other threads (its links' workers, its board thread) may:
      // yield while polling. With two or more it only slowed the polling
      // (32 ranks on 2 CPUs each, polling 200 us: 13 of 24 runs in the
      // slow mode yielding, 1 of 8 not; docs/performance.md, "The spin
      // policy").
      if (yield_while_polling_)
        ::sched_yield();
      continue;
    }
    // Sleep on the peer's counter; a post in between makes the futex
    // return at once (the value differs).
    if (how.asleep)
      how.asleep();
    header->sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (!has_posted(s.posted.load(std::memory_order_seq_cst), n)) {
      timespec t{0, 2'000'000}; // 2 ms: stop() and the deadline are checked between sleeps
      futex(&s.posted, FUTEX_WAIT, posted, &t);
    }
    header->sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

} // namespace mccl::transport
