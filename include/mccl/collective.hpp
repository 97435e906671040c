#pragma once
/// The extension point for collectives. An algorithm is a state machine that
/// the engine (collectives/engine/engine.hpp) drives through the op's session: it
/// calls start() once, then on_chunk() for every chunk a peer sends for this
/// op and on_sent() when one of the algorithm's own sends has left the
/// caller's buffer, all on the one thread that leads the engine at the
/// time. The algorithm talks back only through collective_io:
/// send chunks, finish, fail. It never sees sockets, threads or CAF.
///
/// mccl's own algorithms are registered with register_algorithm(), the
/// same way a user registers one of their own.

#include <mccl/error.hpp>
#include <mccl/types.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
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
  /// How float32 payloads travel (op_request::compression).
  compression_kind codec = compression_kind::none;

  bool operator==(const op_signature& o) const noexcept {
    return kind == o.kind && type == o.type && op == o.op && arg == o.arg && count == o.count
           && codec == o.codec;
  }
  bool operator!=(const op_signature& o) const noexcept { return !(*this == o); }
};

/// What a caller asked for: one op with its buffers. Counts follow NCCL's
/// conventions: `count` is per rank where an op moves one block per rank
/// (allgather: send holds count, recv count * world; reduce_scatter: send
/// count * world, recv count; gather, scatter and alltoall likewise). The
/// v-variants carry one count per rank in `counts` (and alltoallv the
/// receive side in `recv_counts`); blocks are contiguous in rank order.
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
  /// fp16/bf16: float32 payloads travel as 16-bit floats, rounded to
  /// nearest even; reductions still happen in float32. Set by the
  /// communicator (per-op option, else MCCL_COMPRESSION) only for ops it
  /// applies to (compression_applies); none for every other op.
  compression_kind compression = compression_kind::none;
  /// topk: the fraction of elements each rank sends (MCCL_TOPK_RATIO or
  /// op_options::topk_ratio).
  double topk_ratio = 0;
  /// topk with error feedback: what earlier ops on the same buffer did not
  /// send; added to this op's input before selecting, and left holding what
  /// this op does not send. Null: no feedback.
  std::shared_ptr<std::vector<float>> residual;
  /// The op's deadline, counted from when the engine starts it: set by the
  /// communicator from its current timeout (communicator::set_timeout,
  /// else MCCL_TIMEOUT_MS). Zero: the engine's MCCL_TIMEOUT_MS (requests
  /// made without a communicator, as in the simulator tests).
  std::chrono::milliseconds timeout{0};

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

/// Where chunks of an op may be received in place (the engine's landing
/// map): an algorithm that knows where a chunk goes, and that nothing reads
/// or writes that region until the chunk is delivered, adds the spot in
/// start(); a matching frame's payload is then read straight there, and the
/// chunk arrives with data == that destination (skip the copy).
class landing_spots {
public:
  virtual ~landing_spots() = default;
  /// Chunk (step, chunk) from `peer`, exactly `bytes` long, may land at `dst`.
  virtual void add(int peer, uint32_t step, uint32_t chunk, void* dst, std::size_t bytes) = 0;
};


/// A chunk received from a peer: its bytes live as long as `keep` does.
struct incoming_chunk {
  int peer = -1;
  uint32_t step = 0;
  uint32_t chunk = 0;
  /// Point-to-point messages: the message's total bytes; alltoallv: the
  /// size of the sender's block for us (see collective_io::send_block).
  uint64_t message_bytes = 0;
  uint32_t tag = 0;
  const uint8_t* data = nullptr;
  std::size_t len = 0;
  std::shared_ptr<const void> keep;
};

/// Services of the op's host (the engine's op session, op_session.hpp).
class collective_io {
public:
  virtual ~collective_io() = default;

  /// Queues `bytes` at `data` for `peer`, tagged (step, chunk). The memory
  /// must stay untouched until on_sent() reports this (peer, step, chunk).
  virtual void send(int peer, uint32_t step, uint32_t chunk, const void* data, std::size_t bytes) = 0;

