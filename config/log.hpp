#pragma once
/// Minimal leveled logging to stderr, prefixed with the process's rank so
/// interleaved output of several ranks stays readable. The level comes from
/// MCCL_LOG_LEVEL through the resolved config; default WARN.

#include <mccl/config.hpp>

#include <atomic>
#include <sstream>
#include <string>

namespace mccl {
namespace log {

/// Messages below this level are dropped (cheaply: the stream is not built).
void set_level(log_level level) noexcept;
log_level level() noexcept;
inline bool enabled(log_level l) noexcept { return l >= level() && l != log_level::off; }

/// Rank shown in the prefix; -1 means "not known yet".
void set_rank(int rank) noexcept;

/// Writes one line atomically with respect to other mccl log lines.
void write(log_level level, const std::string& line);

} // namespace log
} // namespace mccl

/// MCCL_LOG(info, "connected to rank " << peer);
#define MCCL_LOG(lvl, expr)                                                    \
  do {                                                                         \
    if (::mccl::log::enabled(::mccl::log_level::lvl)) {                        \
      std::ostringstream mccl_log_os_;                                         \
      mccl_log_os_ << expr;                                                    \
      ::mccl::log::write(::mccl::log_level::lvl, mccl_log_os_.str());          \
    }                                                                          \
  } while (false)
