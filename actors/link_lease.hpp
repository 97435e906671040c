#pragma once
/// Who may touch a link's connection right now: its link actor, or a caller
/// thread running a small op inline (actors/inline_path.hpp).
///
/// A link offers its connection while it is parked with nothing to do (no
/// op routed, nothing queued or half-read). A caller borrows all links of its
/// communicator, moves the op's frames itself, and gives them back. Whatever
/// it read past its own frames (the next op's chunks, a heartbeat, an ABORT)
/// stays here as raw bytes, in stream order, for whoever drives the
/// connection next; so does the rest of a frame it could not finish writing.
///
/// States: held (the link drives it) -> idle (offered) -> lent (a caller
/// drives it) -> idle. A link that needs its connection while it is lent
/// marks it wanted; the borrower then pokes the link when it gives it back.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace mccl::actors {

class link_lease {
public:
  /// Link: offer the connection (it is parked and has nothing to do).
  void offer() noexcept { state_.store(idle, std::memory_order_release); }

  /// Link: take the connection back. False while a caller has it; the link
  /// is then poked (lease_returned_atom) once the caller is done.
  bool reclaim() noexcept {
    int s = state_.load(std::memory_order_acquire);
    for (;;) {
      if (s == held)
        return true;
      int next = s == idle ? held : lent_wanted;
      if (s == lent_wanted || state_.compare_exchange_weak(s, next, std::memory_order_acq_rel))
        return s == idle;
    }
  }

  /// Caller: borrow an offered connection; false if the link is using it.
  bool borrow() noexcept {
    int s = idle;
    return state_.compare_exchange_strong(s, lent, std::memory_order_acq_rel);
  }

  /// Caller: give the connection back. True when the link asked for it in
  /// the meantime (the caller must poke it).
  bool give_back() noexcept { return state_.exchange(idle, std::memory_order_acq_rel) == lent_wanted; }

  /// Bytes read from the connection but not consumed (whole frames, then
  /// possibly the start of one), to be parsed before reading more. Only the
  /// current holder touches them.
  std::vector<uint8_t> unread;
  /// The remainder of a frame the borrower began but could not finish
  /// writing (its op failed): the next holder writes it first, so the
  /// stream stays well-formed.
  std::vector<uint8_t> unwritten;
  /// The borrower left the connection's readiness notifications suspended;
  /// the link resumes them when it takes the connection back. Until then
  /// bytes that arrive wait in the socket for the next borrower, or for the
  /// link's next tick (MCCL_HEARTBEAT_MS) or message.
  bool quiet = false;
  /// When the borrower last read bytes from the peer: the link's heartbeat
  /// watch goes on from there.
  std::chrono::steady_clock::time_point last_rx{};

private:
  enum : int { held = 0, idle = 1, lent = 2, lent_wanted = 3 };
  /// A new link has nothing to do: its connection is on offer from the start
  /// (the link actor may not even have run yet when the first op comes).
  std::atomic<int> state_{idle};
};

} // namespace mccl::actors
