#pragma once
/// The collective actor: one per op in flight on the actor path. It hosts
/// the op's session (op_session.hpp: the algorithm plus the frame protocol
/// around it), sends its frames through the link actors, feeds it chunks and
/// send completions, and reports the outcome to the progress actor.
///
/// Invariants: the op is reported successful only when the algorithm
/// finished *and* every send it queued has left the caller's buffer. A failed
/// op stays alive (ignoring everything) until the progress actor has made the
/// links drop their pointers into its buffers, then it is told to quit.

#include "collectives/op_session.hpp"

#include <caf/event_based_actor.hpp>

#include <chrono>
#include <vector>

namespace mccl::actors {

struct collective_init {
  collective_args args;
  uint32_t comm_id = 0;
  std::string algorithm_name;
  algorithm_factory factory;
  std::vector<caf::actor> links; ///< by peer rank; null at our own rank
  caf::actor progress;
  caf::actor watchdog;
  std::chrono::milliseconds timeout{0};
  /// Shared with the links along with the op's route (receive in place).
  std::shared_ptr<landing_map> landing;
};

class collective_actor : public caf::event_based_actor, public op_session {
public:
  collective_actor(caf::actor_config& cfg, collective_init init);

  caf::behavior make_behavior() override;

  const char* name() const override { return "mccl.collective"; }

private:
  void emit(tx_request req) override;
  void report(errc code, std::string message) override;

  caf::actor progress_;
  caf::actor watchdog_;
  std::vector<caf::actor> links_;
  std::chrono::milliseconds timeout_;
};

} // namespace mccl::actors
