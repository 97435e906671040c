#include "collectives/algorithms/scratch.hpp"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace mccl {

namespace {

/// Smaller blocks are cheap for malloc to reuse by itself.
constexpr std::size_t cached_min = 1 << 20;
/// The cache never holds more than this; beyond it blocks are freed.
constexpr std::size_t cache_limit = 512u << 20;

struct scratch_cache {
  std::mutex mutex;
  std::vector<std::pair<std::size_t, std::unique_ptr<uint8_t[]>>> blocks; ///< capacity, block
  std::size_t held = 0;

  /// The smallest cached block that fits, or nothing.
  std::pair<std::size_t, std::unique_ptr<uint8_t[]>> take(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex);
    auto best = blocks.end();
    for (auto i = blocks.begin(); i != blocks.end(); ++i)
      if (i->first >= bytes && (best == blocks.end() || i->first < best->first))
        best = i;
    if (best == blocks.end())
      return {0, nullptr};
    auto out = std::move(*best);
    blocks.erase(best);
    held -= out.first;
    return out;
  }

  void give(std::size_t capacity, std::unique_ptr<uint8_t[]> block) {
    std::lock_guard<std::mutex> lock(mutex);
    // Keep the largest blocks: they are the expensive ones to fault in.
    while (held + capacity > cache_limit && !blocks.empty()) {
      auto smallest = std::min_element(blocks.begin(), blocks.end(),
                                       [](const auto& a, const auto& b) { return a.first < b.first; });
      if (smallest->first >= capacity)
        return; // `block` is freed on return
      held -= smallest->first;
      blocks.erase(smallest);
    }
    if (held + capacity > cache_limit)
      return;
    held += capacity;
    blocks.emplace_back(capacity, std::move(block));
  }
};

scratch_cache& free_blocks() {
  static scratch_cache c; // lives as long as the process: blocks outlive every op
  return c;
}

} // namespace

scratch_buffer::scratch_buffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes >= cached_min) {
    auto [capacity, block] = free_blocks().take(bytes);
    if (block) {
      block_ = std::move(block);
      capacity_ = capacity;
      return;
    }
  }
  capacity_ = std::max<std::size_t>(bytes, 1);
  block_.reset(new uint8_t[capacity_]);
}

scratch_buffer::~scratch_buffer() {
  release();
}

scratch_buffer::scratch_buffer(scratch_buffer&& o) noexcept
  : block_(std::move(o.block_)), capacity_(std::exchange(o.capacity_, 0)),
    bytes_(std::exchange(o.bytes_, 0)) {
}

scratch_buffer& scratch_buffer::operator=(scratch_buffer&& o) noexcept {
  if (this != &o) {
    release();
    block_ = std::move(o.block_);
    capacity_ = std::exchange(o.capacity_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void scratch_buffer::release() noexcept {
  if (block_ && capacity_ >= cached_min) {
    try {
      free_blocks().give(capacity_, std::move(block_));
    } catch (...) {
      // Out of memory growing the cache's list: the block is simply freed.
    }
  }
  block_.reset();
  capacity_ = bytes_ = 0;
}

std::size_t scratch_cached_bytes() {
  std::lock_guard<std::mutex> lock(free_blocks().mutex);
  return free_blocks().held;
}

} // namespace mccl
