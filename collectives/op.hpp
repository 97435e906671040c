#pragma once
/// What a caller asked for: one op with its buffers, and how its end is
/// reported back (op_completion). Shared by the public API and the engine.
///
/// Counts follow NCCL's conventions: `count` is per rank where an op moves
/// one block per rank (allgather: send holds count, recv count * world;
/// reduce_scatter: send count * world, recv count; gather, scatter and
/// alltoall likewise). The v-variants carry one count per rank in `counts`
/// (and alltoallv the receive side in `recv_counts`); blocks are contiguous
/// in rank order.

#include "config/error.hpp"
#include "reducers/reduce.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mccl {

/// The numeric values travel on the wire (op signatures): append only.
enum class op_kind : uint8_t {
  allreduce = 1,
  broadcast,
  reduce,
  allgather,      ///< also allgatherv (counts set)
  reduce_scatter, ///< also reduce_scatterv (counts set)
  gather,
  scatter,
  alltoall,       ///< also alltoallv (counts and recv_counts set)
  barrier,
  send,
  recv,
  custom,         ///< a user-registered collective, by name
};

/// "allreduce", "broadcast", ...; "unknown" outside the enum.
const char* to_string(op_kind kind) noexcept;

/// The name MCCL_ALGO uses for a kind (to_string), and the reverse.
bool op_kind_from_string(const std::string& name, op_kind& out) noexcept;

/// True for the ops that combine values with a redop.
inline bool is_reduction(op_kind k) noexcept {
  return k == op_kind::allreduce || k == op_kind::reduce || k == op_kind::reduce_scatter;
}

/// True for ops with a root rank.
inline bool is_rooted(op_kind k) noexcept {
  return k == op_kind::broadcast || k == op_kind::reduce || k == op_kind::gather
         || k == op_kind::scatter;
}

/// What every rank must agree on for an op at one sequence number. It
/// travels in every data frame, so a rank that issued something else is
/// caught at the first frame instead of reducing garbage.
struct op_signature {
  op_kind kind = op_kind::allreduce;
  dtype type = dtype::float32;
  redop op = redop::sum; ///< only meaningful for reductions (sum otherwise)
  uint32_t arg = 0;      ///< root, or a hash of per-rank counts / a custom name
  uint64_t count = 0;    ///< count, or the total of per-rank counts

  bool operator==(const op_signature& o) const noexcept {
    return kind == o.kind && type == o.type && op == o.op && arg == o.arg && count == o.count;
  }
  bool operator!=(const op_signature& o) const noexcept { return !(*this == o); }
};

/// Which thread moved an op's bytes when it completed: the thread that
/// issued or waited for it, the communicator's op thread, or the progress
/// actor on a CAF worker (whoever leads the engine, collectives/engine.hpp).
enum class driver_kind : uint8_t { caller, op_thread, actor };

/// "caller", "op thread", "actor".
const char* to_string(driver_kind who) noexcept;

/// How an op ended, as the engine reports it to the op's owner.
struct op_report {
  errc code = errc::none;
  std::string message;   ///< empty on success; names op, seq, step and peer otherwise
  std::string algorithm; ///< the algorithm that ran it ("" if none did)
  uint64_t seq = 0;      ///< sequence number (message number for send)
  std::size_t bytes = 0; ///< the size the algorithm was chosen by
  std::chrono::nanoseconds duration{0}; ///< from the engine starting it to its end
  driver_kind driver = driver_kind::caller;
};

/// The owner of an op (the caller's Work) is told once how it ended, after
/// no mccl thread refers to its buffers any more.
class op_completion {
public:
  virtual ~op_completion() = default;
  virtual void complete(op_report report) = 0;
};

struct op_request {
  op_kind kind = op_kind::allreduce;
  const void* send = nullptr; ///< input (null where an op has none on this rank)
  void* recv = nullptr;       ///< output
  std::size_t count = 0;      ///< elements (see the file comment)
  dtype type = dtype::float32;
  redop op = redop::sum;
  int root = 0;               ///< rooted ops; the peer for send and recv
  uint32_t tag = 0;           ///< send and recv
  std::vector<std::size_t> counts;      ///< v-variants: per-rank counts
  std::vector<std::size_t> recv_counts; ///< alltoallv: what each rank sends us
  std::string name;           ///< custom: the registered collective's name
  uint64_t seq = 0;           ///< wire sequence (collectives) or message number (send)
  uint64_t id = 0;            ///< unique per communicator, for bookkeeping
  /// Which driver should move it when its caller does not (the op thread
  /// or the progress actor), by size: see actors/comm_driver.hpp.
  driver_kind background = driver_kind::op_thread;
  std::shared_ptr<op_completion> done;

  bool is_v() const noexcept { return !counts.empty(); }
  std::size_t elem_size() const noexcept { return dtype_size(type); }
  /// count * element size.
  std::size_t bytes() const noexcept { return count * elem_size(); }
  /// The size the algorithm choice goes by: the whole vector for
  /// allreduce/broadcast/reduce, the gathered total for allgather,
  /// reduce_scatter, gather, scatter and alltoall.
  std::size_t selection_bytes(int world) const noexcept;
  /// Count of rank r's block (counts[r], or count).
  std::size_t count_of(int r) const noexcept {
    return counts.empty() ? count : counts[static_cast<std::size_t>(r)];
  }
  /// Sum of counts over `world` ranks (count * world without counts).
  std::size_t total_count(int world) const noexcept;
  /// Element offset of rank r's block in a rank-ordered buffer.
  std::size_t offset_of(int r) const noexcept;
  op_signature signature(int world) const noexcept;
};

using op_ptr = std::shared_ptr<op_request>;

/// "allreduce(count 1000, float32, sum)", "broadcast(count 8, int32, root 2)".
std::string describe(const op_signature& s);

/// The same for a request, with per-rank counts spelled out when short.
std::string describe(const op_request& op);

} // namespace mccl
