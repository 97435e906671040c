// The transport table (transport_table.hpp): what each transport connects,
// in the order wire_up runs them.

#include "transport/wireup/transport_table.hpp"

#include "config/log.hpp"
#include "transport/rdma/rdma_probe.hpp"
#include "transport/shm/shm_setup.hpp"
#include "transport/tcp/striped_connection.hpp"

#include <algorithm>

namespace mccl::transport {

namespace {

void connect_tcp(wireup_state& s) {
  const auto& cfg = s.cfg;
  // Reconnect needs the CRC frame numbering and retained copies: without
  // them neither side could tell what the other already has.
  if (cfg.reconnect.count() > 0 && !cfg.transport_crc)
    MCCL_LOG(warn, "MCCL_RECONNECT_MS=" << cfg.reconnect.count()
                     << " has no effect without MCCL_TRANSPORT_CRC=1 (lost connections fail the op)");
  bool resumable = cfg.reconnect.count() > 0 && cfg.transport_crc;
  s.conns = build_tcp_mesh(s.monitor, s.mesh, resumable ? &s.resumer : nullptr);
  // Counted before the fault injector (if any) wraps the connections.
  for (const auto& c : s.conns) {
    if (!c)
      continue;
    auto* striped = dynamic_cast<const striped_connection*>(c.get());
    s.sockets += striped ? striped->stripes() : 1;
  }
}

void connect_shm(wireup_state& s) {
  const auto& cfg = s.cfg;
  shm_setup_options so;
  so.rank = s.mesh.rank;
  so.world = s.mesh.world;
  so.mode = to_string(cfg.transport);
  so.host_id = cfg.host_id;
  so.ring_bytes = cfg.shm_ring_bytes;
  // Board ops run to their end in the call, so no larger than
  // MCCL_INLINE_BYTES allows; fault scenarios act on links: with one,
  // every op goes over them.
  so.board_bytes = s.injector ? 0 : std::min(cfg.shm_board_bytes, cfg.inline_bytes);
  so.stage_bytes = s.injector ? 0 : cfg.shm_stage_bytes;
  // The fault decorator rewrites frames in buffers of its own, which a
  // splice must not point into.
  so.single_copy_bytes = s.injector ? 0 : cfg.shm_single_copy_bytes;
  so.deadline = std::chrono::steady_clock::now() + cfg.connect_timeout;
  so.rendezvous = s.mesh.rendezvous;
  so.key_prefix = s.mesh.key_prefix;
  // Every rank learns every rank's standby store here, while all are
  // alive: a shrink that loses the store's host meets in one of them.
  so.announce = s.serve_standby(s.listen.advertised.front().to_string());
  auto shm = setup_shm_links(s.conns, so);
  s.standby = shm.announced;
  s.board = shm.board;
  s.hosts = shm.hosts;
  s.shm_peers = shm.shm_peers;
}

} // namespace

const std::vector<transport_entry>& transport_table() {
  static const std::vector<transport_entry> table = {
    {"tcp", pair_reach::every_pair, connect_tcp},
    {"shm", pair_reach::same_host, connect_shm},
    {"rdma", pair_reach::no_pair, nullptr},
  };
  return table;
}

void settle_rdma(config& cfg, int rank) {
  if (cfg.transport != transport_kind::auto_select && cfg.transport != transport_kind::rdma)
    return;
  const auto& probe = probe_rdma();
  std::string why = probe.summary;
  if (probe.device_ready)
    why += ", but this version of mccl has no RDMA data path";
  for (const auto& d : probe.devices)
    MCCL_LOG(debug, "rank " << rank << ": RDMA device " << d);
  if (cfg.transport == transport_kind::rdma) {
    MCCL_LOG(warn, "rank " << rank << ": MCCL_TRANSPORT=rdma: RDMA cannot be used (" << why
                           << "); falling back to TCP");
    cfg.transport = transport_kind::tcp;
  } else {
    MCCL_LOG(info, "rank " << rank << ": RDMA not used (" << why
                           << "); ranks on other hosts connect over TCP");
  }
}

} // namespace mccl::transport
