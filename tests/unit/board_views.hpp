#pragma once
// Test helper: a host board in one process, each rank's view its own
// mapping of one segment (shm_test.cpp, board_stage_test.cpp).

#include "transport/shm/shm_board.hpp"
#include "transport/shm/shm_segment.hpp"

#include <unistd.h>

#include <memory>
#include <stdexcept>
#include <vector>

namespace mccl::transport {

/// Every rank's view of a board of `world` ranks, each its own mapping of
/// one segment opened through /proc, as other processes would.
struct board_views {
  shm_segment first;
  std::vector<std::unique_ptr<shm_board>> ranks;
  board_views(int world, std::size_t slot, std::size_t stage = 0) {
    auto bytes = shm_board::segment_bytes(world, slot, stage);
    first = shm_segment::create(bytes);
    for (int r = 0; r < world; ++r) {
      shm_segment seg;
      auto err = shm_segment::open(::getpid(), first.fd(), bytes, first.nonce(), seg);
      if (!err.empty())
        throw std::runtime_error(err);
      ranks.push_back(std::make_unique<shm_board>(std::move(seg), world, r, slot, stage));
    }
  }
};

} // namespace mccl::transport
