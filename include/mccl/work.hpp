#pragma once
/// Work: the handle every op returns. wait() blocks until the op finished
/// (or throws its error), moving the op's bytes itself while no other
/// thread does; every wait is bounded because the watchdog fails any op
/// that passes MCCL_TIMEOUT_MS.

#include <mccl/error.hpp>
#include <mccl/types.hpp>

#include <cstdint>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mccl {

/// What the runtime recorded about one op; complete once the op is done.
struct op_metrics {
  std::string op;        ///< "allreduce", "send", or a custom collective's name
  std::string algorithm; ///< the algorithm that ran it ("ring", "rd", ...)
  uint64_t seq = 0;      ///< sequence number (message number for send)
  std::size_t bytes = 0; ///< the size the algorithm was chosen by
  /// Payload bytes this rank sent for the op (after compression; 0 for
  /// ops through the shared-memory board).
  std::size_t wire_bytes = 0;
  /// From the engine starting the op to its end.
  std::chrono::nanoseconds duration{0};
  /// Which thread moved its bytes when it completed: the one that issued
  /// or waited for it, the communicator's op thread, or the progress actor.
  driver_kind driver = driver_kind::caller;
  /// driver == caller: the op ran on the thread that issued it
  /// (MCCL_INLINE_BYTES) or waited for it.
  bool inline_run = false;
  /// driver == op_thread (MCCL_OP_THREAD_BYTES).
  bool op_thread = false;
};

class work_state; // mccl's side of the handle (actors/work_state.hpp)

/// The caller's handle to one op.
class work {
public:
  work() = default;
  explicit work(std::shared_ptr<work_state> s) : state_(std::move(s)) {}

  /// Blocks until the op is done; throws mccl::error when it failed.
  void wait() const;

  /// Blocks up to `timeout` (driving the op meanwhile, as wait() does).
  /// Returns false if the op is still running; throws mccl::error when it
  /// failed.
  bool wait_for(std::chrono::milliseconds timeout) const;

  /// Non-blocking: true once the op finished (successfully or not).
  bool test() const noexcept;

  /// True when the op finished without error.
  bool ok() const noexcept;

  /// The failure, if the op finished with one.
  std::optional<error> failure() const;

  /// Runs `cb` once the op finished (immediately if it already has). It runs
  /// on an mccl thread: keep it short and never wait on mccl inside it.
  void on_complete(std::function<void()> cb) const;

  bool valid() const noexcept { return static_cast<bool>(state_); }
  /// The op, algorithm, sequence, size and duration; fully filled in once
  /// the op is done (test() is true).
  op_metrics metrics() const;

private:
  std::shared_ptr<work_state> state_;
};

} // namespace mccl
