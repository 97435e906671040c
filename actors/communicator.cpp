#include "actors/runtime_impl.hpp"

#include "actors/inline_path.hpp"
#include "actors/link_actor.hpp"
#include "actors/messages.hpp"
#include "actors/op_runner.hpp"
#include "actors/progress_actor.hpp"
#include "config/log.hpp"
#include "reducers/reduce.hpp"
#include "transport/fault/fault_connection.hpp"
#include "transport/tcp/interfaces.hpp"
#include "transport/tcp/socket_util.hpp"
#include "transport/tcp/tcp_mesh.hpp"
#include "transport/store/tcp_store.hpp"

#include <caf/all.hpp>

#include <cstdlib>
#include <exception>
#include <algorithm>
#include <random>

namespace mccl {

struct communicator::impl {
  std::shared_ptr<runtime::impl> rt;
  config cfg;
  config_overrides overrides; ///< the explicit settings, inherited by split()
  int rank = 0;
  int world = 1;
  uint32_t comm_id = 0;
  std::string master_addr;
  store_ptr rendezvous; ///< kept for split(): sub-communicators meet here
  /// Rank 0's rendezvous store server; shared with communicators shrunk
  /// from this one, which still meet there after this one is finalized.
  std::shared_ptr<tcp_store_server> store_server;
  caf::actor progress;
  /// Link actor per peer (null for this rank), for probe().
  std::vector<caf::actor> links;
  std::shared_ptr<actors::comm_shared> shared;
  /// Small ops run on the caller's thread when nothing else is in flight.
  std::unique_ptr<actors::inline_path> inline_ops;
  /// Larger ones run the same way on the op thread (op_runner.hpp); null
  /// when MCCL_OP_THREAD_BYTES is 0 or there is no inline path.
  std::shared_ptr<actors::op_runner> op_thread;
  /// Ops submitted to the progress actor and not yet completed.
  std::shared_ptr<std::atomic<int>> in_flight = std::make_shared<std::atomic<int>>(0);
  /// Orders submissions; held for the whole of an inline op, so ops from
  /// several threads never overlap with one.
  std::mutex submit_mutex;
  std::mutex finalize_mutex;
  std::atomic<bool> finalized{false};
  std::atomic<uint64_t> splits{0};
  std::atomic<uint64_t> shrinks{0};
  /// Fault injection (MCCL_FAULTS or comm_options::faults); null: none.
  std::shared_ptr<transport::fault_recorder> fault_report;

  ~impl() { finalize(); }

  void finalize() {
    std::lock_guard<std::mutex> guard{finalize_mutex};
    if (finalized.exchange(true))
      return;
    // An op running inline on another thread ends first (bounded by its
    // deadline); later submissions see `finalized`.
    std::lock_guard<std::mutex> no_submissions{submit_mutex};
    if (op_thread) {
      // As on the actor path, finalizing with ops in flight aborts them:
      // queued ones never start, a running one ends within 100 ms.
      op_thread->stop("the communicator was finalized", [this] {
        shared->close("rank " + std::to_string(rank) + " finalized the communicator with ops in flight");
      });
    }
    if (progress) {
      caf::scoped_actor self{*rt->system};
      self->request(progress, std::chrono::seconds(3), actors::shutdown_atom::value)
        .receive([](bool) {},
                 [this](caf::error& e) {
                   MCCL_LOG(warn, "finalize of rank " << rank << ": progress actor did not confirm: "
                                                      << caf::to_string(e));
                 });
      progress = nullptr;
    }
    store_server.reset();
    if (fault_report) {
      fault_report->write();
      MCCL_LOG(info, "rank " << rank << ": fault report written to " << fault_report->prefix()
                             << ".txt and .json");
    }
  }

  /// Puts the op's outcome in the fault report once it is done.
  void record_outcome(const std::shared_ptr<work_state>& state) {
    std::weak_ptr<work_state> weak = state;
    state->add_callback([weak, report = fault_report, crc = cfg.transport_crc] {
      auto s = weak.lock();
      if (!s)
        return;
      auto m = s->metrics();
      auto failure = s->failure();
      report->op(m.op, m.algorithm, m.seq, !failure, failure ? failure->message() : "", crc,
                 std::chrono::duration<double, std::milli>(m.duration).count());
    });
  }

  [[noreturn]] void reject(const op_request& op, errc code, const std::string& why) const {
    auto what = describe(op);
    throw error(code, what + " on rank " + std::to_string(rank) + ": " + why);
  }

