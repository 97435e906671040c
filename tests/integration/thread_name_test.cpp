// mccl's own threads carry names (actors/helper_thread.hpp), so that top -H,
// perf and gdb tell a communicator's op thread and board thread from the
// program's threads, and run on MCCL_HELPER_CPUS when it is set.

#include "rank_threads.hpp"

#include <gtest/gtest.h>

#include <dirent.h>
#include <sched.h>

#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

using mccl_test::run_ranks;

namespace {

/// The threads of this process: name and /proc folder of each.
std::vector<std::pair<std::string, std::string>> threads() {
  std::vector<std::pair<std::string, std::string>> out;
  DIR* dir = ::opendir("/proc/self/task");
  if (!dir)
    return out;
  while (auto* e = ::readdir(dir)) {
    if (e->d_name[0] == '.')
      continue;
    std::string task = std::string("/proc/self/task/") + e->d_name;
    std::ifstream comm(task + "/comm");
    std::string name;
    std::getline(comm, name);
    out.emplace_back(name, task);
  }
  ::closedir(dir);
  return out;
}

/// How many threads of this process carry each name.
std::map<std::string, int> thread_names() {
  std::map<std::string, int> out;
  for (const auto& [name, task] : threads())
    ++out[name];
  return out;
}

/// Each thread of this process with `name`: its Cpus_allowed_list.
std::vector<std::string> cpus_of_threads(const std::string& name) {
  std::vector<std::string> out;
  for (const auto& [thread, task] : threads()) {
    if (thread != name)
      continue;
    std::ifstream status(task + "/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("Cpus_allowed_list:", 0) == 0)
        out.push_back(line.substr(line.find_first_not_of(" \t", 18)));
  }
  return out;
}

/// Three ranks in this process, each with an op thread, run a 4 MiB
/// allreduce on the board's stage (board_rs, which starts the board
/// thread); then `look` runs on rank 0 while every helper thread lives.
void with_helper_threads(mccl::config_overrides o, const std::function<void()>& look) {
  mccl::runtime rt;
  o.set("MCCL_CONNECT_TIMEOUT_MS", 10000);
  o.set("MCCL_INLINE_BYTES", "64K");
  o.set("MCCL_SHM_STAGE_BYTES", "1M");
  run_ranks(rt, 3, o, [&](mccl::communicator& comm) {
    std::vector<float> large(1 << 20, 1.0f);
    auto big = comm.allreduce(large.data(), large.size());
    big.wait();
    ASSERT_EQ(big.metrics().algorithm, "board_rs");
    ASSERT_EQ(large[4242], 3.0f);
    comm.barrier().wait();
    if (comm.rank() == 0)
      look();
    comm.barrier().wait();
  });
}

} // namespace

TEST(ThreadNames, OpAndBoardThreadsCarryTheirNames) {
  ASSERT_EQ(thread_names().count("mccl-op"), 0u) << "no communicator yet";
  with_helper_threads({}, [] {
    auto names = thread_names();
    EXPECT_EQ(names["mccl-op"], 3) << "one op thread per communicator";
    EXPECT_EQ(names["mccl-board"], 3) << "one board thread per communicator that ran board_rs";
  });
  auto after = thread_names();
  EXPECT_EQ(after["mccl-op"] + after["mccl-board"], 0) << "finalize joined them";
}

TEST(ThreadNames, HelperThreadsRunOnTheHelperCpus) {
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mine))
      last = c;
  ASSERT_GE(last, 0);
  mccl::config_overrides o;
  o.set("MCCL_HELPER_CPUS", std::to_string(last));
  with_helper_threads(o, [&] {
    EXPECT_EQ(cpus_of_threads("mccl-board"), std::vector<std::string>(3, std::to_string(last)));
    EXPECT_EQ(cpus_of_threads("mccl-op"), std::vector<std::string>(3, std::to_string(last)));
    cpu_set_t now;
    ASSERT_EQ(::sched_getaffinity(0, sizeof now, &now), 0);
    EXPECT_TRUE(CPU_EQUAL(&now, &mine)) << "the calling thread keeps its own CPUs";
  });
}
