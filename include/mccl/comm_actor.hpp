#pragma once
/// The actor-native face of a communicator, for programs that run their own
/// CAF actors (a training server): a typed actor that the program's actors
/// message instead of calling blocking functions.
///
///   auto comm = rt.communicator_from_env();          // runtime rt(host_system)
///   mccl::comm_actor ca = mccl::spawn_comm_actor(system, comm);
///   self->monitor(ca);                              // an abort ends it: a down_msg
///   self->request(ca, timeout, mccl::allreduce_atom::value,
///                 mccl::buffer_view{grads.data(), grads.size(), mccl::dtype::float32},
///                 mccl::redop::sum)
///     .then([](const mccl::op_metrics& m) { ... },   // the op is done
///           [](caf::error& e) { ... });              // mccl::describe(e): why not
///
/// One request per op, answered once the op completed (with its metrics) or
/// failed (with a caf::error of category "mccl" whose code is mccl's errc
/// and whose context holds mccl's message: mccl::describe() renders it).
/// Requests are issued in the order they arrive, so the usual rule holds:
/// every rank issues the same collectives in the same order. The buffers a
/// view names are read and written in place, never copied: keep them alive
/// and untouched until the answer arrives.
///
/// When the communicator aborts (a peer lost, an op failed, an abort on any
/// rank) the actor answers what is pending with the error and exits with it
/// as its exit reason: an actor that monitors it gets a down_msg, one linked
/// to it an exit_msg, both naming the cause. It runs detached (a thread of
/// its own): a small op runs to its end inside the request, as it does for
/// any caller, without holding up CAF's workers; larger ops are moved by the
/// communicator's own threads and answered when they complete.

#include <mccl/communicator.hpp>
#include <mccl/error.hpp>
#include <mccl/types.hpp>
#include <mccl/work.hpp>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstddef>
#include <optional>
#include <string>

namespace mccl {

/// A caller's buffer: `count` elements of `type` at `data`.
struct buffer_view {
  void* data = nullptr;
  std::size_t count = 0;
  dtype type = dtype::float32;
};

using allreduce_atom = caf::atom_constant<caf::atom("allreduce")>;
using broadcast_atom = caf::atom_constant<caf::atom("broadcast")>;
using allgather_atom = caf::atom_constant<caf::atom("allgather")>;
using reduce_scatter_atom = caf::atom_constant<caf::atom("redscatter")>;
using barrier_atom = caf::atom_constant<caf::atom("barrier")>;

/// The messages a communicator's actor takes; each is answered with the
/// op's metrics or an error.
using comm_actor = caf::typed_actor<
  /// In place: `data` becomes the reduction over every rank.
  caf::replies_to<allreduce_atom, buffer_view, redop>::with<op_metrics>,
  /// In place: `data` becomes rank `root`'s.
  caf::replies_to<broadcast_atom, buffer_view, int>::with<op_metrics>,
  /// `send` (count n) to `recv` (count n x world), rank order.
  caf::replies_to<allgather_atom, buffer_view, buffer_view>::with<op_metrics>,
  /// `send` (count n x world) to `recv` (count n): this rank's block of
  /// the reduction.
  caf::replies_to<reduce_scatter_atom, buffer_view, buffer_view, redop>::with<op_metrics>,
  caf::replies_to<barrier_atom>::with<op_metrics>>;

/// Spawns the actor of `comm` in `system` (the actor system the program
/// runs, which the communicator's runtime may share: runtime(system)). The
/// actor keeps `comm` alive; finalize it after the actor is done.
comm_actor spawn_comm_actor(caf::actor_system& system, communicator comm);

/// The caf::error an mccl failure travels as (category "mccl").
caf::error to_caf_error(const error& e);

/// The mccl error inside `e`, if it is one (category "mccl").
std::optional<error> from_caf_error(const caf::error& e);

/// "mccl: peer_lost: allreduce seq 4 on rank 0 ...": mccl's own text for an
/// error of category "mccl", else CAF's rendering of it.
std::string describe(const caf::error& e);

} // namespace mccl

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::buffer_view)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::redop)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::op_metrics)
