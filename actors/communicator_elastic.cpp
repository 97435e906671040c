// Growing a communicator and reconfiguring it into the next one. Both build
// a new communicator beside the old one (which stays usable until the
// caller finalizes it) and meet in a standby store (actors/standby_store.hpp):
// grow in the old rank 0's, reconfigure in the first listed member's.
//
// Handles are printable, so a coordinator can pass them through a file, an
// environment variable or its own RPC:
//   mccl-grow/1 store=<ip:port> comm=<id> epoch=<hex> old=<n> new=<m>
//   mccl-member/1 store=<ip:port> id=<hex>

#include "actors/communicator_impl.hpp"
#include "actors/standby_store.hpp"

#include "config/log.hpp"

#include <cerrno>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

namespace mccl {

namespace {

using clock_type = std::chrono::steady_clock;

std::string random_hex(int digits) {
  std::random_device rd;
  std::string out;
  static const char* hex = "0123456789abcdef";
  for (int i = 0; i < digits; ++i)
    out.push_back(hex[rd() & 15]);
  return out;
}

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

/// The key=value fields of a handle whose first word is `kind`; throws
/// invalid_argument naming `who` and the expected form otherwise.
std::map<std::string, std::string> handle_fields(const std::string& text, const std::string& kind,
                                                 const std::vector<std::string>& keys, const std::string& who,
                                                 const std::string& form) {
  auto bad = [&](const std::string& why) {
    return error(errc::invalid_argument, who + ": handle " + quoted(text) + " " + why + " (expected " + form + ")");
  };
  std::istringstream in(text);
  std::string word;
  if (!(in >> word) || word != kind)
    throw bad("does not start with \"" + kind + "\"");
  std::map<std::string, std::string> fields;
  while (in >> word) {
    auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0)
      throw bad("has " + quoted(word) + ", not key=value");
    fields[word.substr(0, eq)] = word.substr(eq + 1);
  }
  for (const auto& k : keys)
    if (fields[k].empty())
      throw bad("has no " + k + "=");
  return fields;
}

/// A whole number in [lo, hi] from handle field `name`.
int64_t number_field(const std::map<std::string, std::string>& f, const std::string& name, int base, int64_t lo,
                     int64_t hi, const std::string& who) {
  const auto& text = f.at(name);
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, base);
  if (*end != '\0' || errno != 0 || v < lo || v > hi)
    throw error(errc::invalid_argument, who + ": handle field " + name + "=" + text + " is not a number in "
                                          + std::to_string(lo) + ".." + std::to_string(hi));
  return v;
}

// ---- grow ----------------------------------------------------------------

const char* grow_form = "\"mccl-grow/1 store=<ip:port> comm=<id> epoch=<hex> old=<n> new=<m>\", "
                        "as communicator::grow_handle() makes it";

struct grow_ticket {
  std::string store; ///< the old rank 0's standby store
  uint32_t comm = 0; ///< the communicator that grows
  uint64_t epoch = 0;
  int old_size = 0;
  int new_size = 0;

  /// Every member derives the grown communicator's id alike from the handle.
  uint32_t grown_id() const {
    return detail::derived_comm_id(comm, {0x67726f77 /* "grow" */, epoch, static_cast<uint64_t>(new_size)});
  }
};

grow_ticket parse_grow(const std::string& text, const std::string& who) {
  auto f = handle_fields(text, "mccl-grow/1", {"store", "comm", "epoch", "old", "new"}, who, grow_form);
  grow_ticket t;
  t.store = f["store"];
  detail::check_store_address(t.store, who);
  t.comm = static_cast<uint32_t>(number_field(f, "comm", 10, 0, UINT32_MAX, who));
  t.epoch = std::strtoull(f["epoch"].c_str(), nullptr, 16);
  t.old_size = static_cast<int>(number_field(f, "old", 10, 1, 1 << 20, who));
  t.new_size = static_cast<int>(number_field(f, "new", 10, 2, 1 << 20, who));
  if (t.new_size <= t.old_size)
    throw error(errc::invalid_argument, who + ": handle " + quoted(text) + " grows " + std::to_string(t.old_size)
                                          + " ranks to " + std::to_string(t.new_size) + ", not more");
  return t;
}

