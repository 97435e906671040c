#pragma once
/// The supervisor: one per communicator, the root of its actors.
///
/// - It is linked to every link actor, and a link that exits with an error
///   is a lost member: the supervisor revokes the communicator
///   (engine::post_member_lost). Every op in flight fails naming the peer
///   and why, and every peer gets an ABORT that revokes the communicator
///   there too. A link exits with an error when the engine found its peer
///   lost (reset, EOF, a protocol error, CRC recovery that gave up, the
///   liveness verdict; the engine marked the communicator revoked already,
///   so a caller whose op fails reads revoked() true), when its connection
///   was not re-established within MCCL_RECONNECT_MS, or when it failed
///   otherwise (an exception; then the link is named). Each exit is counted
///   (metrics_summary::lost_links) and logged with the epoch. It runs on
///   the communicator's driving unit whoever sends to it (driven_actor.hpp):
///   the leader that found the loss runs the link's exit and this decision
///   right after its pass. The engine revokes by itself when no answer came
///   within supervisor_window (no supervisor heard of it: the link actor
///   was gone).
/// - It performs the revokes the API asks for (revoke_atom) and keeps the
///   membership a membership change decided (members_atom: epoch and
///   members), which comm_core publishes for the status page.
/// - It hears what the engine decided for the whole communicator: an abort
///   (the links stop re-establishing connections) and a lost connection
///   (the peer's link re-establishes it, or exits trying).
/// - It monitors the op actors: one that dies with an error aborts the
///   communicator.
/// - At finalize it stops the links, then the progress actor, then itself.

#include "actors/driving_unit.hpp"
#include "actors/messages.hpp"

#include <vector>

namespace mccl::actors {

/// Spawned by comm_core once the links and the progress actor exist, on
/// the communicator's driving unit (owned by a shared_ptr), where it runs
/// whoever messages it (driven_actor.hpp).
supervisor_handle spawn_supervisor_actor(driving_unit& unit, core_ref core, std::vector<link_handle> links,
                                         progress_handle progress);

} // namespace mccl::actors
