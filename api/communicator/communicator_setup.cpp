// Creating a communicator: settings, fault injection, connections to every
// peer (transport/wireup/wireup.hpp: the rendezvous and the transport
// table), then the core (actors/comm_core.hpp).

#include "api/communicator/communicator_impl.hpp"
#include "api/communicator/standby_store.hpp"
#include "api/status/runtime_status.hpp"

#include "collectives/extension/registry.hpp"
#include "config/log.hpp"
#include "transport/fault/fault_connection.hpp"
#include "transport/wireup/transport_table.hpp"
#include "transport/wireup/wireup.hpp"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <mutex>

namespace mccl {

namespace {

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
                                                               const comm_options& o, bool derived) {
  std::shared_ptr<const transport::fault_scenario> scenario = o.faults;
  if (!scenario && !p.cfg.faults.empty())
    scenario = std::make_shared<transport::fault_scenario>(transport::load_fault_scenario(p.cfg.faults));
  if (!scenario)
    return nullptr;
  // The scenario names the ranks of the job as launched. A communicator
  // made from another (split, shrink, grow, reconfigure) may have fewer:
  // a fault naming a rank it lacks does not act there, and is no mistake.
  if (!derived)
    transport::check_fault_ranks(*scenario, o.world_size);
  p.fault_scenario = scenario;
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
  p->job_rank = o.rank; // a communicator made from another takes that one's
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
    transport::settle_rdma(cfg, o.rank);
  if (!sub_communicator)
    serve_status(*rt, cfg, o.rank);
  if (!cfg.trace.empty() && ::mkdir(cfg.trace.c_str(), 0777) != 0 && errno != EEXIST)
    throw error(errc::invalid_config, "MCCL_TRACE=\"" + cfg.trace + "\": cannot make the directory: "
                                        + std::strerror(errno));

  // Before connecting: a bad scenario file fails fast, on every rank.
  auto injector = o.world_size > 1 ? make_fault_injector(*p, o, sub_communicator) : nullptr;
  transport::wireup_result links;
  if (o.world_size > 1) {
    transport::wireup_options wo;
    wo.rank = o.rank;
    wo.world = o.world_size;
    wo.comm_id = o.comm_id;
    wo.master_addr = o.master_addr;
    wo.master_port = o.master_port;
    wo.store = o.store;
    wo.standby = standby;
    wo.runtime_reactor = rt->reactor.get();
    wo.injector = injector;
    wo.serve_standby = [&rt](const std::string& ip) { return serve_standby(*rt, ip); };
    links = transport::wire_up(cfg, wo);
    p->store_server = links.store_server;
    p->standby = links.standby;
    p->rendezvous = links.rendezvous;
  }
  MCCL_LOG(info, "communicator " << o.comm_id << ": " << describe_selection(o.world_size, cfg));

  actors::comm_core_init ci;
  ci.rank = o.rank;
  ci.world = o.world_size;
  ci.comm_id = o.comm_id;
  ci.cfg = cfg;
  ci.conns = std::move(links.conns);
  ci.system = rt->system;
  ci.pool = &rt->pool;
  ci.watchdog = rt->watchdog;
  ci.resumer = links.resumer;
  ci.faults = p->fault_report;
  if (injector)
    ci.scenario = std::make_shared<const transport::fault_scenario>(injector->scenario());
  ci.board = links.board;
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
