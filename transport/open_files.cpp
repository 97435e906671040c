#include "transport/open_files.hpp"

#include "config/log.hpp"

#include <mccl/error.hpp>

#include <sys/resource.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace mccl::transport {
namespace {

/// What the process has open besides its links (the runtime's event and
/// timer descriptors, pipes, a status server, a framework that embeds it):
/// measured 12 for mccl-bench; torch opens more.
constexpr std::size_t margin = 64;

/// Files open now (each entry of /proc/self/fd, less the one that lists them).
std::size_t open_now() {
  std::error_code ec;
  std::size_t n = 0;
  for (std::filesystem::directory_iterator i{"/proc/self/fd", ec}, end; !ec && i != end; i.increment(ec))
    ++n;
  return n > 0 ? n - 1 : 0;
}

std::string limit_text(rlim_t v) {
  return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v);
}

} // namespace

std::size_t files_needed(const open_files_need& n) {
  auto peers = static_cast<std::size_t>(n.world > 1 ? n.world - 1 : 0);
  auto per_peer = static_cast<std::size_t>(n.sockets_per_peer > 0 ? n.sockets_per_peer : 1)
                  + (n.shared_memory ? 2u : 0u);
  return peers * per_peer + (n.serves_store ? peers : 0) + margin;
}

void ensure_open_files(std::size_t needed, const open_files_need& n) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0)
    return; // nothing to check against
  auto want = open_now() + needed;
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= want)
    return;
  auto soft_before = lim.rlim_cur;
  if (lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= want) {
    lim.rlim_cur = static_cast<rlim_t>(want);
    if (::setrlimit(RLIMIT_NOFILE, &lim) == 0) {
      MCCL_LOG(info, "rank " << n.rank << ": open-file limit (RLIMIT_NOFILE) raised from " << limit_text(soft_before)
                             << " to " << want << " (hard limit " << limit_text(lim.rlim_max)
                             << ") for the links of " << n.world << " ranks");
      return;
    }
  }
  throw error(errc::invalid_config,
              "rank " + std::to_string(n.rank) + " of " + std::to_string(n.world)
                + " cannot open the files its links need: up to " + std::to_string(needed) + " ("
                + std::to_string(n.sockets_per_peer) + " socket(s) per peer"
                + (n.shared_memory ? " and 2 shared-memory doorbells" : "") + " for "
                + std::to_string(n.world - 1) + " peers"
                + (n.serves_store ? ", one store connection per other rank" : "")
                + ", and a margin) beyond the " + std::to_string(want - needed)
                + " open now, but the open-file limit (RLIMIT_NOFILE) is " + limit_text(soft_before)
                + " with a hard limit of " + limit_text(lim.rlim_max) + "; raise it (ulimit -n "
                + std::to_string(want) + ", or LimitNOFILE= for a systemd service) or run fewer ranks");
}

} // namespace mccl::transport
