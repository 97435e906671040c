#include "actors/helper_thread.hpp"

#include "config/log.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>

#include <pthread.h>
#include <sched.h>

namespace mccl::actors {

void start_helper_thread(const char* name, const std::vector<int>& cpus) {
  char shortened[16];
  std::strncpy(shortened, name, sizeof shortened - 1);
  shortened[sizeof shortened - 1] = '\0';
  ::pthread_setname_np(::pthread_self(), shortened);
  if (cpus.empty())
    return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    CPU_SET(c, &set); // config.cpp keeps them below CPU_SETSIZE
  if (::sched_setaffinity(0, sizeof set, &set) != 0) {
    static std::atomic<bool> told{false};
    if (!told.exchange(true))
      MCCL_LOG(warn, "MCCL_HELPER_CPUS: the kernel refused to place thread " << name << " there ("
                       << std::strerror(errno) << "); it keeps the CPUs of the thread that started it");
  }
}

} // namespace mccl::actors
