// Creating a communicator: settings, the rendezvous store and the job's
// token, connections to every peer (transport/tcp/tcp_mesh.hpp), fault
// injection, then the core (actors/comm_core.hpp).

#include "api/communicator/communicator_impl.hpp"
#include "api/communicator/standby_store.hpp"
#include "api/status/runtime_status.hpp"

#include "collectives/extension/registry.hpp"
#include <mccl/program.hpp>
#include "config/log.hpp"
#include "transport/open_files.hpp"
#include "transport/fault/fault_connection.hpp"
#include "transport/rdma/rdma_probe.hpp"
#include "transport/shm/shm_setup.hpp"
#include "transport/store/rendezvous_guard.hpp"
#include "transport/tcp/interfaces.hpp"
#include "transport/tcp/socket_util.hpp"
#include "transport/tcp/striped_connection.hpp"
#include "transport/tcp/tcp_link_resumer.hpp"
#include "transport/tcp/tcp_mesh.hpp"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <mutex>
#include <cstdlib>
#include <algorithm>
#include <map>
#include <random>
#include <sstream>

namespace mccl {

namespace {

std::string random_token() {
  std::random_device rd;
  std::string out;
  static const char* hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i)
    out.push_back(hex[rd() & 15]);
  return out;
}

transport::listen_choice choose_listen_addresses(const config& cfg, const std::string& master_addr, int rank) {
  auto master = transport::resolve_host(master_addr.empty() ? "127.0.0.1" : master_addr, "MASTER_ADDR");
  auto choice = transport::choose_listen_addresses(cfg.listen_addr, cfg.ifname, master,
                                                   transport::local_interfaces());
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
                                "MCCL_ALGO", "MCCL_TRANSPORT_CRC", "MCCL_HEARTBEAT_MS"};
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

config_overrides merged(const config_overrides& a, const config_overrides& b) {
  config_overrides out = a;
  for (const auto& [k, v] : b.values())
    out.set(k, v);
  return out;
}

} // namespace

void register_collective(const std::string& name, algorithm_factory factory) {
  if (name.empty())
    throw error(errc::invalid_argument, "register_collective: the name is empty");
  if (!factory)
    throw error(errc::invalid_argument, "register_collective(\"" + name + "\"): no factory");
  register_algorithm(op_kind::custom, name, std::move(factory));
}

namespace {

/// The scenario of MCCL_FAULTS (or comm_options::faults) for this rank, with
/// its report; null when no faults are to be injected.
std::shared_ptr<transport::fault_injector> make_fault_injector(communicator::impl& p,
                                                               const comm_options& o) {
  std::shared_ptr<const transport::fault_scenario> scenario = o.faults;
  if (!scenario && !p.cfg.faults.empty())
    scenario = std::make_shared<transport::fault_scenario>(transport::load_fault_scenario(p.cfg.faults));
  if (!scenario)
    return nullptr;
  transport::check_fault_ranks(*scenario, o.world_size);
  // MCCL_FAULTS_REPORT=PREFIX, else the scenario's path without .json
  // (the C++ API: mccl-faults in the working directory), plus the rank.
  std::string prefix = p.cfg.faults_report;
  if (prefix.empty()) {
    prefix = o.faults ? std::string("mccl-faults") : p.cfg.faults;
    if (prefix.size() > 5 && prefix.compare(prefix.size() - 5, 5, ".json") == 0)
      prefix.resize(prefix.size() - 5);
    prefix += ".report";
  }
  prefix += ".rank" + std::to_string(o.rank);
  if (o.comm_id != 0)
    prefix += ".comm" + std::to_string(o.comm_id);
  p.fault_report = std::make_shared<transport::fault_recorder>(o.rank, scenario->source, scenario->seed,
                                                               prefix);
  MCCL_LOG(info, "rank " << o.rank << ": injecting " << scenario->faults.size() << " fault rule(s) from "
                         << scenario->source << " (seed " << scenario->seed << "); report: " << prefix
                         << ".txt/.json");
  return std::make_shared<transport::fault_injector>(*scenario, o.rank, p.fault_report);
}

/// The host of every rank: host identities (shm_setup.hpp), or where a
/// rank could not read its boot id, first published addresses.
std::vector<int> host_of_ranks(const std::vector<std::string>& identities,
                               const transport::mesh_options& mo) {
  bool known = std::find(identities.begin(), identities.end(), std::string()) == identities.end();
  return sched::number_hosts(known ? identities : transport::host_addresses(mo));
}

} // namespace