  void need(const op_request& op, const void* p, std::size_t elems, const char* which) const {
    if (elems > 0 && !p)
      reject(op, errc::invalid_argument, std::string("null ") + which + " buffer for "
                                           + std::to_string(elems) + " elements");
  }

  void check_rank_arg(const op_request& op, int r, const char* what) const {
    if (r < 0 || r >= world)
      reject(op, errc::invalid_argument, std::string(what) + " " + std::to_string(r)
                                           + " is outside the communicator of " + std::to_string(world)
                                           + " ranks");
  }

  void check_counts(const op_request& op, const std::vector<std::size_t>& v, const char* what) const {
    if (v.size() != static_cast<std::size_t>(world))
      reject(op, errc::invalid_argument, std::string(what) + " has " + std::to_string(v.size())
                                           + " entries; it needs one per rank ("
                                           + std::to_string(world) + ")");
  }

  /// Checks what can be checked on this rank alone, then hands the op to
  /// the progress actor. Throws mccl::error naming the op and the problem.
  work submit(std::shared_ptr<op_request> req) {
    auto& op = *req;
    if (finalized.load())
      reject(op, errc::finalized, "the communicator was finalized");
    if (dtype_size(op.type) == 0)
      reject(op, errc::invalid_argument, "unknown dtype " + std::to_string(static_cast<int>(op.type)));
    if (is_reduction(op.kind)) {
      auto why = check_reduction(op.op, op.type);
      if (!why.empty())
        reject(op, errc::unsupported, why);
    }
    if (is_rooted(op.kind))
      check_rank_arg(op, op.root, "root");
    bool root = op.root == rank;
    switch (op.kind) {
      case op_kind::allreduce:
        need(op, op.send, op.count, "send");
        need(op, op.recv, op.count, "recv");
        break;
      case op_kind::broadcast:
        if (root && !op.send)
          op.send = op.recv;
        need(op, op.recv, op.count, "recv");
        break;
      case op_kind::reduce:
        need(op, op.send, op.count, "send");
        if (root)
          need(op, op.recv, op.count, "recv");
        break;
      case op_kind::allgather:
      case op_kind::reduce_scatter:
        if (op.is_v())
          check_counts(op, op.counts, "counts");
        need(op, op.send, op.kind == op_kind::allgather ? op.count_of(rank) : op.total_count(world), "send");
        need(op, op.recv, op.kind == op_kind::allgather ? op.total_count(world) : op.count_of(rank), "recv");
        break;
      case op_kind::gather:
        need(op, op.send, op.count, "send");
        if (root)
          need(op, op.recv, op.count * world, "recv");
        break;
      case op_kind::scatter:
        if (root)
          need(op, op.send, op.count * world, "send");
        need(op, op.recv, op.count, "recv");
        break;
      case op_kind::alltoall:
        if (op.is_v()) {
          check_counts(op, op.counts, "send_counts");
          check_counts(op, op.recv_counts, "recv_counts");
          if (op.counts[rank] != op.recv_counts[rank])
            reject(op, errc::invalid_argument,
                   "send_counts[" + std::to_string(rank) + "] = " + std::to_string(op.counts[rank])
                     + " differs from recv_counts[" + std::to_string(rank)
                     + "] = " + std::to_string(op.recv_counts[rank]) + " (the block a rank keeps)");
          std::size_t rtotal = 0;
          for (auto c : op.recv_counts)
            rtotal += c;
          need(op, op.send, op.total_count(world), "send");
          need(op, op.recv, rtotal, "recv");
        } else {
          need(op, op.send, op.count * world, "send");
          need(op, op.recv, op.count * world, "recv");
        }
        break;
      case op_kind::send:
      case op_kind::recv:
        check_rank_arg(op, op.root, "peer");
        if (op.root == rank)
          reject(op, errc::invalid_argument, "the peer is this rank itself (copy the buffer instead)");
        need(op, op.kind == op_kind::send ? op.send : op.recv, op.count,
             op.kind == op_kind::send ? "send" : "recv");
        break;
      case op_kind::custom:
        if (!find_algorithm(op_kind::custom, op.name)) {
          std::string known;
          for (const auto& n : algorithm_names(op_kind::custom))
            known += (known.empty() ? "" : ", ") + n;
          reject(op, errc::invalid_argument, "no collective named \"" + op.name + "\" is registered"
                                               + (known.empty() ? std::string(" (none are)")
                                                                : " (registered: " + known + ")"));
        }
        break;
      case op_kind::barrier:
        break;
    }
    req->work = std::make_shared<work_state>(cfg.timeout);
    work w(req->work);
    if (fault_report)
      record_outcome(req->work);
    std::lock_guard<std::mutex> guard{submit_mutex};
    if (finalized.load())
      reject(op, errc::finalized, "the communicator was finalized");
    bool idle = in_flight->load() == 0 && !(op_thread && op_thread->busy());
    if (inline_ops && idle && inline_ops->eligible(op, cfg.inline_bytes) && inline_ops->try_run(op, false))
      return w;
    // Once the op thread has ops, every later op queues behind them: ops
    // leave it in issue order.
    if (op_thread && (op_thread->busy() || (idle && inline_ops->eligible(op, cfg.op_thread_bytes)))) {
      op_thread->push(std::move(req));
      return w;
    }
    to_actors(std::move(req));
    return w;
  }

