#include "settings.hpp"

#include <mutex>

namespace mccl::torch_backend {

namespace {

std::mutex settings_mutex;
config_overrides current_settings;
std::shared_ptr<runtime> process_runtime;

} // namespace

void set_python_setting(const std::string& name, const std::string& value) {
  std::lock_guard<std::mutex> guard{settings_mutex};
  config_overrides candidate = current_settings;
  candidate.set(name, value);
  resolve_config(candidate); // throws invalid_config naming the setting and value
  current_settings = candidate;
}

void clear_python_settings() {
  std::lock_guard<std::mutex> guard{settings_mutex};
  current_settings = config_overrides{};
}

config_overrides python_settings() {
  std::lock_guard<std::mutex> guard{settings_mutex};
  return current_settings;
}

config resolved_settings() {
  return resolve_config(python_settings());
}

std::shared_ptr<runtime> shared_runtime() {
  std::lock_guard<std::mutex> guard{settings_mutex};
  if (!process_runtime)
    process_runtime = std::make_shared<runtime>(current_settings);
  return process_runtime;
}

void release_runtime() {
  std::shared_ptr<runtime> last;
  {
    std::lock_guard<std::mutex> guard{settings_mutex};
    last = std::move(process_runtime);
  }
  // Destroyed (if this was the last reference) outside the lock.
}

} // namespace mccl::torch_backend