namespace {

/// MCCL_TRANSPORT=auto and =rdma look for RDMA at run time. This version
/// has no RDMA data path, so both go on without it: auto says why at
/// INFO; rdma falls back to TCP with a WARN naming the reason.
void settle_rdma(config& cfg, int rank) {
  if (cfg.transport != transport_kind::auto_select && cfg.transport != transport_kind::rdma)
    return;
  const auto& probe = transport::probe_rdma();
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

} // namespace

namespace detail {

communicator make_communicator(const std::shared_ptr<runtime::impl>& rt, const comm_options& o,
                               bool sub_communicator, int store_host, bool standby) {
  auto p = std::make_shared<communicator::impl>();
  p->rt = rt;
  p->overrides = o.overrides;
  p->master_addr = o.master_addr;
  p->cfg = resolve_config(merged(rt->overrides, o.overrides));
  p->rank = o.rank;
  p->world = o.world_size;
  p->comm_id = o.comm_id;
  p->store_host = o.store ? store_host : 0;
  auto& cfg = p->cfg;
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    throw error(errc::invalid_argument, "rank " + std::to_string(o.rank) + " of world size "
                                          + std::to_string(o.world_size)
                                          + ": need 0 <= rank < world size");
  if (!sub_communicator) // log lines carry the rank in the world communicator
    log::set_rank(o.rank);
  log::set_level(cfg.log_level);
  validate_algo_spec(cfg);
  MCCL_LOG(info, "mccl " << MCCL_VERSION_STRING << " rank " << o.rank << " of " << o.world_size
                         << ", communicator " << o.comm_id << ", resolved configuration:\n"
                         << describe(cfg));
  auto ignored = settings_without_effect(cfg);
  static std::once_flag ignored_once;
  if (!ignored.empty())
    std::call_once(ignored_once, [&] {
      MCCL_LOG(info, ignored << ": settings of MCCL's GPU backend; mccl's payloads live in CPU "
                                "memory, where they have no effect");
    });
  if (o.world_size > 1)
    settle_rdma(cfg, o.rank);
  if (!sub_communicator)
    serve_status(*rt, cfg, o.rank);
  if (!cfg.trace.empty() && ::mkdir(cfg.trace.c_str(), 0777) != 0 && errno != EEXIST)
    throw error(errc::invalid_config, "MCCL_TRACE=\"" + cfg.trace + "\": cannot make the directory: "
                                        + std::strerror(errno));

  std::vector<transport::connection_ptr> conns;
  std::shared_ptr<transport::tcp_link_resumer> resumer; // MCCL_RECONNECT_MS
  std::shared_ptr<transport::shm_board> board;          // every rank on this host
  // Before connecting: a bad scenario file fails fast, on every rank.
  auto injector = o.world_size > 1 ? make_fault_injector(*p, o) : nullptr;

  if (o.world_size > 1) {
    int master_port = o.master_port;
    if (master_port == 0) // an embedder's store (torch): MASTER_PORT as its launcher set it
      if (const char* env = std::getenv("MASTER_PORT"))
        master_port = std::atoi(env);
    if (cfg.port_base != 0 && master_port >= cfg.port_base && master_port < cfg.port_base + o.world_size)
      throw error(errc::invalid_config,
                  "MCCL_PORT_BASE=" + std::to_string(cfg.port_base) + " makes rank "
                    + std::to_string(master_port - cfg.port_base) + " listen on port "
                    + std::to_string(master_port)
                    + ", which is MASTER_PORT (the rendezvous store's port); choose "
                      "MCCL_PORT_BASE so that MCCL_PORT_BASE..MCCL_PORT_BASE+WORLD_SIZE-1 "
                      "excludes MASTER_PORT, or MCCL_PORT_BASE=0 for any free port");
    auto listen = choose_listen_addresses(cfg, o.master_addr, o.rank);
    transport::open_files_need links;
    links.world = o.world_size;
    links.rank = o.rank;
    links.sockets_per_peer = cfg.sockets_per_peer > 0 ? cfg.sockets_per_peer
                                                      : static_cast<int>(listen.advertised.size());
    links.shared_memory = cfg.transport == transport_kind::auto_select || cfg.transport == transport_kind::shm;
    links.serves_store = !o.store && o.rank == 0;
    transport::ensure_open_files(transport::files_needed(links), links);
    store_ptr rendezvous = o.store;
    if (!rendezvous) {
      if (o.master_port <= 0 || o.master_port > 65535)
        throw error(errc::invalid_config, "MASTER_PORT=" + std::to_string(o.master_port)
                                            + ": expected a port in 1..65535");
      if (o.rank == 0) {
        auto addr = transport::resolve_host(o.master_addr, "MASTER_ADDR");
        p->store_server = std::make_shared<tcp_store_server>(
          rt->reactor->io(), boost::asio::ip::tcp::endpoint(addr, static_cast<unsigned short>(o.master_port)));
      }
      rendezvous = std::make_shared<tcp_store_client>(o.master_addr,
                                                      static_cast<unsigned short>(o.master_port),
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
    transport::rendezvous_guard guard(*rendezvous, prefix,
                                      {o.rank, o.world_size, cfg.job_id, transport::describe_process(addresses),
                                       settings_that_must_agree(cfg), !standby},
                                      cfg.connect_timeout);
    try {
      guard.join(setup_deadline);
      std::string token = cfg.job_token;
      if (token.empty()) {
        // No shared secret configured: rank 0 makes one per job and hands it
        // out through the store, so strays from other jobs are refused.
        if (o.rank == 0) {
          token = random_token();
          rendezvous->set(prefix + "token", token);
        } else {
          token = guard.wait_for(prefix + "token", setup_deadline, "rank 0 to publish the job token");
        }
      }
      transport::mesh_options mo;
      mo.rank = o.rank;
      mo.world = o.world_size;
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
      // Reconnect needs the CRC frame numbering and retained copies: without
      // them neither side could tell what the other already has.
      if (cfg.reconnect.count() > 0 && !cfg.transport_crc)
        MCCL_LOG(warn, "MCCL_RECONNECT_MS=" << cfg.reconnect.count()
                         << " has no effect without MCCL_TRANSPORT_CRC=1 (lost connections fail the op)");
      bool resumable = cfg.reconnect.count() > 0 && cfg.transport_crc;
      conns = transport::build_tcp_mesh(rt->reactor->monitor(), mo, resumable ? &resumer : nullptr);
      // Counted before the fault injector (if any) wraps the connections.
      std::size_t sockets = 0;
      for (const auto& c : conns) {
        if (!c)
          continue;
        auto* striped = dynamic_cast<const transport::striped_connection*>(c.get());
        sockets += striped ? striped->stripes() : 1;
      }
      transport::shm_setup_options so;
      so.rank = o.rank;
      so.world = o.world_size;
      so.mode = to_string(cfg.transport);
      so.host_id = cfg.host_id;
      so.ring_bytes = cfg.shm_ring_bytes;
      // Board ops run to their end in the call, so no larger than
      // MCCL_INLINE_BYTES allows; fault scenarios act on links: with one,
      // every op goes over them.
      so.board_bytes = injector ? 0 : std::min(cfg.shm_board_bytes, cfg.inline_bytes);
      // The fault decorator rewrites frames in buffers of its own, which a
      // splice must not point into.
      so.single_copy_bytes = injector ? 0 : cfg.shm_single_copy_bytes;
      so.deadline = std::chrono::steady_clock::now() + cfg.connect_timeout;
      so.rendezvous = rendezvous.get();
      so.key_prefix = prefix;
      // Every rank learns every rank's standby store here, while all are
      // alive: a shrink that loses the store's host meets in one of them.
      so.announce = serve_standby(*rt, listen.advertised.front().to_string());
      auto shm = transport::setup_shm_links(conns, so);
      p->standby = shm.announced;
      board = shm.board;
      cfg.host_of = host_of_ranks(shm.hosts, mo);
      cfg.hosts = sched::host_count(cfg.host_of);
      MCCL_LOG(info, "rank " << o.rank << ": connected to " << o.world_size - 1 << " peer(s) over "
                             << sockets << " socket(s), " << cfg.hosts << " host(s); "
                             << shm.shm_peers << " of the peers over shared memory"
                             << (shm.shm_peers > 0 ? " (their sockets carry only wake-ups)" : ""));
      if (injector) {
        for (int peer = 0; peer < o.world_size; ++peer)
          if (conns[peer])
            conns[peer] = injector->wrap(conns[peer], peer);
        injector->start();
      }
      p->rendezvous = rendezvous;
    } catch (const error& e) {
      // Name the cause (another rank's failure, rank 0's loss, ranks that
      // never came) and tell the others, so they stop waiting at once.
      throw guard.explain(e);
    }
  }
  MCCL_LOG(info, "communicator " << o.comm_id << ": " << describe_selection(o.world_size, cfg));

  actors::comm_core_init ci;
  ci.rank = o.rank;
  ci.world = o.world_size;
  ci.comm_id = o.comm_id;
  ci.cfg = cfg;
  ci.conns = std::move(conns);
  ci.system = rt->system;
  ci.pool = &rt->pool;
  ci.watchdog = rt->watchdog;
  ci.resumer = resumer;
  ci.faults = p->fault_report;
  if (injector)
    ci.scenario = std::make_shared<const transport::fault_scenario>(injector->scenario());
  ci.board = board;
  p->core = actors::comm_core::create(std::move(ci));
  {
    std::lock_guard<std::mutex> guard{rt->comms_mutex};
    rt->comms.push_back(p);
  }
  return communicator_factory::make(p);
}

/// The id of a communicator derived from `parent`: every member computes
/// the same one from values they all agree on (FNV-1a over them), and it
/// differs from the parent's, so frames and store keys never mix.
uint32_t derived_comm_id(uint32_t parent, std::initializer_list<uint64_t> values) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(parent);
  for (uint64_t v : values)
    mix(v);
  auto id = static_cast<uint32_t>(h ^ (h >> 32));
  return id == parent ? id + 1 : id;
}

} // namespace detail

communicator runtime::create_communicator(const comm_options& o) {
  return detail::make_communicator(impl_, o, false);
}

} // namespace mccl
