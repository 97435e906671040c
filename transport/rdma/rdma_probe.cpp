#include "transport/rdma/rdma_probe.hpp"

#include <dlfcn.h>

#include <cerrno>
#include <cstring>

#if MCCL_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

namespace mccl::transport {

namespace {

/// dlclose on scope exit.
struct library_handle {
  void* h = nullptr;
  ~library_handle() {
    if (h)
      ::dlclose(h);
  }
};

template <class Fn>
Fn symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(lib, name));
}

} // namespace

rdma_probe_result probe_rdma_uncached(const char* library) {
  rdma_probe_result out;
#if !MCCL_HAVE_IBVERBS
  (void)library;
  out.summary = "mccl was built without the libibverbs headers";
  return out;
#else
  library_handle lib{::dlopen(library, RTLD_NOW | RTLD_LOCAL)};
  if (!lib.h) {
    const char* why = ::dlerror();
    out.summary = std::string(library) + " could not be loaded (" + (why ? why : "unknown") + ")";
    return out;
  }
  using get_list_fn = ibv_device** (*)(int*);
  using free_list_fn = void (*)(ibv_device**);
  using name_fn = const char* (*)(ibv_device*);
  using open_fn = ibv_context* (*)(ibv_device*);
  using close_fn = int (*)(ibv_context*);
  using query_device_fn = int (*)(ibv_context*, ibv_device_attr*);
  using query_port_fn = int (*)(ibv_context*, uint8_t, ibv_port_attr*);
  auto get_list = symbol<get_list_fn>(lib.h, "ibv_get_device_list");
  auto free_list = symbol<free_list_fn>(lib.h, "ibv_free_device_list");
  auto name_of = symbol<name_fn>(lib.h, "ibv_get_device_name");
  auto open = symbol<open_fn>(lib.h, "ibv_open_device");
  auto close = symbol<close_fn>(lib.h, "ibv_close_device");
  auto query_device = symbol<query_device_fn>(lib.h, "ibv_query_device");
  // The exported ibv_query_port fills the older, shorter port struct (a
  // prefix of ibv_port_attr); newer providers answer through the context.
  auto query_port_compat = symbol<query_port_fn>(lib.h, "ibv_query_port");
  if (!get_list || !free_list || !name_of || !open || !close || !query_device
      || !query_port_compat) {
    out.summary = std::string(library) + " lacks the verbs mccl needs (an old libibverbs?)";
    return out;
  }
  int n = 0;
  errno = 0;
  ibv_device** list = get_list(&n);
  if (!list || n == 0) {
    // Kernels without RDMA answer NULL with ENOSYS rather than an empty list.
    int err = errno;
    out.summary = "no RDMA device";
    if (!list && err != 0)
      out.summary += std::string(" (ibv_get_device_list: ") + std::strerror(err) + ")";
    if (list)
      free_list(list);
    return out;
  }
  std::string first_ready;
  for (int i = 0; i < n; ++i) {
    std::string name = name_of(list[i]) ? name_of(list[i]) : "device " + std::to_string(i);
    std::string line = name + ":";
    ibv_context* ctx = open(list[i]);
    if (!ctx) {
      out.devices.push_back(line + " cannot be opened (" + std::strerror(errno) + ")");
      continue;
    }
    ibv_device_attr attr{};
    if (query_device(ctx, &attr) != 0) {
      out.devices.push_back(line + " cannot be queried");
      close(ctx);
      continue;
    }
    for (uint8_t port = 1; port <= attr.phys_port_cnt; ++port) {
      ibv_port_attr pa{};
      auto* vctx = verbs_get_ctx_op(ctx, query_port);
      int rc = vctx ? vctx->query_port(ctx, port, &pa, sizeof pa) : query_port_compat(ctx, port, &pa);
      bool active = rc == 0 && pa.state == IBV_PORT_ACTIVE;
      line += " port " + std::to_string(port) + (rc != 0 ? " unknown" : active ? " ACTIVE" : " not active");
      if (active && first_ready.empty())
        first_ready = name + " port " + std::to_string(port) + " active";
    }
    close(ctx);
    out.devices.push_back(line);
  }
  free_list(list);
  out.device_ready = !first_ready.empty();
  out.summary = out.device_ready ? first_ready : std::to_string(n) + " RDMA device(s), no active port";
  return out;
#endif
}

const rdma_probe_result& probe_rdma() {
  static const rdma_probe_result result = probe_rdma_uncached();
  return result;
}

} // namespace mccl::transport
