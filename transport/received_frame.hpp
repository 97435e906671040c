#pragma once
/// A data frame as a channel (channel.hpp) hands it up: its decoded header
/// and its payload, which is either in pooled memory (`buffer`) or already
/// at its destination in the caller's memory (`landed`, receive in place:
/// collectives/engine/landing.hpp).

#include "transport/wire/frame.hpp"

#include <cstdint>
#include <memory>

namespace mccl::transport {

struct received_frame {
  int peer = -1;
  wire::frame_header header;
  std::shared_ptr<uint8_t> buffer; ///< pooled; payload at buffer.get()
  const uint8_t* landed = nullptr; ///< set instead of buffer when read in place

  const uint8_t* payload() const noexcept { return landed ? landed : buffer.get(); }
};

} // namespace mccl::transport
