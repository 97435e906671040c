#include "config/log.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>

namespace mccl {

const char* to_string(log_level level) noexcept {
  switch (level) {
    case log_level::trace: return "TRACE";
    case log_level::debug: return "DEBUG";
    case log_level::info: return "INFO";
    case log_level::warn: return "WARN";
    case log_level::error: return "ERROR";
    case log_level::fatal: return "FATAL";
    case log_level::off: return "OFF";
  }
  return "?";
}

namespace log {
namespace {
std::atomic<log_level> current_level{log_level::warn};
std::atomic<int> current_rank{-1};
std::mutex write_mutex;
} // namespace

void set_level(log_level level) noexcept { current_level.store(level); }
log_level level() noexcept { return current_level.load(std::memory_order_relaxed); }
void set_rank(int rank) noexcept { current_rank.store(rank); }

void write(log_level lvl, const std::string& line) {
  using namespace std::chrono;
  auto now = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  char prefix[96];
  int rank = current_rank.load();
  if (rank >= 0)
    std::snprintf(prefix, sizeof prefix, "[mccl %lld.%06lld rank %d pid %d %s] ",
                  static_cast<long long>(now / 1000000), static_cast<long long>(now % 1000000),
                  rank, static_cast<int>(::getpid()), to_string(lvl));
  else
    std::snprintf(prefix, sizeof prefix, "[mccl %lld.%06lld pid %d %s] ",
                  static_cast<long long>(now / 1000000), static_cast<long long>(now % 1000000),
                  static_cast<int>(::getpid()), to_string(lvl));
  std::lock_guard<std::mutex> guard{write_mutex};
  std::fputs(prefix, stderr);
  std::fputs(line.c_str(), stderr);
  std::fputc('\n', stderr);
}

} // namespace log
} // namespace mccl
