#pragma once
/// The accepting side's check of an incoming handshake, kept apart from the
/// sockets so that it can be unit-tested and fuzzed on raw bytes.
///
/// A connection is accepted only when it opens with a well-formed hello of
/// this protocol version for this communicator, carrying the job's token,
/// this world size, this rank as its target and a higher rank of the world
/// as its sender that has not connected yet. Everything else is refused with
/// a reason that names the field (never the token's bytes).

#include "transport/wire/frame.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mccl::transport {

/// Largest payload a handshake frame may announce; checked before the
/// payload is read, so a stray cannot make the acceptor allocate more.
constexpr uint32_t max_handshake_payload = wire::max_control_payload;

/// What this rank expects of every peer that dials it.
struct handshake_expectations {
  int rank = 0;
  int world = 1;
  uint32_t comm_id = 0;
  std::string token;
};

/// Empty to accept, else why the hello is refused. `connected[r]` says
/// whether rank r already has a connection (a second one is a duplicate);
/// it must have `world` entries. On acceptance `out` holds the hello.
std::string vet_hello(const handshake_expectations& expect, const wire::frame_header& h,
                      const uint8_t* payload, std::size_t len, const std::vector<bool>& connected,
                      wire::hello& out);

/// The whole check on the bytes a dialer sent (header then payload), as the
/// acceptor sees them: the header is decoded and bounded first, then the
/// payload vetted. For tests and the fuzz target; never reads past data+len.
std::string vet_handshake_bytes(const handshake_expectations& expect, const uint8_t* data,
                                std::size_t len, const std::vector<bool>& connected,
                                wire::hello& out);

/// A hello (and its hello_ack) whose header carries this in `aux` asks to
/// resume a link that was lost (MCCL_RECONNECT_MS): the rank that dialled
/// the link at first dials again. Fresh connections carry aux 0.
constexpr uint32_t resume_marker = 0x524D5352; // "RSMR" on the wire

/// The acceptor's check of a resume request: the same checks as vet_hello
/// (version, communicator, token, world, ranks, who dials whom), plus the
/// resume marker, and `resumable[r]` must say that the link to rank r is
/// waiting to be resumed (it was lost and its reconnect window is open);
/// anything else is refused with the reason. `resumable` has `world`
/// entries. On acceptance `out` holds the hello.
std::string vet_resume_hello(const handshake_expectations& expect, const wire::frame_header& h,
                             const uint8_t* payload, std::size_t len,
                             const std::vector<bool>& resumable, wire::hello& out);

/// vet_resume_hello on the raw bytes a dialer sent, as vet_handshake_bytes.
std::string vet_resume_bytes(const handshake_expectations& expect, const uint8_t* data,
                             std::size_t len, const std::vector<bool>& resumable,
                             wire::hello& out);

/// Compares two tokens in time that depends only on their lengths, so a
/// stray cannot learn the token byte by byte from how fast it is refused.
bool tokens_equal(const std::string& a, const std::string& b) noexcept;

} // namespace mccl::transport
