/// The C API's ops and work handles (include/mccl/mccl.h).

#include "api/c/c_api_handles.hpp"

#include <chrono>
#include <vector>

using namespace mccl;
using namespace mccl::c_api;

namespace {

/// Issues an op through `issue` (returning mccl::work); with a null `out`
/// waits for it, else hands the caller a work handle.
template <class Issue>
mccl_status_t run_op(const char* fn, mccl_comm_t comm, mccl_work_t* out, Issue&& issue) {
  if (comm == nullptr)
    return null_argument(fn, "comm");
  return guarded([&] {
    work w = issue(comm->comm);
    if (out == nullptr) {
      w.wait();
      return MCCL_OK;
    }
    *out = new mccl_work_s{std::move(w)};
    return MCCL_OK;
  });
}

// Values from C may be anything an int holds: check them here, where the
// message can say which argument is wrong.
dtype to_dtype(mccl_dtype_t t) {
  if (t < MCCL_FLOAT32 || t > MCCL_UINT64)
    throw error(errc::invalid_argument, "dtype " + std::to_string(static_cast<int>(t))
                                          + " is not an mccl_dtype_t (0.." + std::to_string(MCCL_UINT64)
                                          + ")");
  return static_cast<dtype>(t);
}

redop to_redop(mccl_redop_t op) {
  if (op < MCCL_SUM || op > MCCL_BXOR)
    throw error(errc::invalid_argument, "reduction " + std::to_string(static_cast<int>(op))
                                          + " is not an mccl_redop_t (0.." + std::to_string(MCCL_BXOR)
                                          + ")");
  return static_cast<redop>(op);
}

/// One count per rank of `comm`, from a C array of that length.
std::vector<std::size_t> per_rank(const communicator& comm, const size_t* counts, const char* fn,
                                  const char* what) {
  if (counts == nullptr)
    throw error(errc::invalid_argument, std::string(fn) + ": " + what + " is NULL");
  return std::vector<std::size_t>(counts, counts + comm.size());
}

} // namespace

