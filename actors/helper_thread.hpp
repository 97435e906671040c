#pragma once
/// mccl's own threads: a communicator's op thread ("mccl-op", op_thread.hpp)
/// and its board thread ("mccl-board", comm_core.hpp). Each is named, as
/// top -H, perf, gdb and /proc show it, and placed on MCCL_HELPER_CPUS when
/// that is set.
///
/// Why a place of their own: mcclrun binds each rank to its share of the
/// CPUs (one each when a host has as many ranks as CPUs), and a thread
/// inherits its creator's CPUs. A rank's board thread then takes turns
/// with its own rank's thread (PyTorch's, in training) even while another
/// rank's CPU waits for the slowest rank. Given all the job's CPUs, it runs
/// where one is free: DDP at 16 ranks on 16 cores trained 1.08-1.18x as
/// many samples a second (docs/performance.md, "PyTorch DDP training").

#include <vector>

namespace mccl::actors {

/// Names the calling thread (Linux keeps at most 15 characters) and, when
/// `cpus` is not empty, lets it run on those CPUs only. A placement the
/// kernel refuses (CPUs outside the process's cgroup, say) is logged once
/// and the thread keeps its creator's CPUs.
void start_helper_thread(const char* name, const std::vector<int>& cpus);

} // namespace mccl::actors
