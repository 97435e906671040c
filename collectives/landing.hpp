#pragma once
/// Receive in place. Without it a link reads every payload into pooled
/// staging memory and the algorithm copies it to its destination; for ops
/// that only copy what arrives (broadcast, gather, scatter, alltoall) that
/// second pass over every byte is pure overhead. An algorithm that knows
/// where a chunk will go, and that nothing reads or writes that region
/// until the chunk is delivered, adds the spot to its op's landing map
/// (collective_io::landing()) in start(). A link then reads a matching
/// frame's payload straight into the destination and delivers a chunk whose
/// data already points there; the algorithm skips its copy when
/// `c.data == destination`. Anything else (a chunk that came before its
/// spot was added, a second copy of a chunk, a frame of another op) still
/// arrives in staging memory.
///
/// Every destination is written at most once, and never after the op
/// completed: the map is shared before any frame of the op can be
/// delivered (the progress actor hands it to the links with the op's
/// route), so a link records each frame it passes on; a spot whose chunk
/// already went by in staging memory is never claimed. Links and the
/// algorithm run on different threads, hence the mutex; an op whose
/// algorithm adds no spot pays one lock per frame until its start() ends.

#include "collectives/frame_signature.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

namespace mccl {

class landing_map {
public:
  explicit landing_map(op_signature expected) : expected_(expected) {}

  /// Chunk (step, chunk) from `peer`, exactly `bytes` long, may land at `dst`.
  void add(int peer, uint32_t step, uint32_t chunk, void* dst, std::size_t bytes);

  /// The algorithm's start() is over: no spot will be added any more.
  void close_additions();

  /// For a link about to read this frame's payload: where to read it, or
  /// nullptr to read it into staging memory. Records the frame either way.
  uint8_t* claim(int peer, const wire::frame_header& h);

  /// For a link passing on a frame it read before it knew this map.
  void passed_on(int peer, const wire::frame_header& h);

private:
  using key = std::tuple<int, uint32_t, uint32_t>;
  struct spot {
    uint8_t* dst = nullptr;
    std::size_t bytes = 0;
    bool taken = false;
  };

  std::mutex mutex_;
  op_signature expected_;
  std::map<key, spot> spots_;
  std::set<key> passed_;    ///< frames seen while spots could still be added
  bool adding_ = true;
};

} // namespace mccl
