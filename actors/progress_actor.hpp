#pragma once
/// The progress actor: one per communicator.
///
/// - It is the communicator's background driver on CAF workers: for ops
///   larger than MCCL_OP_THREAD_BYTES, and for every op nobody waits for
///   when the op thread is off (MCCL_OP_THREAD_BYTES=0), it leads the
///   engine in short turns. While bytes move it comes back through its own
///   mailbox (never blocking a worker); when nothing moves for MCCL_SPIN_US
///   it parks: the connections wake it when ready (the readiness monitor,
///   or the simulated network's delivery), a timer when a heartbeat is due.
/// - It hears what the engine decided for the whole communicator: an abort
///   (the link actors then stop re-establishing connections) and a lost
///   connection (its link actor re-establishes it).
/// - At finalize it stops the link actors, then itself.

#include "actors/messages.hpp"

#include <vector>

namespace mccl::actors {

/// Spawned by comm_core once the links exist.
progress_handle spawn_progress_actor(caf::actor_system& sys, core_ref core, std::vector<link_handle> links);

} // namespace mccl::actors
