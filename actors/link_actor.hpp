#pragma once
/// The link actor: one per peer of a communicator. It moves the peer's
/// channel and keeps the connection's lifecycle.
///
/// Its turn: every pass of the engine that visits the peer's link, when the
/// link has something to do (channel::has_work), sends it a link_turn
/// (messages.hpp), handled in place (link_channel.hpp), whose
/// handler runs engine::move_link: the channel writes what is queued and
/// reads, each arriving frame becoming a chunk message to the op actor of
/// its (communicator, sequence), dispatched in place inside this handler,
/// or held for an op not started yet, or matched to a receive. So every
/// pass reads and writes the channel in the link actor's handler only, on
/// the engine's leader.
///
/// Its chunks: an op actor hands it each frame for the peer in a chunk
/// message (chunk_out), whose handler puts the frame on the channel's send
/// queue (engine::queue_chunk) for the turns to write; sent from the op's
/// handler and handled in place inside it, or right after this actor's
/// turn when the op's handler runs inside it (link_channel.hpp).
///
/// The lifecycle's phases are behaviours (each takes its turn the same
/// way):
///
///   connected --link lost--> resuming --resumed--> connected
///       |                        |  (aborted)          (not resumed:
///       +------- aborted --------+------> closed        exits with why)
///       |                        |
///       +---- peer failed -------+----> exits with the engine's finding
///
/// - connected: the channel is the engine's to move; its heartbeats and
///   what an idle communicator hears (a peer's ABORT, BYE or EOF) come
///   from the passes the watchdog's clock runs (watchdog_actor.hpp: every
///   quarter heartbeat interval while idle), so the link needs no timer;
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
///
/// Its state keeps the peer's link (collectives/engine/peer_link.hpp: the
/// channel, with heartbeats, CRC NACK and retransmit and resume; the chunks
/// held for ops not started yet; the peer's point-to-point messages, matched
/// to this rank's receives by tag); the engine reaches the peer
/// through its reference to that link, in its leader only, and judges it
/// there. It is a driven actor (driven_actor.hpp): whoever sends it a
/// message (the engine's listener, the supervisor, the resumer), it runs on
/// the communicator's driving unit, drained by the engine's leader after
/// its pass (comm_core.hpp, "Who drives").

#include "actors/driving_unit.hpp"
#include "actors/messages.hpp"
#include "collectives/engine/peer_link.hpp"

#include <chrono>

namespace mccl::actors {

struct link_init {
  core_ref core;
  int peer = 0;
  /// MCCL_RECONNECT_MS, capped at MCCL_TIMEOUT_MS; 0 or no resumer: never.
  std::chrono::milliseconds reconnect{0};
  std::shared_ptr<transport::resumer> resumer;
  /// The peer's link, kept while the actor lives.
  std::shared_ptr<peer_link> link;
};

/// A link actor, and what dispatching to it in place needs.
struct link_actor_ref {
  link_handle handle;
  in_place_target target; ///< the actor itself (the handle keeps it)
};

/// Spawns it on `unit` (owned by a shared_ptr: driven_actor.hpp): its
/// first run is the unit's next drain.
link_actor_ref spawn_link_actor(driving_unit& unit, link_init init);

} // namespace mccl::actors
