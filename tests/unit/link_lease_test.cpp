// The lease that hands a parked link's connection to the inline path and
// back (actors/link_lease.hpp).

#include "actors/link_lease.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

using mccl::actors::link_lease;

TEST(LinkLease, OnlyAnOfferedConnectionCanBeBorrowed) {
  link_lease lease;
  EXPECT_TRUE(lease.borrow()); // a new link has nothing to do
  lease.give_back();
  EXPECT_TRUE(lease.reclaim());
  EXPECT_FALSE(lease.borrow()); // held by its link
  lease.offer();
  EXPECT_TRUE(lease.borrow());
  EXPECT_FALSE(lease.borrow()); // one borrower at a time
  EXPECT_FALSE(lease.give_back()); // nobody asked for it meanwhile
  EXPECT_TRUE(lease.borrow());
}

TEST(LinkLease, LinkTakesAnIdleConnectionBackAtOnce) {
  link_lease lease;
  EXPECT_TRUE(lease.reclaim());
  EXPECT_TRUE(lease.reclaim()); // already held: nothing to do
  lease.offer();
  EXPECT_TRUE(lease.reclaim());
  EXPECT_FALSE(lease.borrow()); // held again
}

TEST(LinkLease, LinkThatNeedsALentConnectionIsPokedOnReturn) {
  link_lease lease;
  lease.offer();
  ASSERT_TRUE(lease.borrow());
  EXPECT_FALSE(lease.reclaim());
  EXPECT_FALSE(lease.reclaim()); // asking twice is one request
  EXPECT_TRUE(lease.give_back()); // the borrower must poke the link
  EXPECT_TRUE(lease.reclaim());
}

TEST(LinkLease, ExactlyOneSideHoldsItUnderContention) {
  // A link reclaiming and re-offering against a borrower borrowing and
  // giving back: never both at once, and every wanted mark is delivered.
  link_lease lease;
  lease.offer();
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::atomic<bool> stop{false};
  std::atomic<int> pokes{0};
  std::thread borrower([&] {
    for (int i = 0; i < 200000; ++i) {
      if (!lease.borrow())
        continue;
      if (inside.fetch_add(1) != 0)
        overlap = true;
      inside.fetch_sub(1);
      if (lease.give_back())
        pokes.fetch_add(1);
    }
    stop = true;
  });
  int refused = 0;
  while (!stop) {
    if (!lease.reclaim()) {
      ++refused;
      // Wait for the poke, as the link actor would.
      while (pokes.load() < refused && !stop)
        std::this_thread::yield();
      continue;
    }
    if (inside.fetch_add(1) != 0)
      overlap = true;
    inside.fetch_sub(1);
    lease.offer();
  }
  borrower.join();
  EXPECT_FALSE(overlap);
  EXPECT_EQ(pokes.load(), refused);
}
