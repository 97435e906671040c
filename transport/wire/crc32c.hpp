#pragma once
/// CRC32C (Castagnoli), the checksum carried by frames that set flag_crc.

#include <cstddef>
#include <cstdint>

namespace mccl {

/// Standard CRC32C of `len` bytes (reflected, init and final xor 0xFFFFFFFF),
/// chainable: crc32c(b, nb, crc32c(a, na)) == crc32c of a followed by b.
/// crc32c("123456789", 9) == 0xE3069283. `data` may be null when len == 0.
uint32_t crc32c(const void* data, std::size_t len, uint32_t crc = 0) noexcept;

} // namespace mccl