/// Every member of a grown (or reconfigured) communicator: make it, then
/// wait until every member has connected, so that nobody leaves (and
/// perhaps exits, taking the store with it) while others still meet there.
communicator meet(const std::shared_ptr<runtime::impl>& rt, const comm_options& o, bool sub) {
  auto c = detail::make_communicator(rt, o, sub, 0, true);
  c.barrier().wait();
  return c;
}

// ---- reconfigure ---------------------------------------------------------

const char* member_form = "\"mccl-member/1 store=<ip:port> id=<hex>\", as get_reconfigure_handle() makes it";

struct member_ticket {
  std::string store;
  std::string id;
};

member_ticket parse_member(const std::string& text, const std::string& who) {
  auto f = handle_fields(text, "mccl-member/1", {"store", "id"}, who, member_form);
  detail::check_store_address(f["store"], who);
  return {f["store"], f["id"]};
}

std::string member_handle(const std::string& store) {
  return "mccl-member/1 store=" + store + " id=" + random_hex(16);
}

/// reconfigure() for any member, old or new: the checks, building the
/// communicator, and the decision. `overrides` are the member's settings.
communicator reconfigure_member(const std::shared_ptr<runtime::impl>& rt, const std::string& mine,
                                const std::string& uuid, const std::vector<std::string>& handles,
                                std::chrono::milliseconds timeout, config_overrides overrides,
                                const std::string& master_addr, bool sub) {
  auto start = clock_type::now();
  std::string who = "reconfigure " + quoted(uuid);
  if (uuid.empty() || uuid.size() > 200 || uuid.find_first_of(" \t\r\n") != std::string::npos)
    throw error(errc::invalid_argument, who + ": the uuid must be 1 to 200 characters without spaces");
  if (timeout.count() < 1)
    throw error(errc::invalid_argument, who + ": the timeout must be at least 1 ms, not "
                                          + std::to_string(timeout.count()) + " ms");
  if (handles.empty())
    throw error(errc::invalid_argument, who + ": the list of members is empty");
  auto me = parse_member(mine, who + " (this member's own handle)");
  std::vector<member_ticket> members;
  std::map<std::string, std::size_t> seen;
  int rank = -1;
  for (std::size_t i = 0; i < handles.size(); ++i) {
    members.push_back(parse_member(handles[i], who + ", member " + std::to_string(i)));
    auto [at, fresh] = seen.emplace(members.back().id, i);
    if (!fresh)
      throw error(errc::invalid_argument, who + ": members " + std::to_string(at->second) + " and "
                                            + std::to_string(i) + " have the same handle");
    if (members.back().id == me.id)
      rank = static_cast<int>(i);
  }
  if (rank < 0)
    throw error(errc::invalid_argument, who + ": this member's handle (" + quoted(mine) + ") is not among the "
                                          + std::to_string(handles.size()) + " listed; list every member, "
                                          "this one included");
  who += " on member " + std::to_string(rank);

  comm_options o;
  o.rank = rank;
  o.world_size = static_cast<int>(handles.size());
  o.comm_id = detail::derived_comm_id(0x7265636f /* "reco" */, {fnv1a(uuid), handles.size()});
  o.master_addr = master_addr;
  if (o.world_size == 1) {
    o.overrides = overrides;
    return detail::make_communicator(rt, o, sub, 0, true);
  }
  auto store = detail::standby_client(members[0].store, rank, timeout, "member 0");
  std::string key = "mccl/" + std::to_string(o.comm_id) + "/reconfigure/";
  auto not_committed = [&](errc code, const std::string& why) {
    return error(code, who + ": not committed: " + why
                         + "; every member keeps its old communicator; retry with a new uuid");
  };
  // One attempt per uuid: a decided one (by this list or an earlier one)
  // is not built again.
  if (auto decided = store->try_get(key + "decision"))
    throw *decided == "commit"
      ? error(errc::invalid_argument, who + ": this uuid was used by a reconfigure that committed; use a new one")
      : not_committed(errc::aborted, decided->substr(std::min<std::size_t>(decided->size(), 6)));
  // The decision is one value in member 0's store, set once (set_if_absent):
  // "commit" by a member that saw every member ready, else "abort <why>"
  // by the first member that failed or ran out of time.
  auto decide = [&](const std::string& value) {
    try {
      return store->set_if_absent(key + "decision", value);
    } catch (const error&) {
      return value; // member 0's store is gone: nobody can commit either
    }
  };
  auto left = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(start + timeout - clock_type::now()));
  };
  overrides.set("MCCL_CONNECT_TIMEOUT_MS", static_cast<long long>(left().count()));
  o.overrides = overrides;
  o.store = store;
  MCCL_LOG(info, who << ": building communicator " << o.comm_id << " of " << o.world_size
                     << " members in the standby store of member 0 at " << members[0].store);
  communicator next;
  try {
    next = detail::make_communicator(rt, o, sub, 0, true);
  } catch (const error& e) {
    decide("abort member " + std::to_string(rank) + " failed: " + e.what());
    throw not_committed(e.code(), e.what());
  }
  std::string decision;
  try {
    store->set(key + "ready/" + std::to_string(rank), "1");
    for (;;) {
      if (auto d = store->try_get(key + "decision")) {
        decision = *d;
        break;
      }
      int missing = -1;
      for (int r = 0; r < o.world_size && missing < 0; ++r)
        if (!store->try_get(key + "ready/" + std::to_string(r)))
          missing = r;
      if (missing < 0) {
        decision = decide("commit");
        break;
      }
      if (clock_type::now() >= start + timeout) {
        decision = decide("abort member " + std::to_string(missing) + " was not ready within "
                          + std::to_string(timeout.count()) + " ms");
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  } catch (const error& e) {
    next.finalize();
    throw not_committed(e.code(), std::string("the decision could not be read: ") + e.what());
  }
  if (decision != "commit") {
    next.finalize();
    throw not_committed(errc::aborted, decision.substr(std::min<std::size_t>(decision.size(), 6)));
  }
  MCCL_LOG(info, who << ": committed communicator " << o.comm_id << ", rank " << rank << " of " << o.world_size);
  return next;
}

} // namespace

