#include "transport/shm/shm_setup.hpp"

#include <mccl/config.hpp>
#include <mccl/error.hpp>
#include "config/log.hpp"
#include "transport/shm/shm_connection.hpp"
#include "transport/shm/shm_segment.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
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

/// Moves all `len` bytes to (`sending`) or from `c`, bounded by `deadline`.
void transfer_all(const connection_ptr& c, uint8_t* data, std::size_t len, bool sending,
                  clock::time_point deadline, int peer) {
  while (len > 0) {
    iovec v{data, len};
    auto r = sending ? c->write_some(&v, 1) : c->read_some(data, len);
    if (r.closed)
      throw error(errc::peer_lost, "shared-memory setup: " + c->description() + " closed the connection"
                                     + (r.error.empty() ? "" : ": " + r.error));
    data += r.bytes;
    len -= r.bytes;
    if (len > 0 && clock::now() >= deadline)
      throw error(errc::timeout, "shared-memory setup: " + rank_name(peer)
                                   + (sending ? " did not take our message" : " sent no answer")
                                   + " within MCCL_CONNECT_TIMEOUT_MS");
    if (r.bytes == 0)
      wait_for(c, deadline);
  }
}

template <class Message>
void send_all(const connection_ptr& c, Message m, clock::time_point deadline, int peer) {
  transfer_all(c, reinterpret_cast<uint8_t*>(&m), sizeof m, true, deadline, peer);
}

template <class Message>
void recv_all(const connection_ptr& c, Message& m, clock::time_point deadline, int peer) {
  transfer_all(c, reinterpret_cast<uint8_t*>(&m), sizeof m, false, deadline, peer);
}

std::string read_link(const char* path) {
  char buf[256];
  auto n = ::readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

/// What one rank published: "<mode> <board bytes>:<stage bytes> <announce>
/// <host identity>".
struct published {
  std::string mode;
  std::string board;
  std::string announce; ///< "-" when the rank announced nothing
  std::string host;
};

/// "<mode> <board> <announce> <host>": the host identity comes last, as
/// it is the one field that might hold a space (MCCL_HOST_ID).
std::string format_published(const published& p) {
  return p.mode + " " + p.board + " " + (p.announce.empty() ? "-" : p.announce) + " " + p.host;
}

published parse_published(const std::string& text) {
  published p;
  std::size_t at = 0;
  auto word = [&](std::string& out) {
    auto end = text.find(' ', at);
    out = text.substr(at, end == std::string::npos ? end : end - at);
    at = end == std::string::npos ? text.size() : end + 1;
  };
  word(p.mode);
  word(p.board);
  word(p.announce);
  p.host = text.substr(at);
  return p;
}

std::string format_bytes(std::size_t b) {
  if (b >= (std::size_t{1} << 20) && b % (std::size_t{1} << 20) == 0)
    return std::to_string(b >> 20) + " MiB";
  return std::to_string(b >> 10) + " KiB";
}

/// Step 4 (see the header). Every rank calls it or none does (one host and
/// the smallest board size asked for hold alike everywhere); a rank with a pair
/// over TCP (`all_pairs_shm` false) says so instead of mapping. Null
/// when any rank did not map the board.
std::shared_ptr<shm_board> setup_board(const shm_setup_options& o, std::size_t board_bytes, std::size_t stage_bytes,
                                       bool all_pairs_shm) {
  auto bytes = shm_board::segment_bytes(o.world, board_bytes, stage_bytes);
  auto timeout = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(o.deadline - clock::now()),
                          std::chrono::milliseconds(1));
  shm_segment seg;
  std::string status;
  if (!all_pairs_shm) {
    status = "some of its links are over TCP";
    if (o.rank == 0)
      o.rendezvous->set(o.key_prefix + "board", "none");
  } else if (o.rank == 0) {
    try {
      seg = shm_segment::create(bytes);
      o.rendezvous->set(o.key_prefix + "board", std::to_string(::getpid()) + " " + std::to_string(seg.fd()) + " "
                                                  + std::to_string(seg.nonce()));
    } catch (const error& e) {
      status = e.message();
      o.rendezvous->set(o.key_prefix + "board", "none");
    }
  } else {
    auto offer = o.rendezvous->get(o.key_prefix + "board", timeout);
    long long pid = 0, fd = -1;
    unsigned long long nonce = 0;
    if (std::sscanf(offer.c_str(), "%lld %lld %llu", &pid, &fd, &nonce) != 3)
      status = "rank 0 has no board";
    else
      status = shm_segment::open(static_cast<pid_t>(pid), static_cast<int>(fd), bytes, nonce, seg);
  }
  o.rendezvous->set(o.key_prefix + "board/" + std::to_string(o.rank), status.empty() ? "ok" : status);
  std::string refusal;
  for (int r = 0; r < o.world; ++r) {
    auto said = r == o.rank ? (status.empty() ? "ok" : status)
                            : o.rendezvous->get(o.key_prefix + "board/" + std::to_string(r), timeout);
    if (said != "ok" && refusal.empty())
      refusal = rank_name(r) + ": " + said;
  }
  seg.drop_fd(); // rank 0: every rank has answered, so every mapping that will exist does
  if (!refusal.empty()) {
    MCCL_LOG(info, rank_name(o.rank) << ": no host board (" << refusal << "); small collectives go over the links");
    return nullptr;
  }
  MCCL_LOG(info, rank_name(o.rank) << ": host board for " << o.world << " ranks, " << format_bytes(board_bytes)
                                   << " per rank and bank: collectives up to that size skip the links"
                                   << (stage_bytes > 0 ? "; allreduces beyond it stage " + format_bytes(stage_bytes)
                                                           + " per rank at a time (" + format_bytes(bytes)
                                                           + " in all)"
                                                       : std::string()));
  return std::make_shared<shm_board>(std::move(seg), o.world, o.rank, board_bytes, stage_bytes);
}

