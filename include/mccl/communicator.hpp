#pragma once
/// mccl's public C++ API.
///
///   mccl::runtime rt;                                   // owns a CAF actor system
///   auto comm = rt.communicator_from_env();            // RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
///   comm.allreduce(data.data(), data.size(), mccl::redop::sum).wait();
///   comm.allgather(mine.data(), all.data(), mine.size(), mccl::dtype::float32).wait();
///   auto half = comm.split(comm.rank() % 2, comm.rank());  // sub-communicators
///   comm.finalize();
///
/// Contract (as with NCCL and Gloo): all ranks of a communicator issue the
/// same collectives in the same order with the same counts, dtypes and
/// reductions. Buffers must stay valid and untouched until the op's Work is
/// done. Every op is bounded by MCCL_TIMEOUT_MS.

#include <mccl/collective.hpp>
#include <mccl/config.hpp>
#include <mccl/error.hpp>
#include <mccl/faults.hpp>
#include <mccl/store.hpp>
#include <mccl/types.hpp>
#include <mccl/work.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace caf {
class actor_system;
}

namespace mccl {



/// The dtype of a C++ element type (float -> float32, int64_t -> int64, ...).
template <class T>
constexpr dtype dtype_of() {
  if constexpr (std::is_same_v<T, float>) return dtype::float32;
  else if constexpr (std::is_same_v<T, double>) return dtype::float64;
  else if constexpr (std::is_same_v<T, int8_t>) return dtype::int8;
  else if constexpr (std::is_same_v<T, uint8_t>) return dtype::uint8;
  else if constexpr (std::is_same_v<T, int32_t>) return dtype::int32;
  else if constexpr (std::is_same_v<T, int64_t>) return dtype::int64;
  else if constexpr (std::is_same_v<T, bool>) return dtype::boolean;
  else if constexpr (std::is_same_v<T, int16_t>) return dtype::int16;
  else if constexpr (std::is_same_v<T, uint16_t>) return dtype::uint16;
  else if constexpr (std::is_same_v<T, uint32_t>) return dtype::uint32;
  else if constexpr (std::is_same_v<T, uint64_t>) return dtype::uint64;
  else static_assert(sizeof(T) == 0, "no mccl dtype for this element type");
}

/// Who this rank is and how to find the others.
struct comm_options {
  int rank = 0;
  int world_size = 1;
  /// Rank 0 serves the rendezvous store here (ignored when `store` is set).
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  /// A store to rendezvous through instead of the TCP store on MASTER_PORT.
  store_ptr store;
  /// Distinguishes communicators that share a store (and tags every frame).
  uint32_t comm_id = 0;
  /// Explicit settings for this communicator; they beat the environment.
  config_overrides overrides;
  /// A fault-injection scenario for this communicator (docs/fault-injection.md),
  /// e.g. transport::parse_fault_scenario(json_text, "my test");
  /// it replaces MCCL_FAULTS. Null: MCCL_FAULTS decides.
  std::shared_ptr<const transport::fault_scenario> faults;
};

/// Choices for one op that beat the communicator's settings.
struct op_options {
  /// How this op's float32 payloads travel: fp16 or bf16 halve the bytes
  /// (rounded to nearest even; reductions still add in float32), none
  /// sends them exactly. Unset: MCCL_COMPRESSION. Applies to allreduce,
  /// reduce, reduce_scatter(v), allgather(v) and broadcast of float32
  /// larger than MCCL_SMALL_MSG_THRESHOLD (smaller ops are latency-bound
  /// and travel exactly); asking for it on another op or dtype is an error.
  /// topk: each rank sends only its topk_ratio largest-magnitude elements
  /// (float32 allreduce with sum or avg only).
  std::optional<compression_kind> compression;
  /// topk: the fraction of elements sent, in (0, 1]. Unset: MCCL_TOPK_RATIO.
  std::optional<double> topk_ratio;
  /// topk: add what earlier ops on the same key did not send (error
  /// feedback), so nothing is lost, only delayed. Off only to see why it
  /// matters.
  bool error_feedback = true;
  /// topk: the key the error-feedback residual is kept under on this
  /// communicator (one per gradient tensor or bucket); 0: the output
  /// buffer's address. Residuals of a key whose count changes start over.
  uint64_t topk_key = 0;
};

/// Who this rank is, from the launcher's environment: RANK, WORLD_SIZE,
/// MASTER_ADDR, MASTER_PORT (torchrun's and mcclrun's names; LOCAL_RANK is
/// read when present), else MLX_RANK with MLX_HOSTFILE (mlx.launch's ring
/// hostfile: rank 0 serves the rendezvous at its address there, every rank
/// listens on its own) or with MLX_JACCL_COORDINATOR and MLX_IBV_DEVICES
/// (JACCL: the transport asks for RDMA). Nothing set: a group of one, or
/// with `strict` an error. Throws mccl::error(invalid_config) naming the
/// variable or file entry that is missing or malformed.
comm_options comm_options_from_env(bool strict = false);

class runtime;
namespace detail {
struct communicator_factory;
}

/// A group of ranks that run collectives together. A cheap, copyable handle;
/// the communicator is finalized when finalize() is called or the last
/// handle goes away.
class communicator {
public:
  communicator() = default;