std::string communicator::grow_handle(int new_size) const {
  auto& p = checked();
  std::string who = "grow_handle on rank " + std::to_string(p.rank);
  if (new_size <= p.world)
    throw error(errc::invalid_argument, who + ": new size " + std::to_string(new_size)
                                          + " must exceed the current size " + std::to_string(p.world));
  // Rank 0's standby store; a group of one has no setup that announced it,
  // and serves its own now.
  auto store = p.standby.empty() ? detail::serve_standby(*p.rt, p.cfg, p.master_addr) : p.standby[0];
  std::random_device rd;
  std::ostringstream out;
  out << "mccl-grow/1 store=" << store << " comm=" << p.comm_id << " epoch=" << std::hex
      << ((uint64_t{rd()} << 32) | rd()) << std::dec << " old=" << p.world << " new=" << new_size;
  return out.str();
}

communicator communicator::grow(const std::string& handle) {
  auto& p = checked();
  std::string who = "grow on rank " + std::to_string(p.rank);
  auto t = parse_grow(handle, who);
  if (t.comm != p.comm_id)
    throw error(errc::invalid_argument, who + ": the handle grows communicator " + std::to_string(t.comm)
                                          + ", this is communicator " + std::to_string(p.comm_id));
  if (t.old_size != p.world)
    throw error(errc::invalid_argument, who + ": the handle was made for a communicator of "
                                          + std::to_string(t.old_size) + " ranks; this one has "
                                          + std::to_string(p.world));
  comm_options o;
  o.rank = p.rank;
  o.world_size = t.new_size;
  o.comm_id = t.grown_id();
  o.master_addr = p.master_addr;
  o.overrides = p.inherited_overrides();
  o.store = detail::standby_client(t.store, p.rank, p.cfg.connect_timeout, "rank 0");
  MCCL_LOG(info, who << ": communicator " << p.comm_id << " grows from " << p.world << " to " << t.new_size
                     << " ranks -> communicator " << o.comm_id);
  return meet(p.rt, o, true);
}

