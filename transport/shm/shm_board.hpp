#pragma once
/// The host board: one segment shared by every rank of a communicator whose
/// ranks all run on one host, for small collectives without frames (in the
/// manner of Open MPI's coll/sm and NCCL's LL protocol: data and a flag in
/// shared memory, read by the peers as it lands).
///
/// Every rank owns a slot with two banks. Board op n: each rank writes its
/// bytes into bank n % 2 of its slot with the op's tag, then publishes
/// the bank's counter `posted = n + 1`; each then waits until every peer
/// has posted n and reads what it needs straight from the peers' banks. A
/// rank posts n + 2 (the same bank again) only after it saw every peer's
/// n + 1, which each peer posts only after it finished reading op n: two
/// banks are enough and no other handshake is needed.
///
/// A bank's counter, its tag and its first 32 bytes share one cache line
/// (in the manner of NCCL's LL protocol, data beside its flag): a peer
/// that sees the counter of a tiny op has its tag and bytes in the same
/// transfer between cores, one instead of three. And a rank waits for all
/// its peers at once, polling every counter not yet seen in each sweep, so
/// the transfers of many peers' lines overlap instead of following one
/// another (at 16 and 32 ranks these transfers, some 100 ns each on the
/// lent machines, were most of a tiny op's time; docs/performance.md,
/// "Tiny ops on the host board").
///
/// Waiting polls for the caller's spin time (yielding the core between
/// polls when a rank has fewer than two CPUs to itself), then sleeps on a
/// counter not yet posted with a futex (a poster wakes sleepers only when
/// there are any), always bounded by the caller's deadline and stop check.
///
/// Collectives issued on any path also note their tag by seq (the
/// seq log), so a rank waiting on the board for a peer that issued
/// another collective at that seq learns it at once.
///
/// Beside the banks, a slot may hold two stage banks of `stage_bytes` and
/// two result banks of result_bytes() for allreduces larger than a bank
/// (collectives/algorithms/board_collectives.hpp, "board_rs"). They follow
/// the same rule as the banks: what a rank posts with op n is read by the
/// peers only until they post n + 1, and the bank of op n is written
/// again for op n + 2 at the earliest.

#include "transport/shm/shm_segment.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace mccl::transport {

/// What identifies a collective (its signature, packed by the caller).
struct board_tag {
  uint64_t words[3] = {0, 0, 0};
  bool operator==(const board_tag& o) const noexcept {
    return words[0] == o.words[0] && words[1] == o.words[1] && words[2] == o.words[2];
  }
  bool operator!=(const board_tag& o) const noexcept { return !(*this == o); }
};

class shm_board {
public:
  using clock = std::chrono::steady_clock;

  /// The segment size for `world` ranks with banks of `slot_bytes` and
  /// stage banks of `stage_bytes` (0: none).
  static std::size_t segment_bytes(int world, std::size_t slot_bytes, std::size_t stage_bytes = 0) noexcept;
  /// A result bank's size: the largest share of a stage bank's bytes one
  /// of `world` ranks reduces (cut at 64-byte boundaries), rounded up.
  static std::size_t result_bytes(int world, std::size_t stage_bytes) noexcept;

  /// `segment` of segment_bytes(world, slot_bytes, stage_bytes), as rank
  /// `rank` sees it.
  shm_board(shm_segment segment, int world, int rank, std::size_t slot_bytes, std::size_t stage_bytes = 0);

  int world() const noexcept { return world_; }
  int rank() const noexcept { return rank_; }
  std::size_t slot_bytes() const noexcept { return slot_bytes_; }
  /// Each stage bank's size; 0: no stage banks.
  std::size_t stage_bytes() const noexcept { return stage_bytes_; }

  /// Posts board op `n`: `bytes` (at most slot_bytes) from `data` into
  /// this rank's bank, then its tag and counter.
  void post(uint64_t n, const board_tag& tag, const void* data, std::size_t bytes);
  /// Notes the tag of collective number `seq`, whatever its path.
  void note(uint64_t seq, const board_tag& tag);
  /// This rank finalized after issuing `issued` collectives.
  void depart(uint64_t issued);

  enum class wait_result {
    posted,      ///< every peer waited for posted op n with our tag
    other_tag,   ///< a peer posted op n with another tag (`theirs`)
    other_path,  ///< a peer's collective at our seq has another tag (`theirs`)
    departed,    ///< a peer finalized before issuing our seq (`issued` collectives)
    stopped,     ///< stop() said so
    timed_out,   ///< deadline passed
  };
  /// How to wait.
  struct waiting {
    std::chrono::microseconds spin{200}; ///< poll this long before sleeping
    clock::time_point deadline;
    std::function<bool()> stop;          ///< checked every few polls and sleeps
    std::function<void()> asleep;        ///< called before each sleep (at most every 2 ms)
  };
  /// What a wait found.
  struct waited {
    wait_result result = wait_result::posted;
    /// The peer it is about: the one that posted another tag, took another
    /// path or departed; stopped or timed out, the lowest rank not posted.
    int peer = -1;
    int posted = 0;      ///< how many of the peers waited for had posted op n
    board_tag theirs;    ///< other_tag, other_path: the peer's tag
    uint64_t issued = 0; ///< departed: the collectives it issued
  };
  /// Waits until every peer (every rank but this one) has posted board op
  /// `n` (our collective number `seq`, tagged `mine`), or one of them
  /// shows it never will.
  waited wait_all(uint64_t n, uint64_t seq, const board_tag& mine, const waiting& how);
  /// `peer`'s bytes of board op `n` (valid once wait() said posted).
  const uint8_t* bytes_of(int peer, uint64_t n) const noexcept;
  /// Rank `r`'s stage and result banks for board op `n`: written by r
  /// before it posts n, read by the others once wait() said posted.
  uint8_t* stage_of(int r, uint64_t n) const noexcept;
  uint8_t* result_of(int r, uint64_t n) const noexcept;

private:
  struct slot;
  struct bank_line;
  slot& slot_of(int r) const noexcept;
  bank_line& line_of(int r, uint64_t n) const noexcept;
  uint8_t* bank_of(int r, uint64_t n) const noexcept;

  shm_segment segment_;
  int world_;
  int rank_;
  std::size_t slot_bytes_;
  std::size_t stage_bytes_;
  std::size_t result_bytes_;
  std::size_t bank_stride_; ///< one bank with its line's head
  std::size_t stride_;       ///< one slot with its banks
  std::size_t stage_offset_; ///< the first stage bank, from its slot
  bool yield_while_polling_ = false; ///< a rank has under 2 CPUs to itself (cpus_per_rank)
  /// Which sweep of every 64 in wait_all() looks past the counters (the
  /// clock, stop(), departures, the yield). The first where ranks outnumber
  /// the CPUs: the peer waited for may need this core to post at all. The
  /// 64th otherwise, so that a wait whose peers post within it (about a
  /// microsecond) reads no clock and makes no sched_yield, a system call:
  /// on 2 vCPUs a 2-rank 4 B allreduce went from 1.12x c9061a7's time to
  /// 0.71x (docs/performance.md, "Board ops on op actors").
  unsigned look_round_ = 63;
};

} // namespace mccl::transport
