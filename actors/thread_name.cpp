#include "actors/thread_name.hpp"

#include <cstring>

#include <pthread.h>

namespace mccl::actors {

void name_this_thread(const char* name) {
  char shortened[16];
  std::strncpy(shortened, name, sizeof shortened - 1);
  shortened[sizeof shortened - 1] = '\0';
  ::pthread_setname_np(::pthread_self(), shortened);
}

} // namespace mccl::actors