  /// The same, for ops whose blocks differ in size per pair (alltoallv):
  /// the receiver sees `block_bytes` as incoming_chunk::message_bytes and
  /// can check the size before any byte lands.
  virtual void send_block(int peer, uint32_t step, uint32_t chunk, const void* data,
                          std::size_t bytes, uint64_t block_bytes) = 0;

  /// Where chunks of this op may land in place (landing_spots); add them in
  /// start(). Null where the host offers no such thing (point-to-point):
  /// the algorithm must always copy a chunk whose data is not already at its
  /// destination.
  virtual landing_spots* landing() { return nullptr; }

  /// The op succeeded. The host completes it once all sends have left.
  virtual void finish() = 0;

  /// The op failed; `why` is wrapped with the op, sequence and where().
  virtual void fail(errc code, const std::string& why) = 0;
};

/// Everything an algorithm instance knows about its op and communicator.
struct collective_args {
  int rank = 0;
  int world = 1;
  op_request op;                        ///< copy of the request (buffers, count, dtype, ...)
  std::size_t chunk_bytes = 1 << 20;    ///< pipelining chunk (MCCL_CHUNK_BYTES)
  /// The host of every rank (config::host_of): ranks with equal values
  /// share a host. Null or empty: unknown, taken as one host.
  std::shared_ptr<const std::vector<int>> host_of;
};

class algorithm {
public:
  virtual ~algorithm() = default;

  virtual void start() = 0;
  virtual void on_chunk(const incoming_chunk& c) = 0;
  virtual void on_sent(int /*peer*/, uint32_t /*step*/, uint32_t /*chunk*/) {}

  /// False when this rank receives nothing in this op (a broadcast root, a
  /// leaf of a reduce tree). Such a rank then completes only once every
  /// peer it sent to confirmed that it runs the same op, so a mismatch is
  /// an error on every rank, not only on the receivers.
  virtual bool receives() const { return true; }

  /// Appends the ranks whose chunks this rank waits for next (those of its
  /// earliest step still missing some), and returns true; false when the
  /// algorithm cannot tell. An engine with many peers then reads those
  /// links directly and looks at the others only now and then, instead of
  /// asking the kernel about every link on every pass. Frames from other
  /// peers still arrive, a little later: listing too few peers costs
  /// latency, never correctness.
  virtual bool next_senders(std::vector<int>& /*peers*/) const { return false; }

  /// Where the state machine stands, for error messages:
  /// "step 3 of 6 (reduce-scatter), waiting on rank 2".
  virtual std::string where() const = 0;
};

// ---- the registry ------------------------------------------------------------

using algorithm_factory =
  std::function<std::unique_ptr<algorithm>(collective_io& io, const collective_args& args)>;

/// Which communicator sizes an algorithm works on, and whether it honours
/// op_request::compression.
struct algorithm_limits {
  int min_world = 1;
  int max_world = 1 << 30;
  /// True when the algorithm carries float32 payloads as the op's
  /// compression says (the step programs do); others are not chosen for
  /// compressed ops.
  bool compresses = false;
  bool fits(int world) const noexcept { return world >= min_world && world <= max_world; }
};

/// Registers (or replaces) `name` for `kind`: MCCL_ALGO can then name it.
/// Thread-safe.
void register_algorithm(op_kind kind, const std::string& name, algorithm_factory factory,
                        algorithm_limits limits = {});

/// The factory registered under (kind, name), or an empty function.
algorithm_factory find_algorithm(op_kind kind, const std::string& name);

/// Names registered for `kind`, sorted.
std::vector<std::string> algorithm_names(op_kind kind);

/// Makes `name` invocable as communicator::custom(name, ...) on every
/// communicator: `factory` builds the collective's state machine (see
/// this header and docs/custom-collectives.md).
/// mccl's own algorithms are registered through the same registry.
void register_collective(const std::string& name, algorithm_factory factory);

} // namespace mccl
