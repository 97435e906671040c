#include "transport/buffer_pool.hpp"

#include <cstdlib>
#include <new>

namespace mccl::transport {

namespace {
constexpr int min_class = 12; // 4 KiB
constexpr int max_class = 40;

int size_class(std::size_t bytes) {
  int c = min_class;
  while ((std::size_t{1} << c) < bytes)
    ++c;
  return c;
}
} // namespace

buffer_pool::buffer_pool(std::size_t max_cached_bytes)
  : free_(max_class + 1), max_cached_(max_cached_bytes) {
}

buffer_pool::~buffer_pool() {
  for (auto& v : free_)
    for (auto* p : v)
      std::free(p);
}

std::shared_ptr<uint8_t> buffer_pool::acquire(std::size_t bytes) {
  int c = size_class(bytes == 0 ? 1 : bytes);
  if (c > max_class)
    throw std::bad_alloc();
  uint8_t* p = nullptr;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    auto& v = free_[c];
    if (!v.empty()) {
      p = v.back();
      v.pop_back();
      cached_ -= std::size_t{1} << c;
    }
  }
  if (!p) {
    p = static_cast<uint8_t*>(std::aligned_alloc(64, std::size_t{1} << c));
    if (!p)
      throw std::bad_alloc();
  }
  return std::shared_ptr<uint8_t>(p, [this, c](uint8_t* q) { release(q, c); });
}

void buffer_pool::release(uint8_t* p, int c) {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (cached_ + (std::size_t{1} << c) <= max_cached_) {
      free_[c].push_back(p);
      cached_ += std::size_t{1} << c;
      return;
    }
  }
  std::free(p);
}

std::size_t buffer_pool::cached_bytes() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return cached_;
}

} // namespace mccl::transport
