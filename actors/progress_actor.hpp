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
/// - At finalize the supervisor (supervisor_actor.hpp) stops it.

#include "actors/messages.hpp"

namespace mccl::actors {

/// Spawned by comm_core.
progress_handle spawn_progress_actor(caf::actor_system& sys, core_ref core);

} // namespace mccl::actors
