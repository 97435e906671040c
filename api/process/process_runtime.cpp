#include "api/process/process_runtime.hpp"

#include <mutex>

namespace mccl::process {

namespace {

std::mutex state_mutex;
config_overrides current_settings;
// Weak: a static strong reference would stop the runtime during static
// destruction, after parts of the actor framework are gone.
std::weak_ptr<runtime> running;

} // namespace

void set_setting(const std::string& name, const std::string& value) {
  std::lock_guard<std::mutex> guard{state_mutex};
  config_overrides candidate = current_settings;
  candidate.set(name, value);
  resolve_config(candidate); // throws invalid_config naming the setting and value
  current_settings = candidate;
}

void clear_settings() {
  std::lock_guard<std::mutex> guard{state_mutex};
  current_settings = config_overrides{};
}

config_overrides explicit_settings() {
  std::lock_guard<std::mutex> guard{state_mutex};
  return current_settings;
}

config resolved_settings() {
  return resolve_config(explicit_settings());
}

std::shared_ptr<runtime> shared_runtime() {
  std::lock_guard<std::mutex> guard{state_mutex};
  auto rt = running.lock();
  if (!rt) {
    rt = std::make_shared<runtime>(current_settings);
    running = rt;
  }
  return rt;
}

} // namespace mccl::process
