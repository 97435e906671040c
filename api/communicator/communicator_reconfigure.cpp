// Reconfiguring into the next communicator (get_reconfigure_handle,
// reconfigure), all or nothing: the listed members build it in the first
// member's standby store (api/communicator/standby_store.hpp) and decide through one
// key there, set once. The old communicator is never touched, so a failed
// attempt leaves every member on it.

#include "api/communicator/communicator_impl.hpp"
#include "api/communicator/elastic_handles.hpp"
#include "api/communicator/standby_store.hpp"

#include "config/log.hpp"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace mccl {

namespace {

using clock_type = std::chrono::steady_clock;

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

/// On member 0, whose process serves the store: wait until every member
/// that was ready has said it read the decision, so that none is left
/// without it because member 0 returned and exited first. A member that
/// was never ready does not read it (it fails on its own, alike); the wait
/// is bounded (1.5 s) for members that die meanwhile.
void keep_decision_readable(store& s, const std::string& key, int world) {
  auto until = clock_type::now() + std::chrono::milliseconds(1500);
  for (int r = 1; r < world; ++r) {
    try {
      while (s.try_get(key + "ready/" + std::to_string(r)) && !s.try_get(key + "seen/" + std::to_string(r))) {
        if (clock_type::now() >= until)
          return;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    } catch (const error&) {
      return;
    }
  }
}

/// What a member learns of the communicator being built while it waits
/// for the decision: the first abort (a member lost after it connected).
struct build_watch {
  std::mutex mutex;
  std::string lost; ///< empty: none
};

/// reconfigure() for any member, old or new: the checks, building the
/// communicator, and the decision. `overrides` are the member's settings.
/// `from`: the communicator an old member reconfigures (null for a
/// newcomer).
communicator reconfigure_member(const std::shared_ptr<runtime::impl>& rt, const std::string& mine,
                                const std::string& uuid, const std::vector<std::string>& handles,
                                std::chrono::milliseconds timeout, config_overrides overrides,
                                const std::string& master_addr, bool sub, const communicator::impl* from) {
  auto start = clock_type::now();
  std::string who = "reconfigure " + mccl::quoted(uuid);
  if (uuid.empty() || uuid.size() > 200 || uuid.find_first_of(" \t\r\n") != std::string::npos)
    throw error(errc::invalid_argument, who + ": the uuid must be 1 to 200 characters without spaces");
  if (timeout.count() < 1)
    throw error(errc::invalid_argument, who + ": the timeout must be at least 1 ms, not "
                                          + std::to_string(timeout.count()) + " ms");
  if (handles.empty())
    throw error(errc::invalid_argument, who + ": the list of members is empty");
  auto me = detail::parse_member(mine, who + " (this member's own handle)");
  std::vector<detail::member_ticket> members;
  std::map<std::string, std::size_t> seen;
  int rank = -1;
  for (std::size_t i = 0; i < handles.size(); ++i) {
    members.push_back(detail::parse_member(handles[i], who + ", member " + std::to_string(i)));
    auto [at, fresh] = seen.emplace(members.back().id, i);
    if (!fresh)
      throw error(errc::invalid_argument, who + ": members " + std::to_string(at->second) + " and "
                                            + std::to_string(i) + " have the same handle");
    if (members.back().id == me.id)
      rank = static_cast<int>(i);
  }
  if (rank < 0)
    throw error(errc::invalid_argument, who + ": this member's handle (" + mccl::quoted(mine) + ") is not among the "
                                          + std::to_string(handles.size()) + " listed; list every member, "
                                          "this one included");
  who += " on member " + std::to_string(rank);

  comm_options o;
  o.rank = rank;
  o.world_size = static_cast<int>(handles.size());
  // The id (and so the store keys) follows from the uuid and the members:
  // the same call on every member, and never an earlier attempt's.
  std::string ids;
  for (const auto& m : members)
    ids += m.id + " ";
  o.comm_id = detail::derived_comm_id(0x7265636f /* "reco" */, {fnv1a(uuid), fnv1a(ids)});
  // A newcomer (no address of its own to go by) listens where member 0,
  // whose process serves the store, can reach it.
  o.master_addr = master_addr.empty() ? detail::store_host(members[0].store) : master_addr;
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
    decide("abort member " + std::to_string(rank) + " failed: " + e.message());
    throw not_committed(e.code(), e.message());
  }
  detail::membership_fault_point(from, *detail::communicator_factory::impl_of(next),
                                 transport::membership_change::reconfigure);
  // A member lost from here on never says ready: rather than wait out the
  // timeout, a member whose new communicator aborted (its link to the lost
  // one closed) decides "abort" at once, naming why.
  auto watch = std::make_shared<build_watch>();
  next.on_abort([watch](const error& e) {
    std::lock_guard<std::mutex> guard{watch->mutex};
    if (watch->lost.empty())
      watch->lost = e.message();
  });
  auto lost = [&watch] {
    std::lock_guard<std::mutex> guard{watch->mutex};
    return watch->lost;
  };
  std::string decision;
  try {
    store->set(key + "ready/" + std::to_string(rank), "1");
    int missing = 0; // members below it are ready (a ready key stays)
    for (;;) {
      if (auto d = store->try_get(key + "decision")) {
        decision = *d;
        break;
      }
      while (missing < o.world_size && store->try_get(key + "ready/" + std::to_string(missing)))
        ++missing;
      if (missing == o.world_size) {
        decision = decide("commit");
        break;
      }
      if (auto why = lost(); !why.empty()) {
        decision = decide("abort member " + std::to_string(rank) + " lost a member of the new communicator: " + why);
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
    throw not_committed(e.code(), "the decision could not be read: " + e.message());
  }
  if (rank == 0)
    keep_decision_readable(*store, key, o.world_size);
  else
    try {
      store->set(key + "seen/" + std::to_string(rank), "1");
    } catch (const error&) {
      // Member 0 stops waiting for this member at its bound.
    }
  if (decision != "commit") {
    next.finalize();
    throw not_committed(errc::aborted, decision.substr(std::min<std::size_t>(decision.size(), 6)));
  }
  MCCL_LOG(info, who << ": committed communicator " << o.comm_id << ", rank " << rank << " of " << o.world_size);
  // A member knows its own old rank only; the epoch is the commit's.
  std::vector<int> old_ranks(static_cast<std::size_t>(o.world_size), -1);
  if (from)
    old_ranks[static_cast<std::size_t>(rank)] = from->rank;
  detail::membership_decided(*detail::communicator_factory::impl_of(next), fnv1a(uuid + " " + ids),
                             std::move(old_ranks));
  return next;
}

} // namespace

std::string communicator::get_reconfigure_handle() {
  auto& p = checked();
  std::lock_guard<std::mutex> guard{p.member_mutex};
  if (p.member_handle.empty())
    p.member_handle = detail::member_handle(p.standby.empty() ? detail::serve_standby(*p.rt, p.cfg, p.master_addr)
                                                      : p.standby[static_cast<std::size_t>(p.rank)]);
  return p.member_handle;
}

communicator communicator::reconfigure(const std::string& uuid, const std::vector<std::string>& handles,
                                       std::chrono::milliseconds timeout) {
  auto& p = checked();
  return reconfigure_member(p.rt, get_reconfigure_handle(), uuid, handles, timeout, p.inherited_overrides(),
                            p.master_addr, true, &p);
}

namespace {

/// Where a newcomer's standby store listens when MCCL_LISTEN_ADDR and
/// MCCL_IFNAME do not say: on the route to MASTER_ADDR where the
/// launcher set it, as the ranks' links do.
std::string master_addr_from_env() {
  const char* env = std::getenv("MASTER_ADDR");
  return env && *env ? env : "127.0.0.1";
}

} // namespace

std::string runtime::get_reconfigure_handle() {
  return detail::member_handle(detail::serve_standby(*impl_, impl_->cfg, master_addr_from_env()));
}

communicator runtime::reconfigure(const std::string& mine, const std::string& uuid,
                                  const std::vector<std::string>& handles, std::chrono::milliseconds timeout,
                                  const config_overrides& overrides) {
  return reconfigure_member(impl_, mine, uuid, handles, timeout, overrides, "", false, nullptr);
}


} // namespace mccl
