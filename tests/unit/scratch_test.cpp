// The scratch cache hands large blocks back out instead of faulting in new
// memory, never holds small ones, and keeps what a moved-from buffer owned.

#include "collectives/algorithms/scratch.hpp"

#include <gtest/gtest.h>

#include <cstring>

using mccl::scratch_buffer;
using mccl::scratch_cached_bytes;

TEST(Scratch, ALargeBlockIsReusedAfterRelease) {
  uint8_t* first = nullptr;
  {
    scratch_buffer a(3u << 20);
    ASSERT_NE(a.data(), nullptr);
    EXPECT_EQ(a.size(), 3u << 20);
    std::memset(a.data(), 1, a.size());
    first = a.data();
  }
  EXPECT_GE(scratch_cached_bytes(), 3u << 20);
  scratch_buffer b(2u << 20); // smaller: the cached block fits
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(b.size(), 2u << 20);
}

TEST(Scratch, ABlockTooSmallIsNotHandedOut) {
  { scratch_buffer a(1u << 20); }
  auto before = scratch_cached_bytes();
  scratch_buffer big(8u << 20);
  EXPECT_EQ(scratch_cached_bytes(), before); // nothing fit: nothing taken
  std::memset(big.data(), 2, big.size());
}

TEST(Scratch, SmallBlocksAreNotCached) {
  auto before = scratch_cached_bytes();
  { scratch_buffer small(4096); }
  EXPECT_EQ(scratch_cached_bytes(), before);
}

TEST(Scratch, MovingKeepsTheBlock) {
  scratch_buffer a(2u << 20);
  auto* p = a.data();
  scratch_buffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  scratch_buffer c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.size(), 2u << 20);
}
