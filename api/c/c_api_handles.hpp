#pragma once
/// What the C API's opaque handles are, and how every C entry point turns
/// C++ exceptions into a status code plus the thread's last-error message.
/// Shared by the C API's files only.

#include "mccl/mccl.h"

#include <mccl/communicator.hpp>

#include <memory>
#include <string>
#include <utility>

struct mccl_runtime_s {
  std::shared_ptr<mccl::runtime> rt;
};

struct mccl_comm_s {
  std::shared_ptr<mccl::runtime> rt; // the runtime outlives its communicators
  mccl::communicator comm;
};

struct mccl_work_s {
  mccl::work w;
};

namespace mccl::c_api {

/// The C API's functions that hand out text, each with its own string per
/// thread (keep_text).
enum class text_of {
  explicit_settings,
  describe_settings,
  metrics_json,
  metrics_prometheus,
  metrics_text,
  grow_handle,
  comm_reconfigure_handle,
  runtime_reconfigure_handle,
};

/// Keeps `text` for the C caller: valid until the same thread calls the
/// same function again (one string per function, so one call never
/// overwrites another's).
template <text_of Function>
const char* keep_text(std::string text) {
  thread_local std::string kept;
  kept = std::move(text);
  return kept.c_str();
}

/// Records `message` as the calling thread's last error and returns `status`.
mccl_status_t fail(mccl_status_t status, const std::string& message);

/// Runs `body` (which returns mccl_status_t); an exception becomes its
/// status and message. Nothing escapes into C.
template <class Body>
mccl_status_t guarded(Body&& body) noexcept {
  try {
    return std::forward<Body>(body)();
  } catch (const mccl::error& e) {
    return fail(static_cast<mccl_status_t>(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(MCCL_ERR_INTERNAL, "mccl: out of memory");
  } catch (const std::exception& e) {
    return fail(MCCL_ERR_INTERNAL, std::string("mccl: internal: ") + e.what());
  } catch (...) {
    return fail(MCCL_ERR_INTERNAL, "mccl: internal: unknown exception");
  }
}

/// An invalid_argument failure for a null pointer argument `what` of `fn`.
mccl_status_t null_argument(const char* fn, const char* what);

} // namespace mccl::c_api
