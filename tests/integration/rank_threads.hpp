#pragma once
// Ranks as threads of one test process: each thread gets its own
// communicator over loopback TCP, rendezvous through a shared in-memory store.

#include <mccl/mccl.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace mccl_test {

/// A communicator id no other group of this process uses.
inline uint32_t fresh_comm_id() {
  static std::atomic<uint32_t> next{1};
  return next++;
}

/// Runs fn(comm) on `world` threads, one communicator each, finalizes and
/// joins them. An exception inside a rank becomes a test failure naming it.
inline void run_ranks(mccl::runtime& rt, int world,
                      const std::function<mccl::config_overrides(int rank)>& overrides_of,
                      const std::function<void(mccl::communicator&)>& fn) {
  auto store = std::make_shared<mccl::memory_store>();
  uint32_t id = fresh_comm_id();
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        mccl::comm_options o;
        o.rank = r;
        o.world_size = world;
        o.store = store;
        o.comm_id = id;
        o.overrides = overrides_of(r);
        auto comm = rt.create_communicator(o);
        fn(comm);
        comm.finalize();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  for (auto& t : threads)
    t.join();
}

/// The same with one set of settings for every rank.
inline void run_ranks(mccl::runtime& rt, int world, const mccl::config_overrides& overrides,
                      const std::function<void(mccl::communicator&)>& fn) {
  run_ranks(rt, world, [&](int) { return overrides; }, fn);
}

} // namespace mccl_test
