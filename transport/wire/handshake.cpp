#include "transport/wire/handshake.hpp"

namespace mccl::transport {

bool tokens_equal(const std::string& a, const std::string& b) noexcept {
  if (a.size() != b.size())
    return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

namespace {

/// What a fresh hello and a resume request share: everything but the
/// marker and the connected/resumable test. Empty when `hi` passes.
std::string vet_common(const handshake_expectations& o, const wire::frame_header& h,
                       const uint8_t* payload, std::size_t len, wire::hello& hi) {
  if (h.kind != wire::frame_kind::hello)
    return std::string("expected a hello frame, got ") + wire::to_string(h.kind);
  if (h.comm_id != o.comm_id)
    return "communicator id " + std::to_string(h.comm_id) + " does not match "
           + std::to_string(o.comm_id);
  std::string why;
  auto parsed = wire::decode_hello(payload, len, &why);
  if (!parsed)
    return "malformed hello: " + why;
  if (!tokens_equal(parsed->token, o.token))
    return "wrong job token (MCCL_JOB_TOKEN differs, or the peer belongs to another job)";
  if (parsed->world_size != static_cast<uint32_t>(o.world))
    return "world size " + std::to_string(parsed->world_size) + " does not match "
           + std::to_string(o.world);
  if (parsed->to_rank != static_cast<uint32_t>(o.rank))
    return "addressed to rank " + std::to_string(parsed->to_rank) + ", this is rank "
           + std::to_string(o.rank);
  if (parsed->from_rank >= static_cast<uint32_t>(o.world))
    return "rank " + std::to_string(parsed->from_rank) + " is outside the world of "
           + std::to_string(o.world);
  if (parsed->from_rank <= static_cast<uint32_t>(o.rank))
    return "rank " + std::to_string(parsed->from_rank) + " must not dial rank "
           + std::to_string(o.rank) + " (lower ranks are dialled by higher ones)";
  hi = *parsed;
  return {};
}

} // namespace

std::string vet_hello(const handshake_expectations& o, const wire::frame_header& h,
                      const uint8_t* payload, std::size_t len, const std::vector<bool>& connected,
                      wire::hello& out) {
  wire::hello hi;
  auto why = vet_common(o, h, payload, len, hi);
  if (!why.empty())
    return why;
  if (h.aux == resume_marker)
    return "rank " + std::to_string(hi.from_rank)
           + " asks to resume a link that was never established";
  if (hi.from_rank >= connected.size() || connected[hi.from_rank])
    return "duplicate connection from rank " + std::to_string(hi.from_rank);
  out = hi;
  return {};
}

std::string vet_resume_hello(const handshake_expectations& o, const wire::frame_header& h,
                             const uint8_t* payload, std::size_t len,
                             const std::vector<bool>& resumable, wire::hello& out) {
  wire::hello hi;
  auto why = vet_common(o, h, payload, len, hi);
  if (!why.empty())
    return why;
  if (h.aux != resume_marker)
    return "rank " + std::to_string(hi.from_rank)
           + " sent a fresh hello, but every link of this communicator is established"
             " (only a resume request may follow)";
  if (hi.from_rank >= resumable.size() || !resumable[hi.from_rank])
    return "rank " + std::to_string(hi.from_rank)
           + " asks to resume its link, but that link is not waiting to be resumed"
             " (it is up, already resumed, or its reconnect window is over)";
  out = hi;
  return {};
}

namespace {

/// Decodes a whole handshake frame held in memory: its header, checked and
/// bounded, and a payload that must have fully arrived. "" when it did.
std::string split_handshake(const uint8_t* data, std::size_t len, wire::frame_header& header) {
  auto res = wire::decode_header(data, len, max_handshake_payload);
  if (res.status != wire::decode_status::ok)
    return "malformed frame: " + res.reason;
  std::size_t have = len - wire::header_size;
  if (have < res.header.payload_len)
    return "handshake payload of " + std::to_string(res.header.payload_len) + " bytes, "
           + std::to_string(have) + " arrived";
  header = res.header;
  return {};
}

} // namespace

std::string vet_resume_bytes(const handshake_expectations& expect, const uint8_t* data,
                             std::size_t len, const std::vector<bool>& resumable,
                             wire::hello& out) {
  wire::frame_header h;
  auto err = split_handshake(data, len, h);
  if (!err.empty())
    return err;
  return vet_resume_hello(expect, h, data + wire::header_size, h.payload_len, resumable, out);
}

std::string vet_handshake_bytes(const handshake_expectations& expect, const uint8_t* data,
                                std::size_t len, const std::vector<bool>& connected,
                                wire::hello& out) {
  wire::frame_header h;
  auto err = split_handshake(data, len, h);
  if (!err.empty())
    return err;
  return vet_hello(expect, h, data + wire::header_size, h.payload_len, connected, out);
}

} // namespace mccl::transport
