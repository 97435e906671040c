#pragma once
/// mccl's public C++ API.
///
///   mccl::runtime rt;                                   // owns a CAF actor system
///   auto comm = rt.communicator_from_env();            // RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
///   comm.allreduce(data.data(), data.size(), mccl::redop::sum).wait();
///   comm.finalize();
///
/// Contract (as with NCCL and Gloo): all ranks of a communicator issue the
/// same collectives in the same order with the same counts, dtypes and
/// reductions. Buffers must stay valid and untouched until the op's Work is
/// done. Every op is bounded by MCCL_TIMEOUT_MS.

#include "actors/work.hpp"
#include "config/config.hpp"
#include "config/error.hpp"
#include "reducers/reduce.hpp"
#include "transport/store.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

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
};

/// RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun's names; LOCAL_RANK
/// is read when present). Throws mccl::error(invalid_config) naming the
/// variable that is missing or malformed.
comm_options comm_options_from_env();

class runtime;

/// A group of ranks that run collectives together. A cheap, copyable handle;
/// the communicator is finalized when finalize() is called or the last
/// handle goes away.
class communicator {
public:
  communicator() = default;

  int rank() const;
  int size() const;
  const config& settings() const;

  /// In place: data = reduce over ranks of data.
  work allreduce(void* data, std::size_t count, dtype type, redop op = redop::sum);
  /// Out of place: recv = reduce over ranks of send (recv may equal send).
  work allreduce(const void* send, void* recv, std::size_t count, dtype type,
                 redop op = redop::sum);
  template <class T>
  work allreduce(T* data, std::size_t count, redop op = redop::sum) {
    return allreduce(data, count, dtype_of<T>(), op);
  }

  /// data on every rank = data on `root`.
  work broadcast(void* data, std::size_t count, dtype type, int root);
  template <class T>
  work broadcast(T* data, std::size_t count, int root) {
    return broadcast(data, count, dtype_of<T>(), root);
  }

  /// Completes on a rank only after every rank has entered the barrier.
  work barrier();

  /// Aborts the communicator on every rank: in-flight and later ops fail
  /// with an error naming this rank and `reason`.
  void abort(const std::string& reason);

  /// Closes links and stops the actors; returns promptly (within about a
  /// second) even when peers are gone. Idempotent.
  void finalize();

  struct impl;

private:
  friend class runtime;
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

  /// The settings resolved when the runtime started.
  const config& settings() const;

  caf::actor_system& system();

  struct impl;

private:
  std::shared_ptr<impl> impl_;
};

} // namespace mccl