  int rank() const;
  int size() const;
  /// The settings resolved when the communicator was made (set_timeout
  /// does not change them; timeout() tells the current deadline).
  const config& settings() const;

  /// The deadline of each op issued from now on by this rank, counted from
  /// when the op starts: MCCL_TIMEOUT_MS until set_timeout changes it. Ops
  /// already issued keep theirs. The deadline is per rank (each rank that
  /// should wait less calls it); a timed-out op aborts the communicator as
  /// always. Split and shrink pass it on. Throws invalid_argument outside
  /// MCCL_TIMEOUT_MS's range (1 ms to 24 h). Thread-safe.
  void set_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const;

  // ---- collectives -----------------------------------------------------
  // All ranks call each collective in the same order with matching
  // arguments. `count` is per rank where an op moves one block per rank
  // (NCCL's convention). Out-of-place forms take send and recv; the
  // in-place form is the same call with the buffers aliased as noted.

  /// recv = reduce over ranks of send; in place when send == recv.
  work allreduce(const void* send, void* recv, std::size_t count, dtype type,
                 redop op = redop::sum, const op_options& opts = {});
  work allreduce(void* data, std::size_t count, dtype type, redop op = redop::sum) {
    return allreduce(data, data, count, type, op);
  }
  template <class T>
  work allreduce(T* data, std::size_t count, redop op = redop::sum) {
    return allreduce(data, count, dtype_of<T>(), op);
  }

  /// recv on every rank = send on `root` (send is read on the root only;
  /// in place when send == recv or send is null).
  work broadcast(const void* send, void* recv, std::size_t count, dtype type, int root,
                 const op_options& opts = {});
  work broadcast(void* data, std::size_t count, dtype type, int root) {
    return broadcast(data, data, count, type, root);
  }
  template <class T>
  work broadcast(T* data, std::size_t count, int root) {
    return broadcast(data, count, dtype_of<T>(), root);
  }

  /// recv on `root` = reduce over ranks of send (recv is ignored elsewhere
  /// and may be null); in place when send == recv.
  work reduce(const void* send, void* recv, std::size_t count, dtype type, redop op, int root,
              const op_options& opts = {});

  /// recv (count * size elements) = every rank's send (count each), in
  /// rank order. In place when send == recv + rank * count elements.
  work allgather(const void* send, void* recv, std::size_t count, dtype type,
                 const op_options& opts = {});
  /// Per-rank counts (the same vector on every rank); blocks are contiguous
  /// in rank order. In place when send points at this rank's block of recv.
  work allgatherv(const void* send, void* recv, const std::vector<std::size_t>& counts, dtype type,
                  const op_options& opts = {});

  /// recv (count elements) = this rank's block of the reduction of every
  /// rank's send (count * size elements). In place when recv == send +
  /// rank * count elements.
  work reduce_scatter(const void* send, void* recv, std::size_t count, dtype type,
                      redop op = redop::sum, const op_options& opts = {});
  /// Per-rank result counts (the same vector on every rank).
  work reduce_scatterv(const void* send, void* recv, const std::vector<std::size_t>& counts,
                       dtype type, redop op = redop::sum, const op_options& opts = {});

  /// recv on `root` (count * size elements) = every rank's send, in rank order.
  work gather(const void* send, void* recv, std::size_t count, dtype type, int root);
  /// recv (count) on every rank = its block of send (count * size) on `root`.
  work scatter(const void* send, void* recv, std::size_t count, dtype type, int root);

