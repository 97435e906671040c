// Connecting a communicator's ranks (wireup.hpp): the rendezvous, then the
// transport table, then the fault decorator.

#include "transport/wireup/wireup.hpp"

#include "config/log.hpp"
#include "transport/open_files.hpp"
#include "transport/store/rendezvous_guard.hpp"
#include "transport/wireup/transport_table.hpp"
#include <mccl/error.hpp>
#include <mccl/program.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>

namespace mccl::transport {

namespace {

std::string make_job_token() {
  std::random_device rd;
  std::string out;
  static const char* hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i)
    out.push_back(hex[rd() & 15]);
  return out;
}

listen_choice listen_addresses_for(const config& cfg, const std::string& master_addr, int rank) {
  auto master = resolve_host(master_addr.empty() ? "127.0.0.1" : master_addr, "MASTER_ADDR");
  auto choice = choose_listen_addresses(cfg.listen_addr, cfg.ifname, master, local_interfaces());
  std::string where;
  for (const auto& a : choice.addresses)
    where += (where.empty() ? "" : ", ") + a.to_string();
  MCCL_LOG(info, "rank " << rank << " listens on " << where << ": " << choice.reason);
  return choice;
}

/// The settings every rank must have alike, as describe() shows them:
/// they shape the frames, chunks, algorithms and liveness a peer expects.
/// MCCL_TRANSPORT and MCCL_SOCKETS_PER_PEER are compared where they are
/// used (shm setup, the handshake), with messages of their own. Not here:
/// MCCL_INLINE_BYTES (which thread drives an op is each rank's own choice;
/// ranks with different values interoperate), MCCL_COMPRESSION and
/// MCCL_TOPK_RATIO (an op may set its own; every op compares what travels,
/// and a mismatch fails it on every rank naming both sides).
std::vector<std::pair<std::string, std::string>> settings_that_must_agree(const config& cfg) {
  static const char* names[] = {"MCCL_CHUNK_BYTES", "MCCL_SMALL_MSG_THRESHOLD", "MCCL_SHM_BOARD_BYTES",
                                "MCCL_SHM_STAGE_BYTES", "MCCL_ALGO", "MCCL_TRANSPORT_CRC", "MCCL_HEARTBEAT_MS"};
  std::map<std::string, std::string> shown;
  std::istringstream in(describe(cfg));
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    auto source = line.rfind(" (");
    if (eq != std::string::npos && source != std::string::npos && source > eq)
      shown[line.substr(0, eq)] = line.substr(eq + 1, source - eq - 1);
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* name : names)
    if (shown.count(name))
      out.emplace_back(name, shown[name]);
  return out;
}

/// The host of every rank: host identities (shm_setup.hpp), or where a
/// rank could not read its boot id, first published addresses.
std::vector<int> host_of_ranks(const std::vector<std::string>& identities, const mesh_options& mo) {
  bool known = std::find(identities.begin(), identities.end(), std::string()) == identities.end();
  return sched::number_hosts(known ? identities : host_addresses(mo));
}

} // namespace