/// Waits, a bounded time, until every rank has read the others' values.
void await_every_read(const shm_setup_options& o) {
  auto until = std::min(o.deadline, clock::now() + std::chrono::seconds(5));
  for (int r = 0; r < o.world; ++r) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - clock::now());
    try {
      o.rendezvous->get(o.key_prefix + "host_read/" + std::to_string(r),
                        std::max(left, std::chrono::milliseconds(1)));
    } catch (const std::exception&) {
      return; // a rank gone or slow: fail now with the mismatch
    }
  }
}

} // namespace

std::string host_identity(const std::string& split) {
  auto id = boot_id();
  auto net = read_link("/proc/self/ns/net");
  if (id.empty())
    return {};
  return id + "/" + net + (split.empty() ? "" : "/" + split);
}

shm_setup_result setup_shm_links(std::vector<connection_ptr>& conns, const shm_setup_options& o) {
  shm_setup_result result;
  result.hosts.assign(static_cast<std::size_t>(o.world), {});
  auto me = host_identity(o.host_id);
  auto board = std::to_string(o.board_bytes) + ":" + std::to_string(o.stage_bytes);
  published mine{o.mode, board, o.announce, me};
  o.rendezvous->set(o.key_prefix + "host/" + std::to_string(o.rank), format_published(mine));
  auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(o.deadline - clock::now());
  std::vector<published> ranks(static_cast<std::size_t>(o.world));
  result.announced.assign(static_cast<std::size_t>(o.world), {});
  for (int r = 0; r < o.world; ++r) {
    ranks[r] = r == o.rank ? mine
                           : parse_published(o.rendezvous->get(o.key_prefix + "host/" + std::to_string(r),
                                                                std::max(timeout, std::chrono::milliseconds(1))));
    result.hosts[r] = ranks[r].host;
    result.announced[r] = ranks[r].announce == "-" ? std::string() : ranks[r].announce;
  }
  // Every rank has read every value before any fails on a mismatch: the
  // rank serving the store takes it down when it fails, and a rank still
  // reading would see "connection closed" instead of the mismatch.
  o.rendezvous->set(o.key_prefix + "host_read/" + std::to_string(o.rank), "1");
  for (int r = 0; r < o.world; ++r) {
    if (ranks[r].mode != o.mode) {
      await_every_read(o);
      throw error(errc::invalid_config, "MCCL_TRANSPORT differs between ranks: " + rank_name(o.rank) + " has "
                                          + o.mode + ", " + rank_name(r) + " has " + ranks[r].mode
                                          + "; set the same value on every rank");
    }
  }
  // The board's size is the smallest any rank asks for (0: no board), so
  // every rank puts the same ops on it whatever its own settings.
  auto board_bytes = o.board_bytes;
  auto stage_bytes = o.stage_bytes;
  for (int r = 0; r < o.world; ++r) {
    const auto& b = ranks[r].board;
    board_bytes = std::min<std::size_t>(board_bytes, std::strtoull(b.c_str(), nullptr, 10));
    auto colon = b.find(':');
    stage_bytes = std::min<std::size_t>(stage_bytes,
                                        colon == std::string::npos ? 0 : std::strtoull(b.c_str() + colon + 1, nullptr, 10));
  }
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
                                                      : "they run on another host, in another network namespace or with "
                                                        "another MCCL_HOST_ID")
                                        + "; use MCCL_TRANSPORT=auto to reach them over TCP");
  }
  auto single_copy = o.single_copy_bytes;
  if (single_copy == config::single_copy_auto)
    single_copy = static_cast<int>(local.size()) + 1 >= auto_single_copy_ranks ? auto_single_copy_bytes : 0;
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
      auto seg = shm_segment::create(pair_segment_bytes(o.ring_bytes));
      offer.ok = 1;
      offer.pid = static_cast<int32_t>(::getpid());
      offer.fd = seg.fd();
      offer.ring_bytes = o.ring_bytes;
      offer.nonce = seg.nonce();
      made.emplace(p, std::move(seg));
    } catch (const error& e) {
      set_reason(offer.reason, e.message());
      refused[p] = rank_name(o.rank) + " could not create a segment: " + e.message();
    }
    send_all(conns[p], offer, o.deadline, p);
  }
  std::map<int, shm_segment> opened;
  for (int p : local) {
    if (p > o.rank)
      continue;
    shm_offer offer;
    recv_all(conns[p], offer, o.deadline, p);
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
      auto err = shm_segment::open(offer.pid, offer.fd, pair_segment_bytes(o.ring_bytes), offer.nonce, seg);
      if (err.empty())
        opened.emplace(p, std::move(seg));
      else
        why = rank_name(o.rank) + " could not map the segment of " + rank_name(p) + ": " + err;
    }
    reply.ok = why.empty() ? 1 : 0;
    set_reason(reply.reason, why);
    if (!why.empty())
      refused[p] = why;
    send_all(conns[p], reply, o.deadline, p);
  }
  for (auto& [p, seg] : made) {
    shm_reply reply;
    recv_all(conns[p], reply, o.deadline, p);
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
    MCCL_LOG(info, rank_name(o.rank) << ": " << description << " (" << format_bytes(o.ring_bytes)
                                     << " rings, "
                                     << (single_copy > 0 ? "single copy from " + format_bytes(single_copy)
                                                         : std::string("no single copy"))
                                     << ", doorbell " << conns[p]->description() << ")");
    conns[p] = std::make_shared<shm_connection>(std::move(seg), o.ring_bytes, creator, conns[p], description,
                                                single_copy);
    ++result.shm_peers;
  };
  for (auto& [p, seg] : made)
    if (!refused.count(p))
      adopt(p, std::move(seg), true);
  for (auto& [p, seg] : opened)
    adopt(p, std::move(seg), false);
  if (board_bytes > 0 && remote.empty())
    result.board = setup_board(o, board_bytes, stage_bytes, refused.empty());
  return result;
}

} // namespace mccl::transport
