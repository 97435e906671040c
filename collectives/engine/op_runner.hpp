#pragma once
/// Who runs an op's state machine. The engine (engine.hpp) decides when an
/// op starts, which chunk reaches it, when one of its frames has left and
/// when it must fail; an op runner carries each of those events to the op's
/// handlers (op_session: start_op, deliver, frame_sent, fail), in the order
/// the engine raised them.
///
/// A communicator's runners make every op an actor (actors/op_actor.hpp):
/// each event is a message to the op's actor, run on the thread that leads
/// the engine before the engine's call returns. Without them (the
/// simulator's engines, unit tests of the engine) direct_runners call the
/// handlers in place. Either way the engine sees the same thing: when a
/// call on a runner returns, the op has handled the event (or, when the
/// call comes from inside one of the op's own handlers, will handle it as
/// soon as that handler returns, before the engine's outermost call does).

#include "collectives/engine/op_session.hpp"
#include "transport/received_frame.hpp"

#include <mccl/error.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mccl {

/// One op's events, from the engine to the op's handlers. Destroyed when
/// the engine forgets the op: the runner lets go of it then.
class op_runner {
public:
  virtual ~op_runner() = default;
  /// Starts the op and hands it the chunks that came for it before
  /// (op_session::start_op): one event, however many came early.
  virtual void start(std::vector<transport::received_frame> early) = 0;
  /// A data frame of this op from a peer (op_session::deliver).
  virtual void chunk(transport::received_frame& f) = 0;
  /// One of its frames has fully left (op_session::frame_sent).
  virtual void sent(int peer, uint32_t step, uint32_t chunk) = 0;
  /// It must fail: the communicator aborted, a peer left, a deadline passed
  /// (op_session::fail).
  virtual void fail(errc code, const std::string& why) = 0;
};

/// Where a communicator's ops run: one runner per op, made before it
/// starts (so that events its own start raises find it).
class op_runners {
public:
  virtual ~op_runners() = default;
  virtual std::unique_ptr<op_runner> runner_for(op_session& op) = 0;
};

/// Runs every handler in place, on the engine's call.
class direct_runners final : public op_runners {
public:
  std::unique_ptr<op_runner> runner_for(op_session& op) override;
};

} // namespace mccl
