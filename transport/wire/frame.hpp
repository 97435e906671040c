#pragma once
/// The wire format: a fixed 56-byte little-endian header followed by
/// payload_len payload bytes. Everything here is encoded and decoded byte by
/// byte, so the format does not depend on host endianness or struct layout.
/// Decoders validate every length before anything is allocated, so a hostile
/// or corrupt peer cannot make a receiver reserve memory it names.

#include <mccl/error.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mccl::wire {

/// 'M','C','C','L' as the first four bytes on the wire.
constexpr uint32_t magic = 0x4C43434D;
constexpr uint8_t protocol_version = 2;
constexpr std::size_t header_size = 56;
/// Hard cap on any payload, whatever the configuration says.
constexpr uint32_t max_payload_limit = 1u << 30;
/// Cap on hello, hello_ack, refuse, abort and bye payloads.
constexpr uint32_t max_control_payload = 1024;
/// Longest handshake token.
constexpr std::size_t max_token_size = 64;
/// Longest refuse/abort reason, in bytes.
constexpr std::size_t max_text_size = 1024;

enum class frame_kind : uint8_t {
  hello = 1,
  hello_ack = 2,
  refuse = 3,
  data = 4,
  abort = 5,
  heartbeat = 6,
  bye = 7,
  /// CRC recovery (MCCL_TRANSPORT_CRC): seq = how many CRC-checked data
  /// frames of this link arrived intact, in order (cumulative); the sender
  /// forgets its copies of them.
  crc_ack = 8,
  /// CRC recovery: seq = the link index of a data frame whose CRC32C did not
  /// match; the sender sends it again with flag_retransmit.
  crc_nack = 9,
  /// Revoke (communicator::revoke): aux = the rank that revoked, seq = the
  /// sender's revoke point (1 + the highest sequence number of a collective
  /// it completed before it stopped accepting ops), payload = the reason.
  /// Sent once to every peer by every rank; the data frames before it still
  /// count (collectives/engine/engine_revoke.cpp).
  revoke = 10,
};

/// Lower-case name ("hello", ...); "unknown" outside the enum.
const char* to_string(frame_kind kind) noexcept;

/// Header flag bits; decode_header rejects any other bit.
enum frame_flag : uint16_t {
  flag_crc = 1, ///< crc holds crc32c of the payload
  flag_p2p = 2, ///< a data frame of a point-to-point message: seq is the
                ///< sender's message number to this peer, aux the tag
  flag_ack_request = 4, ///< the sender receives nothing in this op: confirm
                        ///< that the op matches (see collective_actor)
  flag_ack = 8,         ///< that confirmation: an empty data frame
  flag_retransmit = 16, ///< a CRC-checked data frame sent again after a crc_nack
};

/// Decoded header. The meaning of aux, seq, step and chunk is up to the kind.
struct frame_header {
  frame_kind kind = frame_kind::data;
  uint16_t flags = 0;
  uint32_t comm_id = 0;
  uint32_t aux = 0;
  uint64_t seq = 0;
  uint32_t step = 0;
  uint32_t chunk = 0;
  uint32_t payload_len = 0;
  /// With flag_crc: crc32c of the encoded header (crc field zero) followed
  /// by the payload, so a flipped header bit is caught too (frame_crc()).
  uint32_t crc = 0;
  /// Data frames: the op's signature (see collectives/engine/op.hpp), so a rank
  /// that issued a different op at this seq is detected at the first frame.
  /// For point-to-point frames op_count is the message's total bytes.
  uint64_t op_count = 0;
  uint32_t op_desc = 0; ///< kind | dtype << 8 | redop << 16 | compression << 24
  uint32_t op_arg = 0;
};

// Layout: magic u32 @0, version u8 @4, kind u8 @5, flags u16 @6,
// comm_id u32 @8, aux u32 @12, seq u64 @16, step u32 @24, chunk u32 @28,
// payload_len u32 @32, crc u32 @36, op_count u64 @40, op_desc u32 @48,
// op_arg u32 @52.

/// Writes header_size bytes to out; the version byte is protocol_version.
void encode_header(const frame_header& h, uint8_t* out) noexcept;

enum class decode_status : uint8_t {
  ok,
  need_more,
  bad_magic,
  bad_version,
  bad_kind,
  bad_flags,
  too_large,
};

/// Lower-case name ("ok", "need_more", ...).
const char* to_string(decode_status status) noexcept;

/// header holds every field read from the bytes whenever a full header was
/// available, also on failure (for logging); reason is empty on ok.
struct decode_result {
  decode_status status;
  frame_header header;
  std::string reason;
};

/// Validates a header before anything is allocated: magic, version, kind,
/// flags (unknown bits rejected) and payload_len. Data frames may carry up to
/// min(max_payload, max_payload_limit) bytes; control frames up to
/// max_control_payload regardless of max_payload (so a small data chunk
/// setting cannot break handshakes or abort reasons); heartbeat exactly 0.
/// need_more when fewer than header_size bytes are available. reason names
/// the field and the bad value.
decode_result decode_header(const uint8_t* in, std::size_t available,
                            uint32_t max_payload) noexcept;

/// The CRC32C a frame with flag_crc carries: over the header as encoded with
/// crc = 0, then the payload.
uint32_t frame_crc(const frame_header& h, const uint8_t* payload, std::size_t len) noexcept;

/// Handshake payload (kind hello, sent by the dialing side; hello_ack
/// carries the same fields back). Layout: from_rank u32, to_rank u32,
/// world_size u32, token_len u16, then exactly token_len token bytes.
struct hello {
  uint32_t from_rank = 0;
  uint32_t to_rank = 0;
  uint32_t world_size = 0;
  std::string token; ///< at most max_token_size bytes
};

/// Throws mccl::error(invalid_argument) for a token over max_token_size or
/// ranks outside [0, world_size).
std::vector<uint8_t> encode_hello(const hello& h);

/// nullopt, with *reason set when reason is not null, on a truncated,
/// oversized or inconsistent payload. Never reads past p + len.
std::optional<hello> decode_hello(const uint8_t* p, std::size_t len, std::string* reason);

/// refuse and abort payloads: the reason's UTF-8 bytes, nothing else. Never
/// fails, because an abort must still go out: bytes that are not valid UTF-8
/// become '?', and text over max_text_size is cut after the last whole
/// sequence that fits.
std::vector<uint8_t> encode_text(const std::string& text);

/// nullopt, with *reason set when reason is not null, when len exceeds
/// max_text_size or the bytes are not valid UTF-8.
std::optional<std::string> decode_text(const uint8_t* p, std::size_t len, std::string* reason);

/// Beside the error code in an ABORT's step field: the abort revokes the
/// communicator (its origin's supervisor revoked it for a lost member), so
/// every rank that reads it marks the communicator revoked before its ops
/// fail. Also in abort_note::code, the note beside a shared-memory stream.
constexpr uint32_t abort_revokes = 0x100;

/// The error code an ABORT frame carries in its step field, so peers report
/// the same kind of failure as its origin; errc::aborted if it is unknown.
inline errc abort_code(const frame_header& h) noexcept {
  auto code = h.step & ~abort_revokes;
  return code > 0 && code <= static_cast<uint32_t>(errc::revoked) ? static_cast<errc>(code) : errc::aborted;
}

/// The ABORT revokes the communicator (abort_revokes).
inline bool abort_revokes_comm(const frame_header& h) noexcept { return (h.step & abort_revokes) != 0; }

} // namespace mccl::wire
