#pragma once
/// The supervisor: one per communicator, the root of its actors.
///
/// - It is linked to every link actor. A link that cannot keep its peer
///   (the connection was lost and not re-established within
///   MCCL_RECONNECT_MS) exits with that as its reason; the supervisor's
///   exit handler reports the loss to the engine, which fails the ops that
///   involve the peer and aborts the communicator on every rank, naming
///   the peer and the reason. A link that fails otherwise (an exception, a
///   kill) aborts the communicator the same way, naming the link and why.
///   A link's failure never goes unheard, and no link reports a lost peer
///   to the engine itself.
/// - It hears what the engine decided for the whole communicator: an abort
///   (the links stop re-establishing connections) and a lost connection
///   (the peer's link re-establishes it, or exits trying).
/// - At finalize it stops the links, then the progress actor, then itself.

#include "actors/messages.hpp"

#include <vector>

namespace mccl::actors {

/// Spawned by comm_core once the links and the progress actor exist.
supervisor_handle spawn_supervisor_actor(caf::actor_system& sys, core_ref core, std::vector<link_handle> links,
                                         progress_handle progress);

} // namespace mccl::actors
