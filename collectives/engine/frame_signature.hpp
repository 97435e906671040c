#pragma once
/// An op's signature as it travels in every data frame's header (op_desc,
/// op_arg, op_count), shared by the op session, which checks it, and by a
/// link's receive-in-place, which lands only frames of the very op it
/// expects.

#include "collectives/engine/op.hpp"
#include "transport/wire/frame.hpp"

namespace mccl {

inline uint32_t pack_desc(const op_signature& s) {
  return static_cast<uint32_t>(s.kind) | static_cast<uint32_t>(s.type) << 8
         | static_cast<uint32_t>(s.op) << 16 | static_cast<uint32_t>(s.codec) << 24;
}

inline op_signature unpack_signature(const wire::frame_header& h) {
  op_signature s;
  s.kind = static_cast<op_kind>(h.op_desc & 0xff);
  s.type = static_cast<dtype>((h.op_desc >> 8) & 0xff);
  s.op = static_cast<redop>((h.op_desc >> 16) & 0xff);
  s.codec = static_cast<compression_kind>((h.op_desc >> 24) & 0xff);
  s.arg = h.op_arg;
  s.count = h.op_count;
  return s;
}

/// The signature a frame claims, to compare with `mine`. alltoallv blocks
/// carry their own size in the count (collective_io::send_block), so the
/// count is not compared for them.
inline op_signature frame_signature(const wire::frame_header& h, const op_signature& mine) {
  auto theirs = unpack_signature(h);
  if (mine.kind == op_kind::alltoall && mine.arg != 0)
    theirs.count = mine.count;
  return theirs;
}

} // namespace mccl
