#pragma once
/// The control plane's actors and the messages they take, as CAF typed
/// actor interfaces: the compiler checks every message sent to them. (The
/// op actors, which host each op's state machine and take its chunk
/// messages, are in op_actor.hpp.) No message carries bulk bytes (a chunk
/// message carries a view of them). None of
/// these types leaves the process, hence CAF_ALLOW_UNSAFE_MESSAGE_TYPE
/// below.
///
///   supervisor (one per communicator, supervisor_actor.hpp, a driven
///     actor of the driving unit: driven_actor.hpp): linked to
///     the link actors; a link that exits with an error is a lost member,
///     and the supervisor revokes the communicator: the ops in flight fail
///     naming the peer, and every peer's communicator is revoked too;
///     performs the revokes the API asks for and keeps the membership
///     (epoch, members) membership changes tell it; monitors the op
///     actors, and aborts when one dies with an error; hears of aborts and
///     lost connections and tells the links; ends the communicator's
///     actors at finalize;
///   progress (one per communicator, progress_actor.hpp): drives the
///     engine on CAF workers when no thread does;
///   link (one per peer, link_actor.hpp, a driven actor too): keeps the
///     peer's link (its channel: frames, heartbeats, CRC NACK and
///     retransmit, resume; the chunks held for ops not started yet; the
///     peer's point-to-point messages, matched to receives by tag),
///     which the engine's leader moves through its reference; and the
///     connection's lifecycle: re-establishing a lost connection, exiting
///     with the reason when it cannot or when the engine found its peer
///     lost;
///   watchdog (one per runtime, watchdog_actor.hpp): the clock of op
///     deadlines, liveness verdicts and an idle communicator's
///     heartbeats;
///   metrics (one per runtime, metrics_actor.hpp): folds the ops its
///     communicators finished, sent to it in batches, into the process's
///     metrics.

#include <mccl/error.hpp>
#include "collectives/engine/peer_link.hpp"
#include "collectives/observability/metrics_registry.hpp"
#include "transport/connection.hpp"

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mccl {
class engine;
}