wireup_result wire_up(config& cfg, const wireup_options& o) {
  wireup_result r;
  int master_port = o.master_port;
  if (master_port == 0) // an embedder's store (torch): MASTER_PORT as its launcher set it
    if (const char* env = std::getenv("MASTER_PORT"))
      master_port = std::atoi(env);
  if (cfg.port_base != 0 && master_port >= cfg.port_base && master_port < cfg.port_base + o.world)
    throw error(errc::invalid_config,
                "MCCL_PORT_BASE=" + std::to_string(cfg.port_base) + " makes rank "
                  + std::to_string(master_port - cfg.port_base) + " listen on port "
                  + std::to_string(master_port)
                  + ", which is MASTER_PORT (the rendezvous store's port); choose "
                    "MCCL_PORT_BASE so that MCCL_PORT_BASE..MCCL_PORT_BASE+WORLD_SIZE-1 "
                    "excludes MASTER_PORT, or MCCL_PORT_BASE=0 for any free port");
  auto listen = listen_addresses_for(cfg, o.master_addr, o.rank);
  open_files_need links;
  links.world = o.world;
  links.rank = o.rank;
  links.sockets_per_peer = cfg.sockets_per_peer > 0 ? cfg.sockets_per_peer
                                                    : static_cast<int>(listen.advertised.size());
  links.shared_memory = cfg.transport == transport_kind::auto_select || cfg.transport == transport_kind::shm;
  links.serves_store = !o.store && o.rank == 0;
  ensure_open_files(files_needed(links), links);
  store_ptr rendezvous = o.store;
  if (!rendezvous) {
    if (o.master_port <= 0 || o.master_port > 65535)
      throw error(errc::invalid_config, "MASTER_PORT=" + std::to_string(o.master_port)
                                          + ": expected a port in 1..65535");
    if (o.rank == 0) {
      auto addr = resolve_host(o.master_addr, "MASTER_ADDR");
      r.store_server = std::make_shared<tcp_store_server>(
        o.runtime_reactor->io(), boost::asio::ip::tcp::endpoint(addr, static_cast<unsigned short>(o.master_port)));
    }
    rendezvous = std::make_shared<tcp_store_client>(o.master_addr, static_cast<unsigned short>(o.master_port),
                                                    o.rank, cfg.connect_timeout);
  }
  if (cfg.port_base != 0 && cfg.port_base + o.rank > 65535)
    throw error(errc::invalid_config, "MCCL_PORT_BASE=" + std::to_string(cfg.port_base)
                                        + " + rank " + std::to_string(o.rank)
                                        + " is beyond port 65535");
  std::string prefix = "mccl/" + std::to_string(o.comm_id) + "/";
  auto setup_deadline = std::chrono::steady_clock::now() + cfg.connect_timeout;
  std::string addresses;
  for (const auto& a : listen.advertised)
    addresses += (addresses.empty() ? "" : ", ") + a.to_string();
  rendezvous_guard guard(*rendezvous, prefix,
                         {o.rank, o.world, cfg.job_id, describe_process(addresses),
                          settings_that_must_agree(cfg), !o.standby},
                         cfg.connect_timeout);
  try {
    guard.join(setup_deadline);
    std::string token = cfg.job_token;
    if (token.empty()) {
      // No shared secret configured: rank 0 makes one per job and hands it
      // out through the store, so strays from other jobs are refused.
      if (o.rank == 0) {
        token = make_job_token();
        rendezvous->set(prefix + "token", token);
      } else {
        token = guard.wait_for(prefix + "token", setup_deadline, "rank 0 to publish the job token");
      }
    }
    wireup_state s{cfg, mesh_options{}, listen, o.injector, o.serve_standby, o.runtime_reactor->monitor()};
    auto& mo = s.mesh;
    mo.rank = o.rank;
    mo.world = o.world;
    mo.comm_id = o.comm_id;
    mo.token = token;
    mo.listen_addrs = listen.addresses;
    mo.advertise_addrs = listen.advertised;
    mo.sockets_per_peer = cfg.sockets_per_peer;
    mo.listen_port = static_cast<unsigned short>(cfg.port_base == 0 ? 0 : cfg.port_base + o.rank);
    mo.connect_timeout = cfg.connect_timeout;
    mo.socket_buffer_bytes = cfg.socket_buffer_bytes;
    mo.rendezvous = rendezvous.get();
    mo.key_prefix = prefix;
    mo.on_wait = [&guard] { guard.check(); };
    for (const auto& t : transport_table())
      if (t.connect)
        t.connect(s);
    cfg.host_of = host_of_ranks(s.hosts, mo);
    cfg.hosts = sched::host_count(cfg.host_of);
    MCCL_LOG(info, "rank " << o.rank << ": connected to " << o.world - 1 << " peer(s) over "
                           << s.sockets << " socket(s), " << cfg.hosts << " host(s); "
                           << s.shm_peers << " of the peers over shared memory"
                           << (s.shm_peers > 0 ? " (their sockets carry only wake-ups)" : ""));
    if (o.injector) {
      for (int peer = 0; peer < o.world; ++peer)
        if (s.conns[peer])
          s.conns[peer] = o.injector->wrap(s.conns[peer], peer);
      o.injector->start();
    }
    r.conns = std::move(s.conns);
    r.resumer = std::move(s.resumer);
    r.board = std::move(s.board);
    r.standby = std::move(s.standby);
    r.rendezvous = rendezvous;
    guard.finish(setup_deadline);
  } catch (const error& e) {
    // Name the cause (another rank's failure, rank 0's loss, ranks that
    // never came) and tell the others, so they stop waiting at once.
    throw guard.explain(e);
  }
  return r;
}

} // namespace mccl::transport
