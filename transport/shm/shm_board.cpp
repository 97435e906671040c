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
#include <vector>

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

/// A slot's header takes one page; its banks follow, each after its line's
/// head (the stage and result banks page aligned).
constexpr std::size_t slot_header_bytes = 4096;

std::size_t round_up(std::size_t n, std::size_t to) noexcept {
  return (n + to - 1) / to * to;
}

} // namespace

/// The head of a bank: its counter and tag, in the cache line that holds
/// the bank's first bytes too (they follow at offset 32).
struct shm_board::bank_line {
  alignas(64) std::atomic<uint32_t> posted{0};
  uint32_t unused = 0;
  board_tag tag;
};

namespace {

constexpr std::size_t bank_head_bytes = 32;
static_assert(sizeof(board_tag) + 8 == bank_head_bytes, "a bank's head is its counter and tag");

/// One bank with its head, in whole cache lines.
std::size_t bank_stride_of(std::size_t slot_bytes) noexcept {
  return round_up(bank_head_bytes + slot_bytes, 64);
}

/// One slot: header, two banks, two stage banks, two result banks.
std::size_t stride_of(std::size_t slot_bytes, std::size_t stage_bytes, std::size_t result_bytes) noexcept {
  return round_up(slot_header_bytes + 2 * bank_stride_of(slot_bytes), stage_bytes > 0 ? 4096 : 64) + 2 * stage_bytes
         + 2 * result_bytes;
}

} // namespace

/// A rank's slot header: whether it finalized, and its seq log. Its banks
/// follow (bank_line).
struct shm_board::slot {
  /// Collectives issued + 1 once the rank finalized; 0 while it runs.
  alignas(64) std::atomic<uint64_t> departed_issued_plus_one{0};
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
    result_bytes_(result_bytes(world, stage_bytes)), bank_stride_(bank_stride_of(slot_bytes)),
    stride_(stride_of(slot_bytes, stage_bytes, result_bytes_)),
    stage_offset_(round_up(slot_header_bytes + 2 * bank_stride_, 4096)) {
  auto cpus = cpus_per_rank(world);
  yield_while_polling_ = cpus < 2;
  look_round_ = cpus == 0 ? 0 : 63;
}

shm_board::slot& shm_board::slot_of(int r) const noexcept {
  auto* at = segment_.data() + 64 + static_cast<std::size_t>(r) * stride_;
  return *reinterpret_cast<slot*>(at);
}

shm_board::bank_line& shm_board::line_of(int r, uint64_t n) const noexcept {
  auto* at = reinterpret_cast<uint8_t*>(&slot_of(r)) + slot_header_bytes + (n & 1) * bank_stride_;
  return *reinterpret_cast<bank_line*>(at);
}

uint8_t* shm_board::bank_of(int r, uint64_t n) const noexcept {
  return reinterpret_cast<uint8_t*>(&line_of(r, n)) + bank_head_bytes;
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
  slot_of(rank_).departed_issued_plus_one.store(issued + 1, std::memory_order_seq_cst);
  auto* header = reinterpret_cast<board_header*>(segment_.data());
  if (header->sleepers.load(std::memory_order_seq_cst) > 0)
    for (uint64_t bank = 0; bank < 2; ++bank)
      futex(&line_of(rank_, bank).posted, FUTEX_WAKE, INT_MAX, nullptr);
}

void shm_board::post(uint64_t n, const board_tag& tag, const void* data, std::size_t bytes) {
  auto& line = line_of(rank_, n);
  if (bytes > 0)
    std::memcpy(bank_of(rank_, n), data, bytes);
  line.tag = tag;
  line.posted.store(static_cast<uint32_t>(n + 1), std::memory_order_seq_cst);
  auto* header = reinterpret_cast<board_header*>(segment_.data());
  if (header->sleepers.load(std::memory_order_seq_cst) > 0)
    futex(&line.posted, FUTEX_WAKE, INT_MAX, nullptr);
}

shm_board::waited shm_board::wait_all(uint64_t n, uint64_t seq, const board_tag& mine, const waiting& how) {
  // The peers in rank order; on the stack up to a few hundred ranks.
  constexpr int on_stack = 255;
  int local[on_stack];
  std::vector<int> many;
  int* pending = local;
  if (world_ - 1 > on_stack) {
    many.resize(static_cast<std::size_t>(world_ - 1));
    pending = many.data();
  }
  int count = 0;
  for (int p = 0; p < world_; ++p)
    if (p != rank_)
      pending[count++] = p;
  auto* header = reinterpret_cast<board_header*>(segment_.data());
  waited w;
  int left = count;
  clock::time_point spin_until{}; // set at the first look (look_round_)
  clock::time_point departed_seen{};
  int departed_peer = -1;
  for (unsigned round = 0;; ++round) {
    // One sweep: every counter not seen yet is read before any answer is
    // acted on, so the lines of many peers are on their way at once.
    int kept = 0;
    for (int i = 0; i < left; ++i) {
      int p = pending[i];
      auto& line = line_of(p, n);
      if (!has_posted(line.posted.load(std::memory_order_acquire), n)) {
        pending[kept++] = p;
        continue;
      }
      if (line.tag != mine) {
        w.result = wait_result::other_tag;
        w.peer = p;
        w.theirs = line.tag;
        w.posted = count - left;
        return w;
      }
    }
    left = kept;
    w.posted = count - left;
    if (left == 0)
      return w;
    if (round % 64 != look_round_)
      continue;
    for (int i = 0; i < left; ++i) {
      int p = pending[i];
      auto& s = slot_of(p);
      // A collective of another path at our seq: its tag in the log.
      auto& entry = s.log[seq % log_entries];
      auto at = entry.seq_plus_one.load(std::memory_order_acquire);
      if (at == seq + 1) {
        board_tag seen = entry.tag;
        std::atomic_thread_fence(std::memory_order_acquire);
        if (entry.seq_plus_one.load(std::memory_order_relaxed) == at && seen != mine) {
          w.result = wait_result::other_path;
          w.peer = p;
          w.theirs = seen;
          return w;
        }
      }
    }
    w.peer = pending[0]; // the lowest rank not posted, from here on
    if (how.stop()) {
      w.result = wait_result::stopped;
      return w;
    }
    auto now = clock::now();
    if (round == look_round_)
      spin_until = now + how.spin;
    // A departure is the verdict only after a grace period in which an
    // ABORT the peer sent before leaving (over the links) may explain it.
    for (int i = 0; i < left; ++i) {
      int p = pending[i];
      auto departed = slot_of(p).departed_issued_plus_one.load(std::memory_order_acquire);
      if (departed == 0 || departed - 1 > seq)
        continue;
      if (departed_peer != p) {
        departed_peer = p;
        departed_seen = now;
      }
      if (now - departed_seen >= departure_grace) {
        w.result = wait_result::departed;
        w.peer = p;
        w.issued = departed - 1;
        return w;
      }
      break; // one departure at a time is enough to time
    }
    if (now >= how.deadline) {
      w.result = wait_result::timed_out;
      return w;
    }
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
    // Sleep on the counter of the lowest rank not posted; a post in
    // between makes the futex return at once (the value differs).
    if (how.asleep)
      how.asleep();
    auto& line = line_of(pending[0], n);
    header->sleepers.fetch_add(1, std::memory_order_seq_cst);
    auto posted = line.posted.load(std::memory_order_seq_cst);
    if (!has_posted(posted, n)) {
      timespec t{0, 2'000'000}; // 2 ms: stop() and the deadline are checked between sleeps
      futex(&line.posted, FUTEX_WAIT, posted, &t);
    }
    header->sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

} // namespace mccl::transport
