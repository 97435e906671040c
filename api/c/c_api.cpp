/// The C API (include/mccl/mccl.h): errors, settings, runtime,
/// communicators and metrics. The ops are in c_api_ops.cpp.

#include "api/c/c_api_handles.hpp"
#include "api/process/process_runtime.hpp"

#include <mccl/metrics.hpp>

#include <nlohmann/json.hpp>

#include <vector>

using mccl::c_api::guarded;
using mccl::c_api::null_argument;

namespace mccl::c_api {

namespace {
thread_local std::string last_error;
} // namespace

mccl_status_t fail(mccl_status_t status, const std::string& message) {
  last_error = message;
  return status;
}

mccl_status_t null_argument(const char* fn, const char* what) {
  return fail(MCCL_ERR_INVALID_ARGUMENT,
              std::string("mccl: invalid_argument: ") + fn + ": " + what + " is NULL");
}

namespace {

nlohmann::json to_json(const metrics_summary& s) {
  nlohmann::json ops = nlohmann::json::object();
  for (const auto& [name, k] : s.ops)
    ops[name] = {{"ops", k.ops},
                 {"errors", k.errors},
                 {"bytes", k.bytes},
                 {"wire_bytes", k.wire_bytes},
                 {"p50_latency_ms", k.p50_latency_ms},
                 {"p99_latency_ms", k.p99_latency_ms},
                 {"algorithms", k.algorithms}};
  nlohmann::json links = nlohmann::json::array();
  for (const auto& l : s.links)
    links.push_back({{"comm_id", l.comm_id},
                     {"rank", l.rank},
                     {"peer", l.peer},
                     {"bytes_sent", l.bytes_sent},
                     {"bytes_received", l.bytes_received},
                     {"retransmits", l.retransmits},
                     {"reconnects", l.reconnects}});
  return {{"total_ops", s.total_ops},
          {"total_bytes", s.total_bytes},
          {"wire_bytes", s.wire_bytes},
          {"errors", s.errors},
          {"p50_latency_ms", s.p50_latency_ms},
          {"p99_latency_ms", s.p99_latency_ms},
          {"peak_throughput_gbps", s.peak_throughput_gbps},
          {"ops", ops},
          {"links", links}};
}

mccl_status_t make_comm(const std::shared_ptr<runtime>& rt, communicator comm, mccl_comm_t* out) {
  *out = comm.valid() ? new mccl_comm_s{rt, std::move(comm)} : nullptr;
  return MCCL_OK;
}

} // namespace
} // namespace mccl::c_api

using namespace mccl;
using namespace mccl::c_api;

