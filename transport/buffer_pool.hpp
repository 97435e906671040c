#pragma once
/// Pooled staging memory for received chunks. Fresh large allocations cost a
/// page fault per 4 KiB on first touch (about as much as the copy itself), so
/// buffers are recycled by size class. Thread-safe: a link acquires, a
/// collective actor on another worker may release.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace mccl::transport {

class buffer_pool {
public:
  /// max_cached_bytes bounds what the pool keeps when buffers come back.
  explicit buffer_pool(std::size_t max_cached_bytes = std::size_t{512} << 20);
  ~buffer_pool();

  buffer_pool(const buffer_pool&) = delete;
  buffer_pool& operator=(const buffer_pool&) = delete;

  /// A buffer of at least `bytes`, returned to the pool when the last
  /// shared_ptr copy goes away (the pool must outlive that: it is owned by
  /// the runtime, which outlives every actor).
  std::shared_ptr<uint8_t> acquire(std::size_t bytes);

  std::size_t cached_bytes() const;

private:
  void release(uint8_t* p, int size_class);

  mutable std::mutex mutex_;
  std::vector<std::vector<uint8_t*>> free_; // by size class (power of two)
  std::size_t cached_ = 0;
  std::size_t max_cached_;
};

} // namespace mccl::transport
