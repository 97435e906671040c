#pragma once
/// Names of mccl's own threads, as top -H, perf, gdb and /proc show them:
/// "mccl-op" (a communicator's op thread, op_thread.hpp) and "mccl-board"
/// (its board thread, comm_core.hpp).

namespace mccl::actors {

/// Names the calling thread (Linux keeps at most 15 characters).
void name_this_thread(const char* name);

} // namespace mccl::actors
