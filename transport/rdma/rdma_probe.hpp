#pragma once
/// Whether this process could use RDMA, found at run time: libibverbs is
/// loaded with dlopen (so libmccl runs where it is not installed), its
/// devices listed and their ports queried. mccl's RDMA data path is not
/// built yet; the probe is what MCCL_TRANSPORT=auto and =rdma report, so a
/// user learns why their links run over TCP.

#include <string>
#include <vector>

namespace mccl::transport {

struct rdma_probe_result {
  /// A device with an active port was found.
  bool device_ready = false;
  /// Why RDMA cannot be used, or what was found:
  /// "libibverbs.so.1 could not be loaded (...)", "no RDMA device
  /// (ibv_get_device_list: Function not implemented)", "mlx5_0: no active
  /// port", "mlx5_0 port 1 active".
  std::string summary;
  /// One line per device: "mlx5_0: port 1 ACTIVE, port 2 DOWN".
  std::vector<std::string> devices;
};

/// Probes once per process (later calls return the first answer): RDMA
/// hardware does not come and go while a job runs.
const rdma_probe_result& probe_rdma();

/// The probe itself, uncached, loading `library` (for tests).
rdma_probe_result probe_rdma_uncached(const char* library = "libibverbs.so.1");

} // namespace mccl::transport
