#pragma once
/// The engine's side of an op: the op with its bookkeeping (issued_op), how
/// its end is reported back to its owner (op_completion, op_report), and
/// descriptions for messages. The op itself
/// (op_request, op_kind, op_signature) is public: include/mccl/collective.hpp.

#include <mccl/collective.hpp>
#include <mccl/error.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace mccl {

/// How an op ended, as the engine reports it to the op's owner.
struct op_report {
  errc code = errc::none;
  std::string message;   ///< empty on success; names op, seq, step and peer otherwise
  std::string algorithm; ///< the algorithm that ran it ("" if none did)
  uint64_t seq = 0;      ///< sequence number (message number for send)
  std::size_t bytes = 0; ///< the size the algorithm was chosen by
  std::size_t wire_bytes = 0; ///< payload bytes this rank sent for it
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

/// An op as the engine carries it: the caller's request and the engine's
/// bookkeeping, which the public request does not show.
struct issued_op : op_request {
  issued_op() = default;
  explicit issued_op(op_request r) : op_request(std::move(r)) {}

  uint64_t seq = 0; ///< wire sequence (collectives) or message number (send)
  uint64_t id = 0;  ///< unique per communicator, for bookkeeping
  /// Which driver moves it when its caller does not (the op thread or the
  /// progress actor), by size: see actors/comm_core.hpp.
  driver_kind background = driver_kind::op_thread;
  /// Told how the op ended (the caller's Work).
  std::shared_ptr<op_completion> done;
};

using op_ptr = std::shared_ptr<issued_op>;

/// "allreduce(count 1000, float32, sum)", "broadcast(count 8, int32, root 2)".
std::string describe(const op_signature& s);

/// The same for a request, with per-rank counts spelled out when short.
std::string describe(const op_request& op);

} // namespace mccl
