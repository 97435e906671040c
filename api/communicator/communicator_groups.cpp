// Groups made from a communicator: split (by color and key) and shrink
// (without failed ranks). Both meet in the parent's rendezvous store, but a
// shrink that excludes the rank serving it meets in the lowest survivor's
// standby store (api/communicator/standby_store.hpp). Both work on a revoked
// communicator: shrink needs nothing from it, and split then exchanges
// colors and keys through the store instead of over it.

#include "api/communicator/communicator_impl.hpp"
#include "api/communicator/standby_store.hpp"

#include "config/log.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>

namespace mccl {

namespace {

bool is_revoked(const error& e) { return e.code() == errc::revoked; }

/// The store keys of split `index` of communicator `comm_id`.
std::string split_key(uint32_t comm_id, uint64_t index, const char* what, int rank) {
  return "mccl/" + std::to_string(comm_id) + "/split/" + std::to_string(index) + "/" + what + "/"
         + std::to_string(rank);
}

/// Split on a revoked communicator: every rank's (color, key) through the
/// rendezvous store, each wait bounded by MCCL_CONNECT_TIMEOUT_MS.
std::vector<int64_t> exchange_in_store(store& s, uint32_t comm_id, uint64_t index, int rank, int world,
                                       int64_t color, int64_t key, std::chrono::milliseconds timeout) {
  s.set(split_key(comm_id, index, "in", rank), std::to_string(color) + " " + std::to_string(key));
  std::vector<int64_t> all(2 * static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    auto text = s.get(split_key(comm_id, index, "in", r), timeout);
    if (std::sscanf(text.c_str(), "%ld %ld", &all[2 * r], &all[2 * r + 1]) != 2)
      throw error(errc::rendezvous_failed, "split on rank " + std::to_string(rank) + ": rank " + std::to_string(r)
                                             + " published " + mccl::quoted(text) + ", not a color and a key");
  }
  return all;
}

/// The end of a split on a revoked communicator: every rank waits until
/// every rank has its group. The store lives in one rank's process
/// (`serves_store`), which leaves last: a rank still reading the others'
/// "done" when that process exits would lose the store. So every rank says
/// it has read them all, and the serving rank waits for that too.
void barrier_in_store(store& s, uint32_t comm_id, uint64_t index, int rank, int world, bool serves_store,
                      std::chrono::milliseconds timeout) {
  s.set(split_key(comm_id, index, "done", rank), "1");
  for (int r = 0; r < world; ++r)
    s.get(split_key(comm_id, index, "done", r), timeout);
  s.set(split_key(comm_id, index, "left", rank), "1");
  if (serves_store)
    for (int r = 0; r < world; ++r)
      s.get(split_key(comm_id, index, "left", r), timeout);
}

struct meeting_place {
  store_ptr store;
  int store_host = -1;  ///< in the shrunk communicator's ranks
  std::string where;    ///< for the log
  bool standby = false; ///< a survivor's standby store
};

/// Where the survivors of a shrink meet. This communicator's store, while
/// its server lives in a survivor's process (or outside the group, in a
/// store of the caller's). A store that mccl serves in an excluded rank's
/// process may be dead or hung: then the survivors meet in the standby
/// store of the lowest survivor, which every survivor picks alike and
/// whose address every survivor learned during setup; it becomes rank 0 of
/// the new communicator and serves its store from then on.
meeting_place shrink_meeting_place(const communicator::impl& p, const std::vector<bool>& gone) {
  auto new_rank = [&](int old) {
    int n = 0;
    for (int r = 0; r < old; ++r)
      n += gone[r] ? 0 : 1;
    return n;
  };
  // A store mccl serves whose host is not known (a split group without the
  // parent's serving rank) may be anywhere: meet in a standby store too.
  bool served_by_mccl = std::dynamic_pointer_cast<tcp_store_client>(p.rendezvous) != nullptr;
  if (p.store_host >= 0 ? !gone[p.store_host] : !served_by_mccl)
    return {p.rendezvous, p.store_host >= 0 ? new_rank(p.store_host) : -1,
            p.store_host >= 0 ? "the rendezvous store of rank " + std::to_string(p.store_host)
                              : std::string("the caller's rendezvous store")};
  int lowest = 0;
  while (lowest < p.world && gone[lowest])
    ++lowest;
  auto host = p.store_host >= 0 ? "rank " + std::to_string(p.store_host) : std::string("a process outside it");
  if (lowest == p.world || p.standby.size() != static_cast<std::size_t>(p.world) || p.standby[lowest].empty())
    throw error(errc::unsupported, "shrink on rank " + std::to_string(p.rank) + ": the rendezvous store is served by "
                                     + host + ", which is excluded, and the standby store of rank "
                                     + std::to_string(lowest) + " (where the survivors would meet) is unknown");
  auto server = "rank " + std::to_string(lowest);
  return {detail::standby_client(p.standby[lowest], p.rank, p.cfg.connect_timeout, server), 0,
          "the standby store of " + server + " at " + p.standby[lowest] + " (" + host
            + ", which served the store, is excluded)",
          true};
}

} // namespace

communicator communicator::split(int color, int key) {
  auto& p = checked();
  // Taken first, so every rank numbers this split alike whichever way it
  // exchanges colors and keys.
  auto index = p.splits.fetch_add(1);
  auto timeout = p.cfg.connect_timeout;
  auto rendezvous = [&]() -> store& {
    if (!p.rendezvous)
      throw error(errc::internal, "split on rank " + std::to_string(p.rank)
                                    + ": this communicator has no rendezvous store");
    return *p.rendezvous;
  };
  // The groups meet in the rendezvous store served by rank 0 of this
  // communicator: no rank leaves split (and perhaps finalizes this
  // communicator, taking the store down) before every group has connected.
  // A rank whose group failed still joins the barrier, then throws. On a
  // revoked communicator (also one revoked while this split ran: its ops
  // then fail on every rank alike) the barrier is the store's.
  bool over_store = p.core->revoked();
  auto finish_split = [&](communicator sub, std::exception_ptr failed) {
    if (!over_store) {
      try {
        barrier().wait();
      } catch (const error& e) {
        if (!is_revoked(e))
          throw;
        over_store = true;
      }
    }
    if (over_store && p.world > 1)
      barrier_in_store(rendezvous(), p.comm_id, index, p.rank, p.world,
                       p.store_server != nullptr || p.store_host == p.rank, timeout);
    if (failed)
      std::rethrow_exception(failed);
    return sub;
  };
  // Everyone learns everyone's (color, key) through this communicator, or
  // through the store once it is revoked.
  std::vector<int64_t> mine{color, key};
  std::vector<int64_t> all(2 * static_cast<std::size_t>(p.world));
  if (!over_store) {
    try {
      allgather(mine.data(), all.data(), 2, dtype::int64).wait();
    } catch (const error& e) {
      if (!is_revoked(e))
        throw;
      over_store = true;
    }
  }
  if (over_store)
    all = p.world > 1 ? exchange_in_store(rendezvous(), p.comm_id, index, p.rank, p.world, color, key, timeout)
                      : mine;
  if (color < 0)
    return finish_split(communicator{}, nullptr);
  std::vector<std::pair<int64_t, int>> members; // (key, rank)
  for (int r = 0; r < p.world; ++r)
    if (all[2 * r] == color)
      members.emplace_back(all[2 * r + 1], r);
  std::sort(members.begin(), members.end());
  comm_options o;
  o.world_size = static_cast<int>(members.size());
  int store_host = -1; // the group's rank whose process serves the store, if a member's
  for (int i = 0; i < o.world_size; ++i) {
    if (members[i].second == p.rank)
      o.rank = i;
    if (members[i].second == p.store_host)
      store_host = i;
  }
  // Every member derives the same id from (parent, how many splits before
  // this one, color); frames and store keys of the new group carry it.
  o.comm_id = detail::derived_comm_id(p.comm_id, {index, static_cast<uint64_t>(color)});
  o.store = p.rendezvous;
  o.master_addr = p.master_addr;
  o.overrides = p.inherited_overrides();
  MCCL_LOG(info, "split " << index << " of communicator " << p.comm_id << ": color " << color
                          << " -> communicator " << o.comm_id << ", rank " << o.rank << " of "
                          << o.world_size);
  communicator sub;
  std::exception_ptr failed;
  try {
    sub = detail::make_communicator(p.rt, o, true, store_host);
    sub.impl_->job_rank = p.job_rank;
  } catch (...) {
    failed = std::current_exception();
  }
  return finish_split(std::move(sub), failed);
}

communicator communicator::shrink(const std::vector<int>& excluded) {
  auto& p = checked();
  std::vector<bool> gone(static_cast<std::size_t>(p.world), false);
  std::string listed;
  for (int r : excluded) {
    if (r < 0 || r >= p.world)
      throw error(errc::invalid_argument, "shrink on rank " + std::to_string(p.rank) + ": excluded rank "
                                            + std::to_string(r) + " is outside the communicator of "
                                            + std::to_string(p.world) + " ranks");
    if (r == p.rank)
      throw error(errc::invalid_argument, "shrink on rank " + std::to_string(p.rank)
                                            + ": this rank is in the excluded set; only the "
                                              "surviving ranks call shrink");
    if (!gone[r])
      listed += (listed.empty() ? "" : ", ") + std::to_string(r);
    gone[r] = true;
  }
  comm_options o;
  o.world_size = 0;
  uint64_t mask_hash = 0;
  for (int r = 0; r < p.world; ++r) {
    if (gone[r]) {
      mask_hash = mask_hash * 1000003 + static_cast<uint64_t>(r) + 1;
      continue;
    }
    if (r == p.rank)
      o.rank = o.world_size;
    ++o.world_size;
  }
  auto index = p.shrinks.fetch_add(1);
  // Split indices are small; shrinks count from the top so the two never meet.
  o.comm_id = detail::derived_comm_id(p.comm_id, {~index, mask_hash});
  o.master_addr = p.master_addr;
  o.overrides = p.inherited_overrides();
  auto meet = shrink_meeting_place(p, gone);
  o.store = meet.store;
  MCCL_LOG(warn, "shrink " << index << " of communicator " << p.comm_id << " without rank(s) " << listed
                           << " -> communicator " << o.comm_id << ", rank " << o.rank << " of "
                           << o.world_size << "; the survivors meet in " << meet.where);
  if (o.world_size > 1 && !o.store)
    throw error(errc::internal, "shrink on rank " + std::to_string(p.rank)
                                  + ": this communicator has no rendezvous store");
  auto sub = detail::make_communicator(p.rt, o, true, meet.store_host, meet.standby);
  sub.impl_->store_server = p.store_server;
  detail::membership_fault_point(&p, *sub.impl_, transport::membership_change::shrink);
  // Nobody returns (and perhaps finalizes this communicator, taking rank 0's
  // store down) before every survivor has connected. A survivor lost
  // before it entered this barrier fails it on every survivor alike, so
  // they all still hold this communicator and can shrink it again,
  // excluding that rank too. (Retrying inside would need the survivors to
  // agree on who was lost; the caller, who chose the first set, chooses.)
  try {
    sub.barrier().wait();
  } catch (const error& e) {
    std::string mapping;
    for (int r = 0; r < p.world; ++r)
      if (!gone[r])
        mapping += (mapping.empty() ? "" : ", ") + std::to_string(r);
    throw error(e.code(), "shrink on rank " + std::to_string(p.rank) + " without rank(s) " + listed
                            + ": a survivor was lost before every survivor confirmed the shrunk communicator"
                              " (whose ranks 0.." + std::to_string(o.world_size - 1) + " are ranks " + mapping
                            + " here): " + e.message()
                            + "; the shrink failed on every survivor: call shrink again, excluding the lost "
                              "rank too");
  }
  std::vector<int> members; // by new rank: the rank here
  for (int r = 0; r < p.world; ++r)
    if (!gone[r])
      members.push_back(r);
  detail::membership_decided(*sub.impl_, p.core->members().epoch + 1, std::move(members));
  return sub;
}

} // namespace mccl