  /// Hands an op to the progress actor (the actor path).
  void to_actors(std::shared_ptr<op_request> req) {
    in_flight->fetch_add(1);
    req->work->track(in_flight);
    caf::anon_send(progress, actors::submit_atom::value, std::move(req));
  }
};

namespace {

int env_int(const environment& env, const char* name, int lo, int hi, bool& present) {
  auto i = env.find(name);
  present = i != env.end();
  if (!present)
    return 0;
  const auto& v = i->second;
  char* end = nullptr;
  errno = 0;
  long x = v.empty() ? 0 : std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi)
    throw error(errc::invalid_config, std::string(name) + "=\"" + v + "\": expected an integer in "
                                        + std::to_string(lo) + ".." + std::to_string(hi));
  return static_cast<int>(x);
}

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

config_overrides merged(const config_overrides& a, const config_overrides& b) {
  config_overrides out = a;
  for (const auto& [k, v] : b.values())
    out.set(k, v);
  return out;
}

} // namespace

comm_options comm_options_from_env() {
  auto env = process_environment();
  comm_options o;
  bool has_rank = false, has_world = false, has_port = false;
  o.world_size = env_int(env, "WORLD_SIZE", 1, 1 << 20, has_world);
  o.rank = env_int(env, "RANK", 0, 1 << 20, has_rank);
  if (!has_rank && !has_world) {
    o.world_size = 1; // a lone process: a group of one
    return o;
  }
  if (has_rank != has_world)
    throw error(errc::invalid_config, std::string(has_rank ? "RANK" : "WORLD_SIZE")
                                        + " is set but " + (has_rank ? "WORLD_SIZE" : "RANK")
                                        + " is not; set both (mcclrun and torchrun do)");
  if (o.rank >= o.world_size)
    throw error(errc::invalid_config, "RANK=" + std::to_string(o.rank) + " is not below WORLD_SIZE="
                                        + std::to_string(o.world_size));
  auto a = env.find("MASTER_ADDR");
  if (a != env.end() && !a->second.empty())
    o.master_addr = a->second;
  o.master_port = env_int(env, "MASTER_PORT", 1, 65535, has_port);
  if (o.world_size > 1 && (!has_port || a == env.end()))
    throw error(errc::invalid_config,
                std::string(!has_port ? "MASTER_PORT" : "MASTER_ADDR") + " is not set (rank "
                  + std::to_string(o.rank) + " of " + std::to_string(o.world_size)
                  + "): set MASTER_ADDR to rank 0's address and MASTER_PORT to a free port, or "
                    "start the ranks with mcclrun");
  return o;
}

void register_collective(const std::string& name, algorithm_factory factory) {
  if (name.empty())
    throw error(errc::invalid_argument, "register_collective: the name is empty");
  if (!factory)
    throw error(errc::invalid_argument, "register_collective(\"" + name + "\"): no factory");
  register_algorithm(op_kind::custom, name, std::move(factory));
}

