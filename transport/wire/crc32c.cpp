#include "transport/wire/crc32c.hpp"

#include <isa-l/crc.h>

namespace mccl {

namespace {

// crc32_iscsi takes an int length; stay far below INT_MAX.
constexpr std::size_t max_piece = std::size_t{1} << 29;

} // namespace

uint32_t crc32c(const void* data, std::size_t len, uint32_t crc) noexcept {
  // ISA-L works on the raw register (no pre/post inversion), so the standard
  // inversions happen here; that is also what makes the result chainable.
  // It only reads the buffer despite the non-const parameter.
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  uint32_t reg = ~crc;
  while (len > 0) {
    std::size_t piece = len < max_piece ? len : max_piece;
    reg = crc32_iscsi(p, static_cast<int>(piece), reg);
    p += piece;
    len -= piece;
  }
  return ~reg;
}

} // namespace mccl
