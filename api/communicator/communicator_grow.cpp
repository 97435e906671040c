// Growing a communicator (communicator::grow_handle, grow) and newcomers
// joining it (runtime::join). The new communicator is built beside the old
// one, which stays usable until the caller finalizes it, and its members
// meet in the old rank 0's standby store (api/communicator/standby_store.hpp), named
// in the handle (api/communicator/elastic_handles.hpp).

#include "api/communicator/communicator_impl.hpp"
#include "api/communicator/elastic_handles.hpp"
#include "api/communicator/standby_store.hpp"

#include "config/log.hpp"

#include <random>

namespace mccl {

namespace {

/// Every member of a grown communicator: make it, then
/// wait until every member has connected, so that nobody leaves (and
/// perhaps exits, taking the store with it) while others still meet there.
/// `from`: the communicator an old rank grows (null for a newcomer).
communicator meet_grown(const std::shared_ptr<runtime::impl>& rt, const comm_options& o, bool sub,
                        const communicator::impl* from, const detail::grow_ticket& t) {
  auto c = detail::make_communicator(rt, o, sub, 0, true);
  detail::membership_fault_point(from, *detail::communicator_factory::impl_of(c),
                                 transport::membership_change::grow);
  // A member lost before it entered the barrier fails it on every member
  // alike: the old ranks keep their communicator, and all of them can try
  // again with a new handle.
  try {
    c.barrier().wait();
  } catch (const error& e) {
    throw error(e.code(), std::string(from ? "grow" : "join") + " on rank " + std::to_string(o.rank)
                            + ": communicator " + std::to_string(o.comm_id) + " of " + std::to_string(o.world_size)
                            + " ranks lost a member before every member confirmed it: " + e.message()
                            + "; the grow failed on every member and the old ranks keep their communicator: "
                              "make a new handle (grow_handle) and grow again (after a shrink, when an old "
                              "rank was lost)");
  }
  // The old ranks keep theirs; newcomers had none.
  std::vector<int> members(static_cast<std::size_t>(t.new_size), -1);
  for (int r = 0; r < t.old_size && r < t.new_size; ++r)
    members[static_cast<std::size_t>(r)] = r;
  detail::membership_decided(*detail::communicator_factory::impl_of(c), t.epoch, std::move(members));
  return c;
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
  detail::grow_ticket t;
  t.store = p.standby.empty() ? detail::serve_standby(*p.rt, p.cfg, p.master_addr) : p.standby[0];
  t.comm = p.comm_id;
  // A fresh epoch: two grows of one communicator never share an id or keys.
  std::random_device rd;
  t.epoch = (uint64_t{rd()} << 32) | rd();
  t.old_size = p.world;
  t.new_size = new_size;
  return detail::format_grow(t);
}

communicator communicator::grow(const std::string& handle) {
  auto& p = checked();
  std::string who = "grow on rank " + std::to_string(p.rank);
  auto t = detail::parse_grow(handle, who);
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
  return meet_grown(p.rt, o, true, &p, t);
}

communicator runtime::join(const std::string& handle, int rank, const config_overrides& overrides) {
  std::string who = "join" + (rank >= 0 ? " as rank " + std::to_string(rank) : std::string());
  auto t = detail::parse_grow(handle, who);
  auto all = impl_->overrides;
  for (const auto& [k, v] : overrides.values())
    all.set(k, v);
  auto cfg = resolve_config(all);
  if (rank < -1)
    throw error(errc::invalid_argument, who + ": rank " + std::to_string(rank)
                                          + " is neither a newcomer's rank nor -1 (the first free one)");
  comm_options o;
  o.world_size = t.new_size;
  o.comm_id = t.grown_id();
  o.master_addr = detail::store_host(t.store); // listen where the old ranks can reach
  o.overrides = overrides;
  o.store = detail::standby_client(t.store, rank, cfg.connect_timeout, "rank 0");
  if (rank >= 0 && (rank < t.old_size || rank >= t.new_size))
    throw error(errc::invalid_argument, who + ": a newcomer's rank is in " + std::to_string(t.old_size) + ".."
                                          + std::to_string(t.new_size - 1) + " (the old ranks keep theirs and "
                                          "call communicator::grow)");
  if (rank < 0) {
    // The first seat no other newcomer holds; set_if_absent makes each
    // seat one newcomer's.
    auto me = detail::random_hex(16);
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
  return meet_grown(impl_, o, false, nullptr, t);
}

} // namespace mccl
