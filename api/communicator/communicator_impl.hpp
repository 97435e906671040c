#pragma once
/// Internals of communicator (not installed API), shared by
/// communicator.cpp (the op calls), communicator_setup.cpp (creating one:
/// rendezvous, connections, fault injection) and communicator_groups.cpp
/// (split and shrink).

#include <mccl/communicator.hpp>
#include "actors/comm_core.hpp"
#include "actors/runtime_impl.hpp"
#include "transport/fault/fault_report.hpp"
#include <mccl/faults.hpp>
#include "transport/store/tcp_store.hpp"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mccl {

struct communicator::impl {
  std::shared_ptr<runtime::impl> rt;
  config cfg;
  config_overrides overrides; ///< the explicit settings, inherited by split()
  int rank = 0;
  int world = 1;
  /// This process's rank in the communicator it was launched into, kept by
  /// every communicator made from that one (split, shrink, grow,
  /// reconfigure); a newcomer's is its rank where it joined. Which process
  /// a fault "during" a membership change names (faults.hpp).
  int job_rank = 0;
  uint32_t comm_id = 0;
  std::string master_addr;
  store_ptr rendezvous; ///< kept for split(): sub-communicators meet here
  /// Rank 0's rendezvous store server; shared with communicators shrunk
  /// from this one, which still meet there after this one is finalized.
  std::shared_ptr<tcp_store_server> store_server;
  /// The rank of this communicator in whose process `rendezvous` is
  /// served (rank 0 for the default store; the store's host after a shrink
  /// moved it); -1 when no member's: a store of the caller's, or one whose
  /// server is outside this group (a split group without the parent's
  /// serving rank).
  int store_host = -1;
  /// Every rank's standby store ("ip:port", by rank; api/communicator/standby_store.hpp),
  /// learned during setup; empty for a group of one. A shrink that loses
  /// `store_host` meets in the lowest survivor's; grow meets in rank 0's.
  std::vector<std::string> standby;
  /// This member's reconfigure handle, made on first use (reconfigure()).
  std::mutex member_mutex;
  std::string member_handle;
  /// The engine, its drivers and actors.
  std::shared_ptr<actors::comm_core> core;
  /// Fault injection (MCCL_FAULTS or comm_options::faults); null: none.
  std::shared_ptr<transport::fault_recorder> fault_report;
  /// Its scenario, whose faults "during" a membership change fire in
  /// shrink, grow and reconfigure (detail::membership_fault_point).
  std::shared_ptr<const transport::fault_scenario> fault_scenario;
  /// The deadline of ops issued from now on, in ms, once set_timeout was
  /// called; 0: cfg.timeout (MCCL_TIMEOUT_MS). Atomic: ops may be issued
  /// from other threads while it changes.
  std::atomic<int64_t> timeout_ms{0};
  std::atomic<uint64_t> splits{0};
  std::atomic<uint64_t> shrinks{0};
  /// topk error feedback: what each key's earlier ops did not send
  /// (op_options::topk_key). An op resizes its residual when the count
  /// changed.
  std::mutex residual_mutex;
  std::map<uint64_t, std::shared_ptr<std::vector<float>>> residuals;
  std::mutex finalize_mutex;
  std::atomic<bool> finalized{false};

  ~impl() { finalize(); }

  /// Checks `req` (api/communicator/op_checks.hpp), settles its compression and
  /// hands it to the core.
  work submit(op_ptr req, const op_options& opts = {});
  /// The deadline of an op issued now (communicator::timeout()).
  std::chrono::milliseconds op_timeout() const {
    auto set = timeout_ms.load(std::memory_order_relaxed);
    return set > 0 ? std::chrono::milliseconds(set) : cfg.timeout;
  }
  /// The overrides a communicator made from this one starts with: its
  /// explicit settings, and the timeout set_timeout gave it.
  config_overrides inherited_overrides() const;
  /// Throws errc::revoked naming `what` (an op, "probe"), this rank and who
  /// revoked, once the communicator is revoked.
  void refuse_if_revoked(const std::string& what) const;
  /// The residual kept under `key` (made empty on first use).
  std::shared_ptr<std::vector<float>> residual_for(uint64_t key);
  void finalize();
};

namespace detail {

struct communicator_factory {
  static communicator make(std::shared_ptr<communicator::impl> p) { return communicator(std::move(p)); }
  static communicator::impl* impl_of(const communicator& c) { return c.impl_.get(); }
};

/// Creates a communicator of runtime `rt` from `o`: rendezvous, the job
/// token, connections to every peer, fault injection, the core.
/// `sub_communicator`: made by split or shrink (the log keeps the world
/// rank).
/// `store_host`: the rank of the new communicator whose process serves
/// o.store (communicator::impl::store_host); ignored without o.store (the
/// default store is rank 0's). `standby`: o.store is a standby store
/// (api/communicator/standby_store.hpp), which outlives a failed setup.
communicator make_communicator(const std::shared_ptr<runtime::impl>& rt, const comm_options& o,
                               bool sub_communicator, int store_host = -1, bool standby = false);

/// Where a membership change lets a fault scenario's rank faults "during"
/// it fire (include/mccl/faults.hpp, membership_change): this process is
/// connected to every member of `built` and has not confirmed the change
/// yet. `from` is the communicator the change was called on (null for a
/// newcomer); `built` takes its job_rank (a newcomer keeps its own), which
/// the faults name. The scenario is `from`'s, else `built`'s. A crash
/// never returns.
void membership_fault_point(const communicator::impl* from, communicator::impl& built,
                            transport::membership_change change);

/// A membership change is decided (every member confirmed `built`): its
/// supervisor learns that the group is now `members` (by rank, the rank
/// each had in the communicator the change was called on; -1: a newcomer,
/// or not known here) at `epoch` (comm_core::announce_members).
void membership_decided(communicator::impl& built, uint64_t epoch, std::vector<int> members);

/// The id of a communicator derived from `parent`: every member computes
/// the same one from values they all agree on, and it differs from the
/// parent's, so frames and store keys never mix.
uint32_t derived_comm_id(uint32_t parent, std::initializer_list<uint64_t> values);

} // namespace detail

} // namespace mccl
