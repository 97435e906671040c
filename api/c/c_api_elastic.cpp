// The C API's grow, join and reconfigure (include/mccl/mccl.h): thin
// wrappers of communicator::grow_handle/grow/reconfigure and
// runtime::join/reconfigure.

#include "api/c/c_api_handles.hpp"
#include "api/process/process_runtime.hpp"

#include <string>
#include <vector>

using namespace mccl;
using namespace mccl::c_api;

namespace {

mccl_status_t made(const std::shared_ptr<runtime>& rt, communicator comm, mccl_comm_t* out) {
  *out = new mccl_comm_s{rt, std::move(comm)};
  return MCCL_OK;
}

/// handles[0..n) as strings; a null entry is an error naming its index.
std::vector<std::string> handle_list(const char* fn, const char* const* handles, size_t n) {
  if (handles == nullptr && n > 0)
    throw error(errc::invalid_argument, std::string(fn) + ": handles is NULL");
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    if (handles[i] == nullptr)
      throw error(errc::invalid_argument, std::string(fn) + ": handles[" + std::to_string(i) + "] is NULL");
    out.emplace_back(handles[i]);
  }
  return out;
}

} // namespace

extern "C" {

mccl_status_t mccl_comm_grow_handle(mccl_comm_t comm, int new_size, const char** handle) {
  if (comm == nullptr) return null_argument("mccl_comm_grow_handle", "comm");
  if (handle == nullptr) return null_argument("mccl_comm_grow_handle", "handle");
  return guarded([&] {
    *handle = keep_text<text_of::grow_handle>(comm->comm.grow_handle(new_size));
    return MCCL_OK;
  });
}

mccl_status_t mccl_comm_grow(mccl_comm_t comm, const char* handle, mccl_comm_t* out) {
  if (comm == nullptr) return null_argument("mccl_comm_grow", "comm");
  if (handle == nullptr) return null_argument("mccl_comm_grow", "handle");
  if (out == nullptr) return null_argument("mccl_comm_grow", "out");
  return guarded([&] { return made(comm->rt, comm->comm.grow(handle), out); });
}

mccl_status_t mccl_comm_join(mccl_runtime_t rt, const char* handle, int rank, mccl_comm_t* out) {
  if (rt == nullptr) return null_argument("mccl_comm_join", "rt");
  if (handle == nullptr) return null_argument("mccl_comm_join", "handle");
  if (out == nullptr) return null_argument("mccl_comm_join", "out");
  return guarded([&] { return made(rt->rt, rt->rt->join(handle, rank, process::explicit_settings()), out); });
}

mccl_status_t mccl_comm_reconfigure_handle(mccl_comm_t comm, const char** handle) {
  if (comm == nullptr) return null_argument("mccl_comm_reconfigure_handle", "comm");
  if (handle == nullptr) return null_argument("mccl_comm_reconfigure_handle", "handle");
  return guarded([&] {
    *handle = keep_text<text_of::comm_reconfigure_handle>(comm->comm.get_reconfigure_handle());
    return MCCL_OK;
  });
}

mccl_status_t mccl_reconfigure_handle(mccl_runtime_t rt, const char** handle) {
  if (rt == nullptr) return null_argument("mccl_reconfigure_handle", "rt");
  if (handle == nullptr) return null_argument("mccl_reconfigure_handle", "handle");
  return guarded([&] {
    *handle = keep_text<text_of::runtime_reconfigure_handle>(rt->rt->get_reconfigure_handle());
    return MCCL_OK;
  });
}

mccl_status_t mccl_comm_reconfigure(mccl_comm_t comm, const char* uuid, const char* const* handles, size_t n,
                                    int64_t timeout_ms, mccl_comm_t* out) {
  if (comm == nullptr) return null_argument("mccl_comm_reconfigure", "comm");
  if (uuid == nullptr) return null_argument("mccl_comm_reconfigure", "uuid");
  if (out == nullptr) return null_argument("mccl_comm_reconfigure", "out");
  return guarded([&] {
    auto list = handle_list("mccl_comm_reconfigure", handles, n);
    return made(comm->rt, comm->comm.reconfigure(uuid, list, std::chrono::milliseconds(timeout_ms)), out);
  });
}

mccl_status_t mccl_reconfigure(mccl_runtime_t rt, const char* mine, const char* uuid, const char* const* handles,
                               size_t n, int64_t timeout_ms, mccl_comm_t* out) {
  if (rt == nullptr) return null_argument("mccl_reconfigure", "rt");
  if (mine == nullptr) return null_argument("mccl_reconfigure", "mine");
  if (uuid == nullptr) return null_argument("mccl_reconfigure", "uuid");
  if (out == nullptr) return null_argument("mccl_reconfigure", "out");
  return guarded([&] {
    auto list = handle_list("mccl_reconfigure", handles, n);
    return made(rt->rt, rt->rt->reconfigure(mine, uuid, list, std::chrono::milliseconds(timeout_ms),
                                            process::explicit_settings()),
                out);
  });
}

} // extern "C"
