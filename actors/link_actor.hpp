#pragma once
/// The link actor: one per peer of a communicator; the lifecycle of the
/// connection to that peer. Its phases are behaviours:
///
///   connected --link lost--> resuming --resumed--> connected
///       |                        |  (aborted)          (not resumed:
///       +------- aborted --------+------> closed        exits with why)
///       |                        |
///       +---- peer failed -------+----> exits with the engine's finding
///
/// - connected: every half heartbeat interval it runs a pass of the engine
///   if no thread leads it: an idle communicator still sends heartbeats,
///   and still hears a peer's ABORT, BYE or EOF;
/// - resuming: the connection was lost and MCCL_RECONNECT_MS allows it to
///   be re-established: the resumer (transport/connection.hpp) dials or
///   accepts a new one, which goes to the engine's channel; when the
///   window ends without one, the actor exits with the reason;
/// - peer failed (connected or resuming): the engine found the peer lost
///   for good (reset, EOF, a protocol error, CRC recovery that gave up,
///   the liveness verdict) and says so; the actor exits with that error;
/// - closed: the communicator aborted; nothing is re-established.
///
/// Whenever the actor exits with an error, its supervisor
/// (supervisor_actor.hpp) revokes the communicator for the lost member.
/// Reading, writing and judging the peer is the engine's; the link actor
/// only decides when to look and what to do about a lost connection.

#include "actors/messages.hpp"

#include <chrono>

namespace mccl::actors {

struct link_init {
  core_ref core;
  int peer = 0;
  std::chrono::milliseconds heartbeat{1000};
  /// MCCL_RECONNECT_MS, capped at MCCL_TIMEOUT_MS; 0 or no resumer: never.
  std::chrono::milliseconds reconnect{0};
  std::shared_ptr<transport::resumer> resumer;
};

link_handle spawn_link_actor(caf::actor_system& sys, link_init init);

} // namespace mccl::actors
