#pragma once
/// What one link (a channel to one peer) moved and recovered, counted by
/// the channel as it works and read by the metrics registry
/// (include/mccl/metrics.hpp) at any time: relaxed atomics, no locks on
/// the data path.

#include <atomic>
#include <cstdint>

namespace mccl::transport {

struct link_counters {
  std::atomic<uint64_t> bytes_sent{0};     ///< headers and payloads written
  std::atomic<uint64_t> bytes_received{0}; ///< headers and payloads read
  std::atomic<uint64_t> retransmits{0};    ///< frames sent again after a CRC NACK
  std::atomic<uint64_t> reconnects{0};     ///< connections resumed (MCCL_RECONNECT_MS)

  void add(std::atomic<uint64_t>& c, uint64_t n) noexcept { c.fetch_add(n, std::memory_order_relaxed); }
  void reset() noexcept {
    for (auto* c : {&bytes_sent, &bytes_received, &retransmits, &reconnects})
      c->store(0, std::memory_order_relaxed);
  }
};

} // namespace mccl::transport
