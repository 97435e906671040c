#include "transport/handshake.hpp"

namespace mccl::transport {

bool tokens_equal(const std::string& a, const std::string& b) noexcept {
  if (a.size() != b.size())
    return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string vet_hello(const handshake_expectations& o, const wire::frame_header& h,
                      const uint8_t* payload, std::size_t len, const std::vector<bool>& connected,
                      wire::hello& out) {
  if (h.kind != wire::frame_kind::hello)
    return std::string("expected a hello frame, got ") + wire::to_string(h.kind);
  if (h.comm_id != o.comm_id)
    return "communicator id " + std::to_string(h.comm_id) + " does not match "
           + std::to_string(o.comm_id);
  std::string why;
  auto hi = wire::decode_hello(payload, len, &why);
  if (!hi)
    return "malformed hello: " + why;
  if (!tokens_equal(hi->token, o.token))
    return "wrong job token (MCCL_JOB_TOKEN differs, or the peer belongs to another job)";
  if (hi->world_size != static_cast<uint32_t>(o.world))
    return "world size " + std::to_string(hi->world_size) + " does not match "
           + std::to_string(o.world);
  if (hi->to_rank != static_cast<uint32_t>(o.rank))
    return "addressed to rank " + std::to_string(hi->to_rank) + ", this is rank "
           + std::to_string(o.rank);
  if (hi->from_rank >= static_cast<uint32_t>(o.world))
    return "rank " + std::to_string(hi->from_rank) + " is outside the world of "
           + std::to_string(o.world);
  if (hi->from_rank <= static_cast<uint32_t>(o.rank))
    return "rank " + std::to_string(hi->from_rank) + " must not dial rank "
           + std::to_string(o.rank) + " (lower ranks are dialled by higher ones)";
  if (hi->from_rank >= connected.size() || connected[hi->from_rank])
    return "duplicate connection from rank " + std::to_string(hi->from_rank);
  out = *hi;
  return {};
}

std::string vet_handshake_bytes(const handshake_expectations& expect, const uint8_t* data,
                                std::size_t len, const std::vector<bool>& connected,
                                wire::hello& out) {
  auto res = wire::decode_header(data, len, max_handshake_payload);
  if (res.status != wire::decode_status::ok)
    return "malformed frame: " + res.reason;
  std::size_t have = len - wire::header_size;
  if (have < res.header.payload_len)
    return "handshake payload of " + std::to_string(res.header.payload_len) + " bytes, "
           + std::to_string(have) + " arrived";
  return vet_hello(expect, res.header, data + wire::header_size, res.header.payload_len, connected,
                   out);
}

} // namespace mccl::transport
