#pragma once
/// Small helpers the algorithms share: element/byte arithmetic and the
/// checks every incoming chunk must pass before it touches a buffer.

#include "collectives/collective.hpp"
#include "collectives/schedule.hpp"

#include <string>

namespace mccl {

/// Elements per pipelining chunk for this op (at least 1).
inline std::size_t chunk_elems_for(const collective_args& a) {
  auto elem = dtype_size(a.op.type);
  auto n = a.chunk_bytes / elem;
  return n == 0 ? 1 : n;
}

/// "" when chunk c is exactly the expected one, else a description of what
/// is wrong (for a protocol_error).
inline std::string check_chunk(const incoming_chunk& c, int want_peer, uint32_t max_step,
                               std::size_t chunks_in_step, std::size_t want_len) {
  if (c.peer != want_peer)
    return "unexpected chunk from rank " + std::to_string(c.peer) + " (expected rank "
           + std::to_string(want_peer) + ")";
  if (c.step > max_step)
    return "chunk for step " + std::to_string(c.step) + " beyond the last step "
           + std::to_string(max_step);
  if (c.chunk >= chunks_in_step)
    return "chunk index " + std::to_string(c.chunk) + " beyond " + std::to_string(chunks_in_step)
           + " chunks of step " + std::to_string(c.step);
  if (c.len != want_len)
    return "chunk " + std::to_string(c.chunk) + " of step " + std::to_string(c.step) + " has "
           + std::to_string(c.len) + " bytes, expected " + std::to_string(want_len)
           + " (do all ranks pass the same count and dtype?)";
  return {};
}

} // namespace mccl