  /// Block j of send (count elements) goes to rank j; block i of recv comes
  /// from rank i. In place when send == recv.
  work alltoall(const void* send, void* recv, std::size_t count, dtype type);
  /// send_counts[j] elements go to rank j, recv_counts[i] come from rank i
  /// (each must equal what rank i sends us); blocks contiguous in rank order.
  work alltoallv(const void* send, const std::vector<std::size_t>& send_counts, void* recv,
                 const std::vector<std::size_t>& recv_counts, dtype type);

  /// Completes on a rank only after every rank has entered the barrier.
  work barrier();

  /// A collective registered with register_step_collective() or
  /// register_collective(), by name. The arguments mean what that
  /// collective documents.
  work custom(const std::string& name, const void* send, void* recv, std::size_t count, dtype type,
              redop op = redop::sum, int root = 0);

  // ---- point to point ---------------------------------------------------
  // Between any two ranks, tagged. Sends and receives may be posted in any
  // order and any number may be outstanding; messages from one rank with
  // one tag are received in the order they were sent. A receive whose size
  // differs from the message's fails, naming both sizes.

  work send(const void* data, std::size_t count, dtype type, int peer, uint32_t tag = 0);
  work recv(void* data, std::size_t count, dtype type, int peer, uint32_t tag = 0);
  template <class T>
  work send(const T* data, std::size_t count, int peer, uint32_t tag = 0) {
    return send(data, count, dtype_of<T>(), peer, tag);
  }
  template <class T>
  work recv(T* data, std::size_t count, int peer, uint32_t tag = 0) {
    return recv(data, count, dtype_of<T>(), peer, tag);
  }

  /// Non-blocking: the peers, in rank order, from which a message with
  /// `tag` has arrived that no posted receive has claimed yet. A receive
  /// from such a peer then gets one (unless a receive from another thread
  /// claims it first). This is how a caller receives from any source: probe
  /// until some peer has a message, then receive from it.
  std::vector<int> probe(uint32_t tag);

  // ---- groups -----------------------------------------------------------

  /// A collective over this communicator: ranks passing the same `color`
  /// form a new communicator, ordered by `key` (ties by rank). A negative
  /// color joins none and gets an empty handle (valid() is false). The new
  /// communicator has its own links and sequence numbers. On a revoked
  /// communicator the ranks exchange colors and keys through the
  /// rendezvous store instead (bounded by MCCL_CONNECT_TIMEOUT_MS); every
  /// rank still takes part.
  communicator split(int color, int key);

  /// After ranks failed (or to leave some out on purpose): the ranks not in
  /// `excluded` form a new communicator in the same processes, ordered as
  /// here (new rank = place among the survivors), with this one's
  /// settings. Every survivor calls it with the same set; it is not an op of
  /// this communicator (which may have aborted) and needs nothing from the
  /// excluded ranks, which may be dead or hung. The survivors meet in this
  /// communicator's rendezvous store; when the rank whose process serves it
  /// (rank 0 for the default store) is excluded, they meet instead in the
  /// standby store of the lowest surviving rank, new rank 0, which serves
  /// the new communicator's store from then on (docs/cpp-api.md, "Shrink").
  /// Bounded by MCCL_CONNECT_TIMEOUT_MS; returns once every survivor
  /// has connected. Finalize this communicator when you no longer need it.
  communicator shrink(const std::vector<int>& excluded);

  // ---- elastic membership (docs/cpp-api.md, "Grow" and "Reconfigure") ----

  /// On any one rank (a coordinator): a printable handle that grows this
  /// communicator to `new_size` ranks, to pass to every rank of it and to
  /// the new_size - size() newcomers. It names rank 0's standby store, this
  /// communicator and a fresh epoch, so each handle makes its own group.
  /// Throws invalid_argument unless size() < new_size.
  std::string grow_handle(int new_size) const;
  /// Every rank of this communicator calls it with the same handle while
  /// the newcomers call runtime::join(handle): the new communicator has
  /// the old ranks first, each keeping its rank, then the newcomers. It is
  /// not an op of this one (which stays usable, even revoked, until you
  /// finalize it). Bounded by MCCL_CONNECT_TIMEOUT_MS; returns once every
  /// member has connected.
  communicator grow(const std::string& handle);

