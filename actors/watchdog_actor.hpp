#pragma once
/// The watchdog: one per runtime, the clock of every deadline and
/// liveness verdict. Communicators register while they live. On each tick
/// it asks every communicator's engine to check, after reading what its
/// channels hold (so bytes waiting in our own sockets never count as a
/// peer's silence):
///
/// - deadlines: an op running longer than MCCL_TIMEOUT_MS fails, naming its
///   sequence number, step and the peer it waits on; the communicator
///   aborts on every rank;
/// - liveness: a peer from which nothing at all arrived (data, heartbeats,
///   anything) for MCCL_HEARTBEAT_MS x MCCL_HEARTBEAT_MISSES is declared
///   dead. Every rank's engine sends heartbeats on directions idle for
///   half an interval, whichever thread drives it, and this tick's pass
///   (comm_core::check) runs one when nothing else does: a live rank
///   always sends.
///
/// Ticks come as often as the most demanding communicator asks
/// (comm_core::health_interval): with ops in flight, a fiftieth of the
/// shortest op timeout it was given, at least 20 ms and at most a quarter
/// heartbeat interval (an op fails at most that late); idle, every quarter
/// heartbeat interval; not at all once nothing is registered.

#include "actors/messages.hpp"

namespace mccl::actors {

watchdog_handle spawn_watchdog_actor(caf::actor_system& sys);

} // namespace mccl::actors
