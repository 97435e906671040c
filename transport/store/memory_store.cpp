#include <mccl/store.hpp>

#include <mccl/error.hpp>

namespace mccl {

void memory_store::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    values_[key] = value;
  }
  changed_.notify_all();
}

std::string memory_store::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock{mutex_};
  if (!changed_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; }))
    throw error(errc::rendezvous_failed, "key \"" + key + "\" was not published within "
                                           + std::to_string(timeout.count()) + " ms");
  return values_[key];
}

} // namespace mccl
