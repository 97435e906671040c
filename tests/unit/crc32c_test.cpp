#include "transport/wire/crc32c.hpp"

#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

using mccl::crc32c;

namespace {

// Bitwise CRC32C (reflected polynomial 0x82F63B78), independent of ISA-L.
uint32_t reference(const uint8_t* p, std::size_t n, uint32_t crc = 0) {
  uint32_t reg = ~crc;
  for (std::size_t i = 0; i < n; ++i) {
    reg ^= p[i];
    for (int k = 0; k < 8; ++k)
      reg = (reg >> 1) ^ (0x82F63B78u & (0u - (reg & 1u)));
  }
  return ~reg;
}

std::vector<uint8_t> random_bytes(std::size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v)
    b = static_cast<uint8_t>(rng());
  return v;
}

} // namespace

TEST(crc32c, known_answer) {
  const char* s = "123456789";
  EXPECT_EQ(crc32c(s, std::strlen(s)), 0xE3069283u);
  EXPECT_EQ(reference(reinterpret_cast<const uint8_t*>(s), 9), 0xE3069283u);
  // RFC 3720 B.4: 32 bytes of zeros.
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
}

TEST(crc32c, empty_input) {
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
  EXPECT_EQ(crc32c(nullptr, 0, 0xDEADBEEF), 0xDEADBEEFu);
}

TEST(crc32c, matches_reference_at_every_length_and_alignment) {
  auto data = random_bytes(4096 + 16, 1);
  for (std::size_t off = 0; off < 8; ++off)
    for (std::size_t n : {1u, 2u, 3u, 7u, 8u, 15u, 16u, 63u, 64u, 255u, 256u, 1000u, 4096u})
      EXPECT_EQ(crc32c(data.data() + off, n), reference(data.data() + off, n))
        << "offset " << off << " len " << n;
}

TEST(crc32c, chaining_equals_whole) {
  auto data = random_bytes(1031, 2);
  uint32_t whole = crc32c(data.data(), data.size());
  for (std::size_t split = 0; split <= data.size(); ++split) {
    uint32_t first = crc32c(data.data(), split);
    ASSERT_EQ(crc32c(data.data() + split, data.size() - split, first), whole)
      << "split at " << split;
  }
  // Three pieces, too.
  uint32_t c = crc32c(data.data(), 100);
  c = crc32c(data.data() + 100, 500, c);
  c = crc32c(data.data() + 600, data.size() - 600, c);
  EXPECT_EQ(c, whole);
}

TEST(crc32c, any_flipped_bit_changes_it) {
  auto data = random_bytes(257, 3);
  uint32_t good = crc32c(data.data(), data.size());
  for (std::size_t i = 0; i < data.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      data[i] ^= static_cast<uint8_t>(1u << bit);
      ASSERT_NE(crc32c(data.data(), data.size()), good) << "byte " << i << " bit " << bit;
      data[i] ^= static_cast<uint8_t>(1u << bit);
    }
  EXPECT_EQ(crc32c(data.data(), data.size()), good);
}
