#pragma once
/// Argument checks and arithmetic shared by the pure schedule functions
/// (schedule.cpp, program.cpp). Internal: not part of the extension API.

#include <mccl/error.hpp>

#include <string>

namespace mccl::sched::detail {

[[noreturn]] inline void invalid(const char* fn, const std::string& what) {
  throw error(errc::invalid_argument, std::string(fn) + ": " + what);
}

inline void check_world(const char* fn, int world) {
  if (world < 1)
    invalid(fn, "world must be >= 1, got " + std::to_string(world));
}

inline void check_member(const char* fn, const char* name, int value, int world) {
  if (value < 0 || value >= world)
    invalid(fn, std::string(name) + " " + std::to_string(value) + " is outside [0, "
                  + std::to_string(world) + ")");
}

/// Non-negative remainder: ranks are relabelled by subtraction. Sums are
/// formed in long long so rank + offset cannot overflow int near INT_MAX.
inline int mod(long long x, int w) noexcept {
  long long r = x % w;
  return static_cast<int>(r < 0 ? r + w : r);
}

} // namespace mccl::sched::detail