extern "C" {

uint32_t mccl_c_api_version(void) {
  return MCCL_C_API_VERSION;
}

const char* mccl_version(void) {
  return MCCL_VERSION_STRING;
}

const char* mccl_last_error(void) {
  return mccl::c_api::last_error.c_str();
}

const char* mccl_status_name(mccl_status_t status) {
  if (status < MCCL_OK || status > MCCL_ERR_REVOKED)
    return "unknown";
  return status == MCCL_OK ? "ok" : to_string(static_cast<errc>(status));
}

size_t mccl_dtype_size(mccl_dtype_t type) {
  return dtype_size(static_cast<dtype>(type));
}

mccl_status_t mccl_set_setting(const char* name, const char* value) {
  if (name == nullptr) return null_argument("mccl_set_setting", "name");
  if (value == nullptr) return null_argument("mccl_set_setting", "value");
  return guarded([&] {
    process::set_setting(name, value);
    return MCCL_OK;
  });
}

mccl_status_t mccl_clear_settings(void) {
  return guarded([] {
    process::clear_settings();
    return MCCL_OK;
  });
}

size_t mccl_setting_count(void) {
  return all_settings().size();
}

mccl_status_t mccl_setting_info(size_t index, const char** name, const char** default_value,
                                const char** allowed, const char** doc) {
  const auto& table = all_settings();
  if (index >= table.size())
    return fail(MCCL_ERR_INVALID_ARGUMENT, "mccl: invalid_argument: mccl_setting_info: index "
                                             + std::to_string(index) + " is not below "
                                             + std::to_string(table.size()));
  const auto& s = table[index];
  if (name) *name = s.name.c_str();
  if (default_value) *default_value = s.default_value.c_str();
  if (allowed) *allowed = s.allowed.c_str();
  if (doc) *doc = s.doc.c_str();
  return MCCL_OK;
}

mccl_status_t mccl_explicit_settings(const char** text) {
  if (text == nullptr) return null_argument("mccl_explicit_settings", "text");
  return guarded([&] {
    std::string lines;
    auto settings = process::explicit_settings(); // values() refers into it
    for (const auto& [k, v] : settings.values())
      lines += k + "=" + v + "\n";
    *text = keep_text<text_of::explicit_settings>(std::move(lines));
    return MCCL_OK;
  });
}

mccl_status_t mccl_describe_settings(const char** text) {
  if (text == nullptr) return null_argument("mccl_describe_settings", "text");
  return guarded([&] {
    *text = keep_text<text_of::describe_settings>(describe(process::resolved_settings()));
    return MCCL_OK;
  });
}

mccl_status_t mccl_runtime_create(mccl_runtime_t* out) {
  if (out == nullptr) return null_argument("mccl_runtime_create", "out");
  return guarded([&] {
    *out = new mccl_runtime_s{process::shared_runtime()};
    return MCCL_OK;
  });
}

mccl_status_t mccl_runtime_destroy(mccl_runtime_t rt) {
  return guarded([&] {
    delete rt; // the runtime stops here if nothing else holds it
    return MCCL_OK;
  });
}

mccl_status_t mccl_comm_create(mccl_runtime_t rt, const mccl_comm_options_t* options,
                               mccl_comm_t* out) {
  if (rt == nullptr) return null_argument("mccl_comm_create", "rt");
  if (options == nullptr) return null_argument("mccl_comm_create", "options");
  if (out == nullptr) return null_argument("mccl_comm_create", "out");
  return guarded([&] {
    comm_options o;
    o.rank = options->rank;
    o.world_size = options->world_size;
    if (options->master_addr != nullptr)
      o.master_addr = options->master_addr;
    o.master_port = options->master_port;
    o.comm_id = options->comm_id;
    o.overrides = process::explicit_settings();
    return make_comm(rt->rt, rt->rt->create_communicator(o), out);
  });
}

mccl_status_t mccl_comm_from_env(mccl_runtime_t rt, int strict, mccl_comm_t* out) {
  if (rt == nullptr) return null_argument("mccl_comm_from_env", "rt");
  if (out == nullptr) return null_argument("mccl_comm_from_env", "out");
  return guarded([&] {
    comm_options o = comm_options_from_env(strict != 0);
    // What the launcher implies (e.g. a listen address from MLX_HOSTFILE)
    // yields to what the program set explicitly.
    auto explicit_values = process::explicit_settings(); // values() refers into it
    for (const auto& [name, value] : explicit_values.values())
      o.overrides.set(name, value);
    return make_comm(rt->rt, rt->rt->create_communicator(o), out);
  });
}

mccl_status_t mccl_comm_rank(mccl_comm_t comm, int* rank) {
  if (comm == nullptr) return null_argument("mccl_comm_rank", "comm");
  if (rank == nullptr) return null_argument("mccl_comm_rank", "rank");
  return guarded([&] {
    *rank = comm->comm.rank();
    return MCCL_OK;
  });
}

mccl_status_t mccl_comm_size(mccl_comm_t comm, int* size) {
  if (comm == nullptr) return null_argument("mccl_comm_size", "comm");
  if (size == nullptr) return null_argument("mccl_comm_size", "size");
  return guarded([&] {
    *size = comm->comm.size();
    return MCCL_OK;
  });
}

mccl_status_t mccl_comm_split(mccl_comm_t comm, int color, int key, mccl_comm_t* out) {
  if (comm == nullptr) return null_argument("mccl_comm_split", "comm");
  if (out == nullptr) return null_argument("mccl_comm_split", "out");
  return guarded([&] { return make_comm(comm->rt, comm->comm.split(color, key), out); });
}

mccl_status_t mccl_comm_shrink(mccl_comm_t comm, const int* excluded, size_t n, mccl_comm_t* out) {
  if (comm == nullptr) return null_argument("mccl_comm_shrink", "comm");
  if (excluded == nullptr && n > 0) return null_argument("mccl_comm_shrink", "excluded");
  if (out == nullptr) return null_argument("mccl_comm_shrink", "out");
  return guarded([&] {
    std::vector<int> ranks(excluded, excluded + n);
    return make_comm(comm->rt, comm->comm.shrink(ranks), out);
  });
}

mccl_status_t mccl_comm_abort(mccl_comm_t comm, const char* reason) {
  if (comm == nullptr) return null_argument("mccl_comm_abort", "comm");
  return guarded([&] {
    comm->comm.abort(reason != nullptr ? reason : "aborted through the C API");
    return MCCL_OK;
  });
}

mccl_status_t mccl_comm_revoke(mccl_comm_t comm, const char* reason) {
  if (comm == nullptr) return null_argument("mccl_comm_revoke", "comm");
  return guarded([&] {
    comm->comm.revoke(reason != nullptr ? reason : "revoked through the C API");
    return MCCL_OK;
  });
}

mccl_status_t mccl_comm_revoked(mccl_comm_t comm, int* revoked) {
  if (comm == nullptr) return null_argument("mccl_comm_revoked", "comm");
  if (revoked == nullptr) return null_argument("mccl_comm_revoked", "revoked");
  return guarded([&] {
    *revoked = comm->comm.revoked() ? 1 : 0;
    return MCCL_OK;
  });
}

mccl_status_t mccl_comm_destroy(mccl_comm_t comm) {
  if (comm == nullptr)
    return MCCL_OK;
  return guarded([&] {
    comm->comm.finalize();
    delete comm;
    return MCCL_OK;
  });
}

mccl_status_t mccl_metrics_json(const char** text) {
  if (text == nullptr) return null_argument("mccl_metrics_json", "text");
  return guarded([&] {
    *text = keep_text<text_of::metrics_json>(to_json(get_metrics()).dump());
    return MCCL_OK;
  });
}

mccl_status_t mccl_metrics_prometheus(int rank, const char** text) {
  if (text == nullptr) return null_argument("mccl_metrics_prometheus", "text");
  return guarded([&] {
    *text = keep_text<text_of::metrics_prometheus>(to_prometheus(get_metrics(), rank));
    return MCCL_OK;
  });
}

mccl_status_t mccl_metrics_summary(const char** text) {
  if (text == nullptr) return null_argument("mccl_metrics_summary", "text");
  return guarded([&] {
    *text = keep_text<text_of::metrics_text>(describe(get_metrics()));
    return MCCL_OK;
  });
}

mccl_status_t mccl_log_metrics(void) {
  return guarded([] {
    log_metrics();
    return MCCL_OK;
  });
}

mccl_status_t mccl_reset_metrics(void) {
  return guarded([] {
    reset_metrics();
    return MCCL_OK;
  });
}

} // extern "C"
