// mccl's own threads carry names (actors/thread_name.hpp), so that top -H,
// perf and gdb tell a communicator's op thread and board thread from the
// program's threads.

#include "rank_threads.hpp"

#include <gtest/gtest.h>

#include <dirent.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

using mccl_test::run_ranks;

namespace {

/// How many threads of this process carry each name.
std::map<std::string, int> thread_names() {
  std::map<std::string, int> out;
  DIR* dir = ::opendir("/proc/self/task");
  if (!dir)
    return out;
  while (auto* e = ::readdir(dir)) {
    if (e->d_name[0] == '.')
      continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    ++out[name];
  }
  ::closedir(dir);
  return out;
}

} // namespace

TEST(ThreadNames, OpAndBoardThreadsCarryTheirNames) {
  ASSERT_EQ(thread_names().count("mccl-op"), 0u) << "no communicator yet";
  mccl::runtime rt;
  mccl::config_overrides o;
  o.set("MCCL_CONNECT_TIMEOUT_MS", 10000);
  o.set("MCCL_INLINE_BYTES", "64K");
  o.set("MCCL_SHM_STAGE_BYTES", "1M");
  run_ranks(rt, 3, o, [](mccl::communicator& comm) {
    // 4 MiB on the board's stage: board_rs, which starts the board thread.
    std::vector<float> large(1 << 20, 1.0f);
    auto big = comm.allreduce(large.data(), large.size());
    big.wait();
    ASSERT_EQ(big.metrics().algorithm, "board_rs");
    ASSERT_EQ(large[4242], 3.0f);
    comm.barrier().wait();
    if (comm.rank() == 0) {
      auto names = thread_names();
      EXPECT_EQ(names["mccl-op"], 3) << "one op thread per communicator";
      EXPECT_EQ(names["mccl-board"], 3) << "one board thread per communicator that ran board_rs";
    }
    comm.barrier().wait();
  });
  auto after = thread_names();
  EXPECT_EQ(after["mccl-op"] + after["mccl-board"], 0) << "finalize joined them";
}
