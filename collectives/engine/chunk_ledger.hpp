#pragma once
/// The chunks one op has received, by (peer, step, chunk), to tell a copy
/// from a first arrival (op_session::drop_duplicates). An open-addressing
/// set in one array that doubles when half full: inserting allocates only
/// when it grows, not per chunk.

#include <cstdint>
#include <vector>

namespace mccl {

class chunk_ledger {
public:
  /// True the first time (peer, step, chunk) is seen, false for a copy.
  bool first_time(int peer, uint32_t step, uint32_t chunk) {
    if ((used_ + 1) * 2 > slots_.size())
      grow();
    key k{static_cast<uint32_t>(peer) + 1, step, chunk};
    if (!insert(slots_, k))
      return false;
    ++used_;
    return true;
  }

private:
  struct key {
    uint32_t peer_plus_one = 0; ///< 0: an empty slot
    uint32_t step = 0;
    uint32_t chunk = 0;
    bool operator==(const key& o) const noexcept {
      return peer_plus_one == o.peer_plus_one && step == o.step && chunk == o.chunk;
    }
  };

  static std::size_t hash(const key& k) noexcept {
    uint64_t h = (uint64_t{k.step} << 32 | k.chunk) * 0x9E3779B97F4A7C15ull;
    h ^= uint64_t{k.peer_plus_one} * 0xC2B2AE3D27D4EB4Full;
    return static_cast<std::size_t>(h ^ (h >> 29));
  }

  /// False when k is there already. `slots` has a free slot and a size
  /// that is a power of two.
  static bool insert(std::vector<key>& slots, const key& k) {
    auto mask = slots.size() - 1;
    for (auto i = hash(k) & mask;; i = (i + 1) & mask) {
      if (slots[i] == k)
        return false;
      if (slots[i].peer_plus_one == 0) {
        slots[i] = k;
        return true;
      }
    }
  }

  void grow() {
    std::vector<key> bigger(slots_.empty() ? 16 : slots_.size() * 2);
    for (const auto& k : slots_)
      if (k.peer_plus_one != 0)
        insert(bigger, k);
    slots_.swap(bigger);
  }

  std::vector<key> slots_;
  std::size_t used_ = 0;
};

} // namespace mccl