namespace mccl::actors {

class comm_core;

// Atoms (at most 10 characters each).
using drive_atom = caf::atom_constant<caf::atom("drive")>;        // anyone -> progress
using aborted_atom = caf::atom_constant<caf::atom("aborted")>;    // engine -> supervisor -> links
using link_lost_atom = caf::atom_constant<caf::atom("linklost")>; // engine -> supervisor -> link
using resumed_atom = caf::atom_constant<caf::atom("resumed")>;    // resumer -> link
using tick_atom = caf::atom_constant<caf::atom("tick")>;          // timers (watchdog, progress)
using watch_atom = caf::atom_constant<caf::atom("watch")>;        // communicator -> watchdog
using unwatch_atom = caf::atom_constant<caf::atom("unwatch")>;    // communicator -> watchdog
using shutdown_atom = caf::atom_constant<caf::atom("shutdown")>;  // finalize
using supervise_atom = caf::atom_constant<caf::atom("supervise")>; // op actors -> supervisor
using peer_failed_atom = caf::atom_constant<caf::atom("peerfail")>; // engine -> link
using revoke_atom = caf::atom_constant<caf::atom("revoke")>;        // communicator -> supervisor
using members_atom = caf::atom_constant<caf::atom("members")>;      // membership change -> supervisor
using finished_atom = caf::atom_constant<caf::atom("finished")>;    // metrics feed -> metrics

/// The communicator whose engine an actor serves; actors hold it weakly,
/// so a finalized communicator is never kept alive by its actors.
using core_ref = std::weak_ptr<comm_core>;

/// The engine's pass gives a link its turn (engine::move_link): the link
/// actor's handler reads its channel, each arriving frame becoming a chunk
/// message to its op actor (or held for an op not started yet, or matched
/// to a receive), and writes what is queued. One value of a type of its
/// own, no atom (as the op actors' messages): sent on every pass, handled
/// in place (link_channel.hpp).
struct link_turn {
  engine* eng = nullptr;
  /// Set to whether bytes moved (link_channels keeps it: a turn that went
  /// through the mailbox may run after the pass that sent it).
  bool* moved = nullptr;
};

/// An op actor hands its peer's link a frame (engine::send_frame): the
/// link actor's handler puts it on its channel's send queue
/// (engine::queue_chunk), which its turns write. A descriptor with a view
/// of the payload, never a copy of it; sent from the op's handler and
/// handled in place, or right after the link's turn when that runs
/// (link_channel.hpp).
struct chunk_out {
  engine* eng = nullptr;
  outgoing_chunk chunk;
};

using link_handle = caf::typed_actor<
  caf::reacts_to<link_turn>,
  caf::reacts_to<chunk_out>,
  /// The engine lost the connection; re-establish it (MCCL_RECONNECT_MS).
  caf::reacts_to<link_lost_atom, std::string>,
  /// The resumer's answer: a new connection, or null and why not.
  caf::reacts_to<resumed_atom, transport::connection_ptr, std::string>,
  /// The communicator aborted: nothing is resumed any more.
  caf::reacts_to<aborted_atom>,
  /// The engine found the peer lost for good (reset, EOF, a protocol
  /// error, CRC recovery that gave up, the liveness verdict): the link
  /// exits with that error (to_caf_error), and its supervisor revokes.
  caf::reacts_to<peer_failed_atom, errc, std::string>,
  caf::replies_to<shutdown_atom>::with<bool>>;

using progress_handle = caf::typed_actor<
  /// Move the engine's ops (the communicator's background driver when its
  /// op thread is off or an op is larger than MCCL_OP_THREAD_BYTES).
  caf::reacts_to<drive_atom>,
  /// Its own timer while parked: a heartbeat or a grace period is due.
  caf::reacts_to<tick_atom>,
  /// Finalize (from the supervisor): it stops.
  caf::replies_to<shutdown_atom>::with<bool>>;

using supervisor_handle = caf::typed_actor<
  /// A new op actor (op_actor.hpp) to monitor: one that dies with an error
  /// aborts the communicator.
  caf::reacts_to<supervise_atom, caf::actor>,
  /// The engine aborted: code, why, and the rank that began it.
  caf::reacts_to<aborted_atom, errc, std::string, int>,
  /// The engine lost the connection to a peer (to be resumed).
  caf::reacts_to<link_lost_atom, int, std::string>,
  /// Revoke the communicator (communicator::revoke), with the caller's
  /// reason: the supervisor posts it to the engine; once it answers,
  /// revoked() holds.
  caf::replies_to<revoke_atom, std::string>::with<bool>,
  /// A membership change decided: this communicator is the group at
  /// `epoch` and, by rank, its members' ranks in the communicator it was
  /// made from. False (and nothing changes) for the epoch it has already.
  caf::replies_to<members_atom, uint64_t, std::vector<int>>::with<bool>,
  /// Finalize: the link actors stop, then the progress actor, then the
  /// supervisor.
  caf::replies_to<shutdown_atom>::with<bool>>;

using watchdog_handle = caf::typed_actor<
  caf::reacts_to<watch_atom, uint64_t, core_ref>,
  caf::reacts_to<unwatch_atom, uint64_t>,
  caf::reacts_to<tick_atom>,
  caf::reacts_to<shutdown_atom>>;

using finished_batch_ptr = std::shared_ptr<metrics_registry::finished_batch>;

using metrics_handle = caf::typed_actor<
  /// Finished ops to fold (one batch per metrics_feed::batch_ops ops).
  caf::reacts_to<finished_atom, finished_batch_ptr>,
  caf::reacts_to<shutdown_atom>>;

} // namespace mccl::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::errc)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::transport::connection_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::actors::core_ref)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::actors::link_turn)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::actors::chunk_out)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::actors::finished_batch_ptr)