extern "C" {

mccl_status_t mccl_allreduce(mccl_comm_t comm, const void* send, void* recv, size_t count,
                             mccl_dtype_t type, mccl_redop_t op, mccl_work_t* work) {
  return run_op("mccl_allreduce", comm, work, [&](communicator& c) {
    return c.allreduce(send, recv, count, to_dtype(type), to_redop(op));
  });
}

mccl_status_t mccl_broadcast(mccl_comm_t comm, const void* send, void* recv, size_t count,
                             mccl_dtype_t type, int root, mccl_work_t* work) {
  return run_op("mccl_broadcast", comm, work, [&](communicator& c) {
    return c.broadcast(send, recv, count, to_dtype(type), root);
  });
}

mccl_status_t mccl_reduce(mccl_comm_t comm, const void* send, void* recv, size_t count,
                          mccl_dtype_t type, mccl_redop_t op, int root, mccl_work_t* work) {
  return run_op("mccl_reduce", comm, work, [&](communicator& c) {
    return c.reduce(send, recv, count, to_dtype(type), to_redop(op), root);
  });
}

mccl_status_t mccl_allgather(mccl_comm_t comm, const void* send, void* recv, size_t count,
                             mccl_dtype_t type, mccl_work_t* work) {
  return run_op("mccl_allgather", comm, work, [&](communicator& c) {
    return c.allgather(send, recv, count, to_dtype(type));
  });
}

mccl_status_t mccl_allgatherv(mccl_comm_t comm, const void* send, void* recv,
                              const size_t* counts, mccl_dtype_t type, mccl_work_t* work) {
  return run_op("mccl_allgatherv", comm, work, [&](communicator& c) {
    return c.allgatherv(send, recv, per_rank(c, counts, "mccl_allgatherv", "counts"),
                        to_dtype(type));
  });
}

mccl_status_t mccl_reduce_scatter(mccl_comm_t comm, const void* send, void* recv, size_t count,
                                  mccl_dtype_t type, mccl_redop_t op, mccl_work_t* work) {
  return run_op("mccl_reduce_scatter", comm, work, [&](communicator& c) {
    return c.reduce_scatter(send, recv, count, to_dtype(type), to_redop(op));
  });
}

mccl_status_t mccl_reduce_scatterv(mccl_comm_t comm, const void* send, void* recv,
                                   const size_t* counts, mccl_dtype_t type, mccl_redop_t op,
                                   mccl_work_t* work) {
  return run_op("mccl_reduce_scatterv", comm, work, [&](communicator& c) {
    return c.reduce_scatterv(send, recv, per_rank(c, counts, "mccl_reduce_scatterv", "counts"),
                             to_dtype(type), to_redop(op));
  });
}

mccl_status_t mccl_gather(mccl_comm_t comm, const void* send, void* recv, size_t count,
                          mccl_dtype_t type, int root, mccl_work_t* work) {
  return run_op("mccl_gather", comm, work, [&](communicator& c) {
    return c.gather(send, recv, count, to_dtype(type), root);
  });
}

mccl_status_t mccl_scatter(mccl_comm_t comm, const void* send, void* recv, size_t count,
                           mccl_dtype_t type, int root, mccl_work_t* work) {
  return run_op("mccl_scatter", comm, work, [&](communicator& c) {
    return c.scatter(send, recv, count, to_dtype(type), root);
  });
}

mccl_status_t mccl_alltoall(mccl_comm_t comm, const void* send, void* recv, size_t count,
                            mccl_dtype_t type, mccl_work_t* work) {
  return run_op("mccl_alltoall", comm, work, [&](communicator& c) {
    return c.alltoall(send, recv, count, to_dtype(type));
  });
}

mccl_status_t mccl_alltoallv(mccl_comm_t comm, const void* send, const size_t* send_counts,
                             void* recv, const size_t* recv_counts, mccl_dtype_t type,
                             mccl_work_t* work) {
  return run_op("mccl_alltoallv", comm, work, [&](communicator& c) {
    return c.alltoallv(send, per_rank(c, send_counts, "mccl_alltoallv", "send_counts"), recv,
                       per_rank(c, recv_counts, "mccl_alltoallv", "recv_counts"), to_dtype(type));
  });
}

mccl_status_t mccl_barrier(mccl_comm_t comm, mccl_work_t* work) {
  return run_op("mccl_barrier", comm, work, [&](communicator& c) { return c.barrier(); });
}

mccl_status_t mccl_send(mccl_comm_t comm, const void* data, size_t count, mccl_dtype_t type,
                        int peer, uint32_t tag, mccl_work_t* work) {
  return run_op("mccl_send", comm, work, [&](communicator& c) {
    return c.send(data, count, to_dtype(type), peer, tag);
  });
}

mccl_status_t mccl_recv(mccl_comm_t comm, void* data, size_t count, mccl_dtype_t type, int peer,
                        uint32_t tag, mccl_work_t* work) {
  return run_op("mccl_recv", comm, work, [&](communicator& c) {
    return c.recv(data, count, to_dtype(type), peer, tag);
  });
}

mccl_status_t mccl_work_wait(mccl_work_t work) {
  if (work == nullptr) return null_argument("mccl_work_wait", "work");
  return guarded([&] {
    work->w.wait();
    return MCCL_OK;
  });
}

mccl_status_t mccl_work_wait_for(mccl_work_t work, int64_t timeout_ms, int* done) {
  if (work == nullptr) return null_argument("mccl_work_wait_for", "work");
  if (done == nullptr) return null_argument("mccl_work_wait_for", "done");
  *done = 0;
  auto status = guarded([&] {
    *done = work->w.wait_for(std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms)) ? 1 : 0;
    return MCCL_OK;
  });
  if (status != MCCL_OK)
    *done = 1; // it threw because the op finished with an error
  return status;
}

mccl_status_t mccl_work_test(mccl_work_t work, int* done) {
  if (work == nullptr) return null_argument("mccl_work_test", "work");
  if (done == nullptr) return null_argument("mccl_work_test", "done");
  *done = work->w.test() ? 1 : 0;
  return MCCL_OK;
}

mccl_status_t mccl_work_free(mccl_work_t work) {
  delete work;
  return MCCL_OK;
}

} // extern "C"