namespace detail {

struct communicator_factory {
  static communicator make(std::shared_ptr<communicator::impl> p) { return communicator(std::move(p)); }
};

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

communicator make_communicator(const std::shared_ptr<runtime::impl>& rt, const comm_options& o,
                               bool sub_communicator) {
  auto p = std::make_shared<communicator::impl>();
  p->rt = rt;
  p->overrides = o.overrides;
  p->master_addr = o.master_addr;
  p->cfg = resolve_config(merged(rt->overrides, o.overrides));
  p->rank = o.rank;
  p->world = o.world_size;
  p->comm_id = o.comm_id;
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
  if (cfg.transport == transport_kind::shm || cfg.transport == transport_kind::rdma)
    throw error(errc::unsupported,
                std::string("MCCL_TRANSPORT=") + to_string(cfg.transport) + ": the "
                  + (cfg.transport == transport_kind::shm ? "shared-memory" : "RDMA")
                  + " transport is not built yet in this version; use MCCL_TRANSPORT=tcp or auto");

  actors::progress_init pi;
  pi.rank = o.rank;
  pi.world = o.world_size;
  pi.comm_id = o.comm_id;
  pi.cfg = cfg;
  pi.watchdog = rt->watchdog;
  pi.shared->recorder = std::make_shared<actors::flight_recorder>(cfg.flight_recorder);
  std::vector<transport::connection_ptr> conns;
  std::shared_ptr<transport::tcp_link_resumer> resumer; // MCCL_RECONNECT_MS
  // Before connecting: a bad scenario file fails fast, on every rank.
  auto injector = o.world_size > 1 ? make_fault_injector(*p, o) : nullptr;

  if (o.world_size > 1) {
    store_ptr rendezvous = o.store;
    if (!rendezvous) {
      if (cfg.port_base != 0 && cfg.port_base + o.rank == o.master_port)
        throw error(errc::invalid_config,
                    "MCCL_PORT_BASE=" + std::to_string(cfg.port_base) + " makes rank "
                      + std::to_string(o.rank) + " listen on port "
                      + std::to_string(cfg.port_base + o.rank)
                      + ", which is MASTER_PORT (the rendezvous store's port); choose "
                        "MCCL_PORT_BASE so that MCCL_PORT_BASE..MCCL_PORT_BASE+WORLD_SIZE-1 "
                        "excludes MASTER_PORT, or MCCL_PORT_BASE=0 for any free port");
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
    std::string token = cfg.job_token;
    if (token.empty()) {
      // No shared secret configured: rank 0 makes one per job and hands it
      // out through the store, so strays from other jobs are refused.
      if (o.rank == 0) {
        token = random_token();
        rendezvous->set(prefix + "token", token);
      } else {
        token = rendezvous->get(prefix + "token", cfg.connect_timeout);
      }
    }
    transport::mesh_options mo;
    mo.rank = o.rank;
    mo.world = o.world_size;
    mo.comm_id = o.comm_id;
    mo.token = token;
    auto listen = choose_listen_addresses(cfg, o.master_addr, o.rank);
    mo.listen_addrs = listen.addresses;
    mo.advertise_addrs = listen.advertised;
    mo.sockets_per_peer = cfg.sockets_per_peer;
    mo.listen_port = static_cast<unsigned short>(cfg.port_base == 0 ? 0 : cfg.port_base + o.rank);
    mo.connect_timeout = cfg.connect_timeout;
    mo.socket_buffer_bytes = cfg.socket_buffer_bytes;
    mo.rendezvous = rendezvous.get();
    mo.key_prefix = prefix;
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
    cfg.hosts = pi.cfg.hosts = transport::count_hosts(mo);
    MCCL_LOG(info, "rank " << o.rank << ": connected to " << o.world_size - 1 << " peer(s) over "
                           << sockets << " socket(s), " << cfg.hosts << " host(s)");
    if (injector) {
      for (int peer = 0; peer < o.world_size; ++peer)
        if (conns[peer])
          conns[peer] = injector->wrap(conns[peer], peer);
      injector->start();
    }
    p->rendezvous = rendezvous;
  }
  MCCL_LOG(info, "communicator " << o.comm_id << ": " << describe_selection(o.world_size, cfg));

  auto& sys = *rt->system;
  p->shared = pi.shared;
  p->progress = sys.spawn<actors::progress_actor>(pi);
  std::vector<caf::actor> links(static_cast<std::size_t>(o.world_size));
  actors::inline_init ii;
  ii.rank = o.rank;
  ii.world = o.world_size;
  ii.comm_id = o.comm_id;
  ii.cfg = cfg;
  ii.pool = &rt->pool;
  ii.progress = p->progress;
  ii.shared = p->shared;
  ii.peers.resize(static_cast<std::size_t>(o.world_size));
  ii.recorder = p->fault_report;
  for (int peer = 0; peer < o.world_size; ++peer) {
    if (!conns.empty() && conns[peer]) {
      actors::link_init li;
      li.rank = o.rank;
      li.peer = peer;
      li.comm_id = o.comm_id;
      li.conn = conns[peer];
      li.progress = p->progress;
      li.pool = &rt->pool;
      li.crc = cfg.transport_crc;
      li.crc_retries = cfg.crc_retries;
      li.spin = cfg.spin;
      li.heartbeat = cfg.heartbeat;
      li.heartbeat_misses = cfg.heartbeat_misses;
      li.recorder = p->fault_report;
      if (resumer) {
        li.resumer = resumer;
        li.reconnect = std::min(cfg.reconnect, cfg.timeout); // never beyond the op deadline
      }
      // The largest data frame a peer sends: a pipelining chunk, or a whole
      // small op on the latency path.
      li.max_payload = static_cast<uint32_t>(std::min<std::size_t>(
        std::max(cfg.chunk_bytes, cfg.small_msg_threshold), wire::max_payload_limit));
      // With CRC, small ops stay on the actor path: the retransmit state
      // lives in the link (crc_recovery.hpp), and a link without a lease is
      // never lent to the inline path.
      if (!cfg.transport_crc)
        li.lease = std::make_shared<actors::link_lease>();
      ii.max_payload = li.max_payload;
      ii.peers[peer] = actors::inline_peer{li.conn, li.lease, nullptr};
      links[peer] = sys.spawn<actors::link_actor>(std::move(li));
      ii.peers[peer].link = links[peer];
    }
  }
  if (!conns.empty())
    p->inline_ops = std::make_unique<actors::inline_path>(std::move(ii));
  if (p->inline_ops && p->inline_ops->usable() && cfg.op_thread_bytes > 0) {
    // The communicator outlives its op thread: finalize() stops it.
    auto* self = p.get();
    p->op_thread = std::make_shared<actors::op_runner>(
      o.rank,
      [self](op_request& op, actors::op_runner::runner who) {
        return self->in_flight->load() == 0 && self->inline_ops->eligible(op, self->cfg.op_thread_bytes)
               && self->inline_ops->try_run(op, who == actors::op_runner::runner::op_thread);
      },
      [self](op_ptr op) { self->to_actors(std::move(op)); });
  }
  p->links = links;
  // Sent from this thread before any submit, so the progress actor has its
  // links before the first op arrives (mailboxes keep per-sender order).
  caf::anon_send(p->progress, std::move(links));
  {
    std::lock_guard<std::mutex> guard{rt->comms_mutex};
    rt->comms.push_back(p);
  }
  return communicator_factory::make(p);
}

} // namespace detail

communicator runtime::create_communicator(const comm_options& o) {
  return detail::make_communicator(impl_, o, false);
}

communicator::impl& communicator::checked() const {
  if (!impl_)
    throw error(errc::invalid_argument, "use of an empty communicator handle");
  return *impl_;
}

int communicator::rank() const { return checked().rank; }
int communicator::size() const { return checked().world; }
const config& communicator::settings() const { return checked().cfg; }

namespace {

std::shared_ptr<op_request> request(op_kind kind, const void* send, void* recv, std::size_t count,
                                    dtype type, redop op = redop::sum, int root = 0) {
  auto r = std::make_shared<op_request>();
  r->kind = kind;
  r->send = send;
  r->recv = recv;
  r->count = count;
  r->type = type;
  r->op = op;
  r->root = root;
  return r;
}

} // namespace

work communicator::allreduce(const void* send, void* recv, std::size_t count, dtype type, redop op) {
  return checked().submit(request(op_kind::allreduce, send, recv, count, type, op));
}

work communicator::broadcast(const void* send, void* recv, std::size_t count, dtype type, int root) {
  return checked().submit(request(op_kind::broadcast, send, recv, count, type, redop::sum, root));
}

work communicator::reduce(const void* send, void* recv, std::size_t count, dtype type, redop op,
                          int root) {
  return checked().submit(request(op_kind::reduce, send, recv, count, type, op, root));
}

work communicator::allgather(const void* send, void* recv, std::size_t count, dtype type) {
  return checked().submit(request(op_kind::allgather, send, recv, count, type));
}

work communicator::allgatherv(const void* send, void* recv, const std::vector<std::size_t>& counts,
                              dtype type) {
  auto r = request(op_kind::allgather, send, recv, 0, type);
  r->counts = counts;
  return checked().submit(std::move(r));
}

work communicator::reduce_scatter(const void* send, void* recv, std::size_t count, dtype type,
                                  redop op) {
  return checked().submit(request(op_kind::reduce_scatter, send, recv, count, type, op));
}

work communicator::reduce_scatterv(const void* send, void* recv,
                                   const std::vector<std::size_t>& counts, dtype type, redop op) {
  auto r = request(op_kind::reduce_scatter, send, recv, 0, type, op);
  r->counts = counts;
  return checked().submit(std::move(r));
}

work communicator::gather(const void* send, void* recv, std::size_t count, dtype type, int root) {
  return checked().submit(request(op_kind::gather, send, recv, count, type, redop::sum, root));
}

work communicator::scatter(const void* send, void* recv, std::size_t count, dtype type, int root) {
  return checked().submit(request(op_kind::scatter, send, recv, count, type, redop::sum, root));
}

work communicator::alltoall(const void* send, void* recv, std::size_t count, dtype type) {
  return checked().submit(request(op_kind::alltoall, send, recv, count, type));
}

work communicator::alltoallv(const void* send, const std::vector<std::size_t>& send_counts,
                             void* recv, const std::vector<std::size_t>& recv_counts, dtype type) {
  auto r = request(op_kind::alltoall, send, recv, 0, type);
  r->counts = send_counts;
  r->recv_counts = recv_counts;
  return checked().submit(std::move(r));
}

work communicator::barrier() {
  return checked().submit(request(op_kind::barrier, nullptr, nullptr, 0, dtype::uint8));
}

work communicator::custom(const std::string& name, const void* send, void* recv, std::size_t count,
                          dtype type, redop op, int root) {
  auto r = request(op_kind::custom, send, recv, count, type, op, root);
  r->name = name;
  return checked().submit(std::move(r));
}

work communicator::send(const void* data, std::size_t count, dtype type, int peer, uint32_t tag) {
  auto r = request(op_kind::send, data, nullptr, count, type, redop::sum, peer);
  r->tag = tag;
  return checked().submit(std::move(r));
}

work communicator::recv(void* data, std::size_t count, dtype type, int peer, uint32_t tag) {
  auto r = request(op_kind::recv, nullptr, data, count, type, redop::sum, peer);
  r->tag = tag;
  return checked().submit(std::move(r));
}

std::vector<int> communicator::probe(uint32_t tag) {
  auto& p = checked();
  if (p.finalized.load())
    throw error(errc::finalized, "probe on rank " + std::to_string(p.rank)
                                   + ": the communicator was finalized");
  std::vector<int> ready;
  caf::scoped_actor self{*p.rt->system};
  for (int peer = 0; peer < p.world; ++peer) {
    const auto& link = p.links.empty() ? caf::actor{} : p.links[static_cast<std::size_t>(peer)];
    if (!link)
      continue;
    // A link answers from its mailbox at once; the bound only guards a
    // link that has already stopped.
    self->request(link, std::chrono::seconds(5), actors::probe_atom::value, tag)
      .receive([&](bool has) { if (has) ready.push_back(peer); },
               [&](caf::error& e) {
                 throw error(errc::peer_lost, "probe on rank " + std::to_string(p.rank)
                                                + ": the link to rank " + std::to_string(peer)
                                                + " did not answer: " + caf::to_string(e));
               });
  }
  return ready;
}

communicator communicator::split(int color, int key) {
  auto& p = checked();
  // The groups meet in the rendezvous store served by rank 0 of this
  // communicator: no rank leaves split (and perhaps finalizes this
  // communicator, taking the store down) before every group has connected.
  // A rank whose group failed still joins the barrier, then throws.
  auto finish_split = [this](communicator sub, std::exception_ptr failed) {
    barrier().wait();
    if (failed)
      std::rethrow_exception(failed);
    return sub;
  };
  // Everyone learns everyone's (color, key) through this communicator.
  std::vector<int64_t> mine{color, key};
  std::vector<int64_t> all(2 * static_cast<std::size_t>(p.world));
  allgather(mine.data(), all.data(), 2, dtype::int64).wait();
  auto index = p.splits.fetch_add(1);
  if (color < 0)
    return finish_split(communicator{}, nullptr);
  std::vector<std::pair<int64_t, int>> members; // (key, rank)
  for (int r = 0; r < p.world; ++r)
    if (all[2 * r] == color)
      members.emplace_back(all[2 * r + 1], r);
  std::sort(members.begin(), members.end());
  comm_options o;
  o.world_size = static_cast<int>(members.size());
  for (int i = 0; i < o.world_size; ++i)
    if (members[i].second == p.rank)
      o.rank = i;
  // Every member derives the same id from (parent, how many splits before
  // this one, color); frames and store keys of the new group carry it.
  o.comm_id = derived_comm_id(p.comm_id, {index, static_cast<uint64_t>(color)});
  o.store = p.rendezvous;
  o.master_addr = p.master_addr;
  o.overrides = p.overrides;
  MCCL_LOG(info, "split " << index << " of communicator " << p.comm_id << ": color " << color
                          << " -> communicator " << o.comm_id << ", rank " << o.rank << " of "
                          << o.world_size);
  communicator sub;
  std::exception_ptr failed;
  try {
    sub = detail::make_communicator(p.rt, o, true);
  } catch (...) {
    failed = std::current_exception();
  }
  return finish_split(std::move(sub), failed);
}

communicator communicator::shrink(const std::vector<int>& excluded) {
  auto& p = checked();
  std::vector<bool> gone(static_cast<std::size_t>(p.world), false);
  std::string listed;
  for (int r : excluded) {
    if (r < 0 || r >= p.world)
      throw error(errc::invalid_argument, "shrink on rank " + std::to_string(p.rank) + ": excluded rank "
                                            + std::to_string(r) + " is outside the communicator of "
                                            + std::to_string(p.world) + " ranks");
    if (r == p.rank)
      throw error(errc::invalid_argument, "shrink on rank " + std::to_string(p.rank)
                                            + ": this rank is in the excluded set; only the "
                                              "surviving ranks call shrink");
    if (!gone[r])
      listed += (listed.empty() ? "" : ", ") + std::to_string(r);
    gone[r] = true;
  }
  // The survivors meet in this communicator's rendezvous store. The default
  // one is served by rank 0's process: without it nobody can meet.
  if (gone[0] && std::dynamic_pointer_cast<tcp_store_client>(p.rendezvous))
    throw error(errc::invalid_argument,
                "shrink on rank " + std::to_string(p.rank) + ": rank 0 is excluded, but it serves the "
                "rendezvous store at MASTER_ADDR:MASTER_PORT where the survivors would meet; create "
                "the communicator with a store of your own (comm_options::store) to survive rank 0");
  comm_options o;
  o.world_size = 0;
  uint64_t mask_hash = 0;
  for (int r = 0; r < p.world; ++r) {
    if (gone[r]) {
      mask_hash = mask_hash * 1000003 + static_cast<uint64_t>(r) + 1;
      continue;
    }
    if (r == p.rank)
      o.rank = o.world_size;
    ++o.world_size;
  }
  auto index = p.shrinks.fetch_add(1);
  // Split indices are small; shrinks count from the top so the two never meet.
  o.comm_id = derived_comm_id(p.comm_id, {~index, mask_hash});
  o.store = p.rendezvous;
  o.master_addr = p.master_addr;
  o.overrides = p.overrides;
  MCCL_LOG(warn, "shrink " << index << " of communicator " << p.comm_id << " without rank(s) " << listed
                           << " -> communicator " << o.comm_id << ", rank " << o.rank << " of "
                           << o.world_size);
  if (o.world_size > 1 && !o.store)
    throw error(errc::internal, "shrink on rank " + std::to_string(p.rank)
                                  + ": this communicator has no rendezvous store");
  auto sub = detail::make_communicator(p.rt, o, true);
  sub.impl_->store_server = p.store_server;
  // Nobody returns (and perhaps finalizes this communicator, taking rank 0's
  // store down) before every survivor has connected.
  sub.barrier().wait();
  return sub;
}

void communicator::abort(const std::string& reason) {
  auto& p = checked();
  if (!p.finalized.load() && p.progress) {
    // An op running inline on another thread stops waiting within 100 ms.
    p.shared->close("rank " + std::to_string(p.rank) + " called abort: " + reason);
    caf::anon_send(p.progress, actors::abort_atom::value, reason);
  }
}

void communicator::finalize() {
  if (impl_)
    impl_->finalize();
}

} // namespace mccl
