#pragma once
/// The extension point for collectives. An algorithm is a state machine that
/// the engine (collectives/engine.hpp) drives through the op's session: it
/// calls start() once, then on_chunk() for every chunk a peer sends for this
/// op and on_sent() when one of the algorithm's own sends has left the
/// caller's buffer, all on the one thread that leads the engine at the
/// time. The algorithm talks back only through collective_io:
/// send chunks, finish, fail. It never sees sockets, threads or CAF.
///
/// Built-in algorithms are registered through collectives/registry.hpp, the
/// same way a user registers one of their own.

#include "collectives/landing.hpp"
#include "collectives/op.hpp"
#include "config/error.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace mccl {

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

  /// The op's landing map (collectives/landing.hpp), to add chunks that may
  /// be received in place; add them in start(). Null where the host reads
  /// every chunk itself: the algorithm must always copy a chunk whose data
  /// is not already at its destination.
  virtual landing_map* landing() { return nullptr; }

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

  /// Where the state machine stands, for error messages:
  /// "step 3 of 6 (reduce-scatter), waiting on rank 2".
  virtual std::string where() const = 0;
};

} // namespace mccl
