#pragma once
/// The messages mccl's actors exchange. They never carry bulk bytes: data
/// travels as pointers into the caller's buffers (sends) or as shared
/// pointers to pooled staging memory (receives). None of these types ever
/// leaves the process, hence CAF_ALLOW_UNSAFE_MESSAGE_TYPE below.

#include "collectives/landing.hpp"
#include "collectives/op.hpp"
#include "config/error.hpp"
#include "transport/connection.hpp"
#include "transport/wire/frame.hpp"

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace mccl::actors {

/// How long a connection lost without BYE or ABORT waits for an ABORT frame
/// from another rank that explains it before the peer is blamed: a peer that
/// aborted because a third rank died may exit (closing its connections)
/// before its ABORT, or the first rank's, reaches us over another socket.
constexpr auto loss_grace = std::chrono::milliseconds(100);

// Atoms (at most 10 characters each).
using submit_atom = caf::atom_constant<caf::atom("submit")>;     // caller -> progress
using op_done_atom = caf::atom_constant<caf::atom("opdone")>;    // collective -> progress
using send_atom = caf::atom_constant<caf::atom("send")>;         // collective -> link
using sent_atom = caf::atom_constant<caf::atom("sent")>;         // link -> collective
using chunk_atom = caf::atom_constant<caf::atom("chunk")>;       // link -> collective
using route_atom = caf::atom_constant<caf::atom("route")>;       // progress -> link (with the landing map)
using unroute_atom = caf::atom_constant<caf::atom("unroute")>;   // progress -> link
using poll_atom = caf::atom_constant<caf::atom("poll")>;         // link -> itself (spinning)
using ready_atom = caf::atom_constant<caf::atom("ready")>;       // readiness monitor -> link (parked)
using link_down_atom = caf::atom_constant<caf::atom("linkdown")>; // link -> progress
using peer_abort_atom = caf::atom_constant<caf::atom("peerabort")>; // link -> progress
using abort_atom = caf::atom_constant<caf::atom("abort")>;       // anyone -> progress / progress -> link
using fail_atom = caf::atom_constant<caf::atom("fail")>;         // progress -> collective
using timeout_atom = caf::atom_constant<caf::atom("timeout")>;   // watchdog -> collective
using watch_atom = caf::atom_constant<caf::atom("watch")>;       // collective -> watchdog
using unwatch_atom = caf::atom_constant<caf::atom("unwatch")>;   // collective -> watchdog
using tick_atom = caf::atom_constant<caf::atom("tick")>;         // timers
using shutdown_atom = caf::atom_constant<caf::atom("shutdown")>; // finalize
using post_recv_atom = caf::atom_constant<caf::atom("postrecv")>; // progress -> link (p2p)
using unpost_atom = caf::atom_constant<caf::atom("unpost")>;      // progress -> link (p2p)
using returned_atom = caf::atom_constant<caf::atom("returned")>;  // inline path -> link (lease)
using resumed_atom = caf::atom_constant<caf::atom("resumed")>;    // link resumer -> link (MCCL_RECONNECT_MS)
using op_failed_atom = caf::atom_constant<caf::atom("opfailed")>; // inline path -> progress
using probe_atom = caf::atom_constant<caf::atom("probe")>;        // caller -> link (p2p)

/// A frame a collective wants sent: header plus a view of the payload, which
/// stays valid until the link reports it sent (sent_atom to `notify`).
struct tx_request {
  wire::frame_header header;
  const uint8_t* data = nullptr;
  std::size_t len = 0;
  int peer = -1;
};

/// A data frame a link received, routed to the collective actor of its seq.
struct rx_chunk {
  int peer = -1;
  wire::frame_header header;
  std::shared_ptr<uint8_t> buffer; ///< pooled; payload at buffer.get()
  /// Received in place (collectives/landing.hpp): the payload is already at
  /// its destination in the caller's buffer, and `buffer` is empty.
  const uint8_t* landed = nullptr;

  const uint8_t* payload() const noexcept { return landed ? landed : buffer.get(); }
};

/// How an op ended, reported by its collective actor to the progress actor.
struct op_result {
  uint64_t id = 0; ///< op_request::id
  errc code = errc::none;
  std::string message;
  std::string algorithm;
};

} // namespace mccl::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::actors::tx_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::actors::rx_chunk)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::actors::op_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::op_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<mccl::landing_map>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::errc)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<mccl::transport::connection>)