  /// This member's handle for reconfigure(): its process's standby store
  /// and an id unique to this communicator handle. The same on every call.
  std::string get_reconfigure_handle();
  /// Builds the next communicator from `handles` (from
  /// get_reconfigure_handle() here or runtime::get_reconfigure_handle() in
  /// a newcomer): rank = place in the list, which must hold this member's
  /// own handle once. Every listed member calls it with the same `uuid`
  /// and list. All or nothing: when a member fails or never calls within
  /// `timeout`, every member that called gets an error (none a new
  /// communicator) and keeps this one untouched; retry with a new uuid.
  /// Calling again with a uuid and list already decided is an error. The
  /// commit rule and its limits: docs/cpp-api.md, "Reconfigure".
  communicator reconfigure(const std::string& uuid, const std::vector<std::string>& handles,
                           std::chrono::milliseconds timeout);

  /// False for an empty handle (a default-constructed one, or split with a
  /// negative color).
  bool valid() const noexcept { return static_cast<bool>(impl_); }

  /// Aborts the communicator on every rank: in-flight and later ops fail
  /// with an error naming this rank and `reason`.
  void abort(const std::string& reason);

  /// Revokes the communicator on every rank (docs/cpp-api.md, "Revoke"),
  /// without destroying it: this rank and then every peer stop accepting
  /// ops; ops in flight end on every rank, within the liveness window
  /// (MCCL_HEARTBEAT_MS x MCCL_HEARTBEAT_MISSES) at most and normally
  /// within a few milliseconds. An op either completes on every rank (some
  /// rank completed it before it learned of the revoke) or fails on every
  /// rank with errc::revoked naming the rank that revoked and `reason`.
  /// Afterwards every op, probe included, throws errc::revoked at once;
  /// shrink(), split() and finalize() still work, so the ranks can build a
  /// new communicator from this one. Idempotent; a no-op once finalized.
  void revoke(const std::string& reason);
  /// True once this rank knows the communicator is revoked (its own
  /// revoke(), or a peer's that reached it).
  bool revoked() const;

  /// Runs `cb` once when the communicator aborts (this rank's abort, a
  /// peer's, a lost peer, a failed op), with the error its ops fail with;
  /// at once, on this thread, when it has aborted already. Otherwise it
  /// runs on an mccl thread that must not wait: keep it to a signal (a
  /// message to an actor, a flag). Not called on finalize.
  void on_abort(std::function<void(const error&)> cb);

  /// Closes links and stops the actors; returns promptly (within about a
  /// second) even when peers are gone. Idempotent.
  void finalize();

  struct impl;

private:
  friend class runtime;
  friend struct detail::communicator_factory;
  explicit communicator(std::shared_ptr<impl> p) : impl_(std::move(p)) {}
  impl& checked() const;
  std::shared_ptr<impl> impl_;
};

/// Owns (or joins) the CAF actor system, the I/O thread and the watchdog
/// that communicators share. Create one per process.
class runtime {
public:
  /// Owns an actor system configured in code (never from a config file):
  /// MCCL_WORKER_THREADS scheduler threads, idle workers sleeping.
  explicit runtime(const config_overrides& overrides = {});
  /// Joins an actor system the host program already runs. mccl's links poll
  /// by messaging themselves; give such a system at least 2 workers or set
  /// scheduler.max-throughput low so other actors get their turn.
  explicit runtime(caf::actor_system& host_system, const config_overrides& overrides = {});
  /// Finalizes every communicator still open, then stops.
  ~runtime();

  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// The world communicator described by the environment (comm_options_from_env()).
  communicator communicator_from_env();
  /// A communicator from explicit options. Blocks until every peer is
  /// connected (bounded by MCCL_CONNECT_TIMEOUT_MS).
  communicator create_communicator(const comm_options& options);

  /// A newcomer's side of communicator::grow(): joins the grown
  /// communicator as `rank` (old size <= rank < new size), or with -1 as
  /// the first rank no other newcomer has claimed. Blocks like grow().
  communicator join(const std::string& grow_handle, int rank = -1, const config_overrides& overrides = {});
  /// A fresh reconfigure handle for a process that joins without a
  /// communicator (each call makes a new one; keep it and pass it back).
  std::string get_reconfigure_handle();
  /// communicator::reconfigure() for such a newcomer: `mine` is the handle
  /// get_reconfigure_handle() gave it.
  communicator reconfigure(const std::string& mine, const std::string& uuid,
                           const std::vector<std::string>& handles, std::chrono::milliseconds timeout,
                           const config_overrides& overrides = {});

  /// The settings resolved when the runtime started.
  const config& settings() const;

  caf::actor_system& system();

  struct impl;

private:
  std::shared_ptr<impl> impl_;
};

} // namespace mccl