communicator runtime::join(const std::string& handle, int rank, const config_overrides& overrides) {
  std::string who = "join" + (rank >= 0 ? " as rank " + std::to_string(rank) : std::string());
  auto t = parse_grow(handle, who);
  auto all = impl_->overrides;
  for (const auto& [k, v] : overrides.values())
    all.set(k, v);
  auto cfg = resolve_config(all);
  comm_options o;
  o.world_size = t.new_size;
  o.comm_id = t.grown_id();
  o.overrides = overrides;
  o.store = detail::standby_client(t.store, rank, cfg.connect_timeout, "rank 0");
  if (rank >= 0 && (rank < t.old_size || rank >= t.new_size))
    throw error(errc::invalid_argument, who + ": a newcomer's rank is in " + std::to_string(t.old_size) + ".."
                                          + std::to_string(t.new_size - 1) + " (the old ranks keep theirs and "
                                          "call communicator::grow)");
  if (rank < 0) {
    // The first seat no other newcomer holds; set_if_absent makes each
    // seat one newcomer's.
    auto me = random_hex(16);
    std::string seats = "mccl/" + std::to_string(o.comm_id) + "/grow/seat/";
    for (int r = t.old_size; r < t.new_size && rank < 0; ++r)
      if (o.store->set_if_absent(seats + std::to_string(r), me) == me)
        rank = r;
    if (rank < 0)
      throw error(errc::invalid_argument, who + ": every newcomer's rank (" + std::to_string(t.old_size) + ".."
                                            + std::to_string(t.new_size - 1) + ") is taken");
  }
  o.rank = rank;
  MCCL_LOG(info, "join: communicator " << t.comm << " grows from " << t.old_size << " to " << t.new_size
                                       << " ranks -> communicator " << o.comm_id << ", rank " << rank);
  return meet(impl_, o, false);
}

std::string communicator::get_reconfigure_handle() {
  auto& p = checked();
  std::lock_guard<std::mutex> guard{p.member_mutex};
  if (p.member_handle.empty())
    p.member_handle = member_handle(p.standby.empty() ? detail::serve_standby(*p.rt, p.cfg, p.master_addr)
                                                      : p.standby[static_cast<std::size_t>(p.rank)]);
  return p.member_handle;
}

communicator communicator::reconfigure(const std::string& uuid, const std::vector<std::string>& handles,
                                       std::chrono::milliseconds timeout) {
  auto& p = checked();
  return reconfigure_member(p.rt, get_reconfigure_handle(), uuid, handles, timeout, p.inherited_overrides(),
                            p.master_addr, true);
}

namespace {

/// Where a newcomer's standby store listens when MCCL_LISTEN_ADDR and
/// MCCL_SOCKET_IFNAME do not say: on the route to MASTER_ADDR where the
/// launcher set it, as the ranks' links do.
std::string master_addr_from_env() {
  const char* env = std::getenv("MASTER_ADDR");
  return env && *env ? env : "127.0.0.1";
}

} // namespace

std::string runtime::get_reconfigure_handle() {
  return member_handle(detail::serve_standby(*impl_, impl_->cfg, master_addr_from_env()));
}

communicator runtime::reconfigure(const std::string& mine, const std::string& uuid,
                                  const std::vector<std::string>& handles, std::chrono::milliseconds timeout,
                                  const config_overrides& overrides) {
  return reconfigure_member(impl_, mine, uuid, handles, timeout, overrides, master_addr_from_env(), false);
}

} // namespace mccl
