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

std::optional<std::string> store::try_get(const std::string& key) {
  try {
    return get(key, std::chrono::milliseconds(1));
  } catch (const error&) {
    return std::nullopt;
  }
}

std::string store::set_if_absent(const std::string& key, const std::string& value) {
  if (auto held = try_get(key))
    return *held;
  set(key, value);
  return value;
}

std::optional<std::string> memory_store::try_get(const std::string& key) {
  std::lock_guard<std::mutex> guard{mutex_};
  auto i = values_.find(key);
  if (i == values_.end())
    return std::nullopt;
  return i->second;
}

std::string memory_store::set_if_absent(const std::string& key, const std::string& value) {
  std::string held;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    held = values_.emplace(key, value).first->second;
  }
  changed_.notify_all();
  return held;
}

} // namespace mccl
