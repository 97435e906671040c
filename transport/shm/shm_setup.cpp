#include "transport/shm/shm_setup.hpp"

#include <mccl/error.hpp>
#include "config/log.hpp"
#include "transport/shm/shm_connection.hpp"
#include "transport/shm/shm_segment.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>

namespace mccl::transport {
namespace {

using clock = std::chrono::steady_clock;

constexpr uint32_t offer_magic = 0x4f4d4853; // "SHMO"
constexpr uint32_t reply_magic = 0x524d4853; // "SHMR"

/// Both messages travel between two processes of one host (same
/// endianness and layout), so they are plain structs.
struct shm_offer {
  uint32_t magic = offer_magic;
  uint32_t ok = 0;
  int32_t pid = 0;
  int32_t fd = -1;
  uint64_t ring_bytes = 0;
  uint64_t nonce = 0;
  char reason[200] = {};
};

struct shm_reply {
  uint32_t magic = reply_magic;
  uint32_t ok = 0;
  char reason[200] = {};
};

void set_reason(char (&out)[200], const std::string& why) {
  std::snprintf(out, sizeof out, "%s", why.c_str());
}

std::string rank_name(int r) {
  return "rank " + std::to_string(r);
}

/// Waits until `c` may make progress, at most until `deadline`.
void wait_for(const connection_ptr& c, clock::time_point deadline) {
  int fd = c->poll_fd();
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
  pollfd p{fd, POLLIN | POLLOUT, 0};
  ::poll(&p, fd >= 0 ? 1 : 0, static_cast<int>(std::clamp<long long>(left, 0, 10)));
}

void send_all(const connection_ptr& c, const void* data, std::size_t len, clock::time_point deadline,
              int peer) {
  auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    iovec v{const_cast<uint8_t*>(p), len};
    auto r = c->write_some(&v, 1);
    if (r.closed)
      throw error(errc::peer_lost, "shared-memory setup: " + c->description() + " closed the connection"
                                     + (r.error.empty() ? "" : ": " + r.error));
    p += r.bytes;
    len -= r.bytes;
    if (len > 0 && clock::now() >= deadline)
      throw error(errc::timeout, "shared-memory setup: " + rank_name(peer)
                                   + " did not take our message before MCCL_CONNECT_TIMEOUT_MS");
    if (r.bytes == 0)
      wait_for(c, deadline);
  }
}

void recv_all(const connection_ptr& c, void* data, std::size_t len, clock::time_point deadline, int peer) {
  auto* p = static_cast<uint8_t*>(data);
  while (len > 0) {
    auto r = c->read_some(p, len);
    if (r.closed)
      throw error(errc::peer_lost, "shared-memory setup: " + c->description() + " closed the connection"
                                     + (r.error.empty() ? "" : ": " + r.error));
    p += r.bytes;
    len -= r.bytes;
    if (len > 0 && clock::now() >= deadline)
      throw error(errc::timeout, "shared-memory setup: " + rank_name(peer)
                                   + " sent no answer within MCCL_CONNECT_TIMEOUT_MS");
    if (r.bytes == 0)
      wait_for(c, deadline);
  }
}

std::string read_link(const char* path) {
  char buf[256];
  auto n = ::readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

/// What one rank published: "<mode> <host identity>".
struct published {
  std::string mode;
  std::string host;
};

published parse_published(const std::string& text) {
  auto space = text.find(' ');
  if (space == std::string::npos)
    return {text, {}};
  return {text.substr(0, space), text.substr(space + 1)};
}

std::string format_bytes(std::size_t b) {
  if (b >= (std::size_t{1} << 20) && b % (std::size_t{1} << 20) == 0)
    return std::to_string(b >> 20) + " MiB";
  return std::to_string(b >> 10) + " KiB";
}

} // namespace

std::string host_identity() {
  auto id = boot_id();
  auto net = read_link("/proc/self/ns/net");
  if (id.empty())
    return {};
  return id + "/" + net;
}

shm_setup_result setup_shm_links(std::vector<connection_ptr>& conns, const shm_setup_options& o) {
  shm_setup_result result;
  result.hosts.assign(static_cast<std::size_t>(o.world), {});
  auto me = host_identity();
  o.rendezvous->set(o.key_prefix + "host/" + std::to_string(o.rank), o.mode + " " + me);
  auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(o.deadline - clock::now());
  std::vector<published> ranks(static_cast<std::size_t>(o.world));
  for (int r = 0; r < o.world; ++r) {
    ranks[r] = r == o.rank ? published{o.mode, me}
                           : parse_published(o.rendezvous->get(o.key_prefix + "host/" + std::to_string(r),
                                                                std::max(timeout, std::chrono::milliseconds(1))));
    result.hosts[r] = ranks[r].host;
  }
  for (int r = 0; r < o.world; ++r)
    if (ranks[r].mode != o.mode)
      throw error(errc::invalid_config, "MCCL_TRANSPORT differs between ranks: " + rank_name(o.rank) + " has "
                                          + o.mode + ", " + rank_name(r) + " has " + ranks[r].mode
                                          + "; set the same value on every rank");
  if (o.mode == "tcp")
    return result;

  std::vector<int> local, remote;
  for (int p = 0; p < o.world; ++p)
    if (p != o.rank)
      (!me.empty() && ranks[p].host == me ? local : remote).push_back(p);
  if (o.mode == "shm" && !remote.empty()) {
    std::string list;
    for (int p : remote)
      list += (list.empty() ? "" : ", ") + std::to_string(p);
    throw error(errc::invalid_config, "MCCL_TRANSPORT=shm: " + rank_name(o.rank) + " cannot share memory with rank(s) "
                                        + list + ": "
                                        + (me.empty() ? "this host's boot id is unreadable"
                                                      : "they run on another host or in another network namespace")
                                        + "; use MCCL_TRANSPORT=auto to reach them over TCP");
  }
  for (int p : remote)
    MCCL_LOG(info, rank_name(o.rank) << ": " << rank_name(p) << " over TCP (another host"
                                     << (me.empty() ? ": no boot id here" : "") << ")");

  // Offers first (small: they never block), then answers, then verdicts.
  std::map<int, shm_segment> made;
  std::map<int, std::string> refused; // peer -> why not
  for (int p : local) {
    if (p < o.rank)
      continue;
    shm_offer offer;
    try {
      auto seg = shm_segment::create(o.ring_bytes);
      offer.ok = 1;
      offer.pid = static_cast<int32_t>(::getpid());
      offer.fd = seg.fd();
      offer.ring_bytes = seg.ring_bytes();
      offer.nonce = seg.nonce();
      made.emplace(p, std::move(seg));
    } catch (const error& e) {
      set_reason(offer.reason, e.message());
      refused[p] = rank_name(o.rank) + " could not create a segment: " + e.message();
    }
    send_all(conns[p], &offer, sizeof offer, o.deadline, p);
  }
  std::map<int, shm_segment> opened;
  for (int p : local) {
    if (p > o.rank)
      continue;
    shm_offer offer;
    recv_all(conns[p], &offer, sizeof offer, o.deadline, p);
    shm_reply reply;
    std::string why;
    if (offer.magic != offer_magic)
      why = "its offer is malformed";
    else if (!offer.ok)
      why = rank_name(p) + " could not create a segment: " + std::string(offer.reason, strnlen(offer.reason, sizeof offer.reason));
    else if (offer.ring_bytes != o.ring_bytes)
      why = "MCCL_SHM_RING_BYTES differs (" + rank_name(p) + " has " + std::to_string(offer.ring_bytes)
            + ", " + rank_name(o.rank) + " has " + std::to_string(o.ring_bytes) + ")";
    else {
      shm_segment seg;
      auto err = shm_segment::open(offer.pid, offer.fd, offer.ring_bytes, offer.nonce, seg);
      if (err.empty())
        opened.emplace(p, std::move(seg));
      else
        why = rank_name(o.rank) + " could not map the segment of " + rank_name(p) + ": " + err;
    }
    reply.ok = why.empty() ? 1 : 0;
    set_reason(reply.reason, why);
    if (!why.empty())
      refused[p] = why;
    send_all(conns[p], &reply, sizeof reply, o.deadline, p);
  }
  for (auto& [p, seg] : made) {
    shm_reply reply;
    recv_all(conns[p], &reply, sizeof reply, o.deadline, p);
    if (reply.magic != reply_magic)
      refused[p] = rank_name(p) + " answered the offer with a malformed reply";
    else if (!reply.ok)
      refused[p] = std::string(reply.reason, strnlen(reply.reason, sizeof reply.reason));
    seg.drop_fd(); // mapped on both sides (or refused): nothing stays open
  }

  if (o.mode == "shm" && !refused.empty()) {
    auto& [p, why] = *refused.begin();
    throw error(errc::invalid_config, "MCCL_TRANSPORT=shm: no shared memory between " + rank_name(o.rank) + " and "
                                        + rank_name(p) + ": " + why + "; use MCCL_TRANSPORT=auto to fall back to TCP");
  }
  for (auto& [p, why] : refused)
    MCCL_LOG(info, rank_name(o.rank) << ": " << rank_name(p) << " over TCP (same host, but " << why << ")");
  auto adopt = [&](int p, shm_segment seg, bool creator) {
    auto description = rank_name(p) + " over shared memory";
    MCCL_LOG(info, rank_name(o.rank) << ": " << description << " (" << format_bytes(seg.ring_bytes())
                                     << " rings, doorbell " << conns[p]->description() << ")");
    conns[p] = std::make_shared<shm_connection>(std::move(seg), creator, conns[p], description);
    ++result.shm_peers;
  };
  for (auto& [p, seg] : made)
    if (!refused.count(p))
      adopt(p, std::move(seg), true);
  for (auto& [p, seg] : opened)
    adopt(p, std::move(seg), false);
  return result;
}

} // namespace mccl::transport
