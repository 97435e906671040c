#pragma once
/// Receive in place. Without it a channel reads every payload into pooled
/// staging memory and the algorithm copies it to its destination; for ops
/// that only copy what arrives (broadcast, gather, scatter, alltoall) that
/// second pass over every byte is pure overhead. An algorithm that knows
/// where a chunk will go, and that nothing reads or writes that region
/// until the chunk is delivered, adds the spot to its op's landing map
/// (collective_io::landing()) in start(). A channel then reads a matching
/// frame's payload straight into the destination and delivers a chunk whose
/// data already points there; the algorithm skips its copy when
/// `c.data == destination`. Anything else (a chunk that came before its
/// spot was added, a second copy of a chunk, a frame of another op) still
/// arrives in staging memory.
///
/// Every destination is written at most once, and never after the op
/// completed. The engine's leader (collectives/engine/engine.hpp) is the only
/// thread that touches a map: the op's start() adds the spots before any
/// frame can be claimed; chunks that arrived before the op started were
/// read into staging memory and are passed on after start(), which marks
/// their spots taken, so no later copy of them lands over what the
/// algorithm wrote meanwhile.

#include "collectives/engine/frame_signature.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

namespace mccl {

class landing_map final : public landing_spots {
public:
  explicit landing_map(op_signature expected) : expected_(expected) {}

  /// Chunk (step, chunk) from `peer`, exactly `bytes` long, may land at `dst`.
  void add(int peer, uint32_t step, uint32_t chunk, void* dst, std::size_t bytes) override;

  /// The algorithm's start() is over: no spot will be added any more.
  void close_additions() noexcept { adding_ = false; }

  /// For a channel about to read this frame's payload: where to read it,
  /// or nullptr to read it into staging memory. The spot is taken either way.
  uint8_t* claim(int peer, const wire::frame_header& h);

  /// A frame of this op read into staging memory before the op started.
  void passed_on(int peer, const wire::frame_header& h);

private:
  using key = std::tuple<int, uint32_t, uint32_t>;
  struct spot {
    uint8_t* dst = nullptr;
    std::size_t bytes = 0;
    bool taken = false;
  };

  op_signature expected_;
  std::map<key, spot> spots_;
  bool adding_ = true;
};

} // namespace mccl
