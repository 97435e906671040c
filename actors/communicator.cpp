#include "actors/runtime_impl.hpp"

#include "actors/link_actor.hpp"
#include "actors/messages.hpp"
#include "actors/progress_actor.hpp"
#include "config/log.hpp"
#include "reducers/reduce.hpp"
#include "transport/interfaces.hpp"
#include "transport/socket_util.hpp"
#include "transport/tcp_mesh.hpp"
#include "transport/tcp_store.hpp"

#include <caf/all.hpp>

#include <cstdlib>
#include <random>

namespace mccl {

struct communicator::impl {
  std::shared_ptr<runtime::impl> rt;
  config cfg;
  int rank = 0;
  int world = 1;
  uint32_t comm_id = 0;
  std::unique_ptr<tcp_store_server> store_server;
  caf::actor progress;
  std::mutex finalize_mutex;
  std::atomic<bool> finalized{false};

  ~impl() { finalize(); }

  void finalize() {
    std::lock_guard<std::mutex> guard{finalize_mutex};
    if (finalized.exchange(true))
      return;
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
  }

  work submit(op_kind kind, const void* send, void* recv, std::size_t count, dtype type, redop op,
              int root) {
    if (finalized.load())
      throw error(errc::finalized, std::string(to_string(kind)) + " on rank "
                                     + std::to_string(rank) + ": the communicator was finalized");
    if (count > 0 && (!send || !recv))
      throw error(errc::invalid_argument, std::string(to_string(kind)) + " on rank "
                                            + std::to_string(rank) + ": null buffer for "
                                            + std::to_string(count) + " elements");
    if (kind == op_kind::allreduce) {
      auto why = check_reduction(op, type);
      if (!why.empty())
        throw error(errc::unsupported, "allreduce on rank " + std::to_string(rank) + ": " + why);
    }
    if (kind == op_kind::broadcast && (root < 0 || root >= world))
      throw error(errc::invalid_argument, "broadcast on rank " + std::to_string(rank) + ": root "
                                            + std::to_string(root) + " is outside the world of "
                                            + std::to_string(world) + " ranks");
    auto req = std::make_shared<op_request>();
    req->kind = kind;
    req->send = send;
    req->recv = recv;
    req->count = count;
    req->type = type;
    req->op = op;
    req->root = root;
    req->work = std::make_shared<work_state>(cfg.timeout);
    work w(req->work);
    caf::anon_send(progress, actors::submit_atom::value, std::move(req));
    return w;
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

boost::asio::ip::address choose_listen_address(const config& cfg, const std::string& master_addr) {
  if (!cfg.listen_addr.empty())
    return boost::asio::ip::make_address(cfg.listen_addr);
  if (!cfg.ifname.empty())
    return transport::address_for_ifname(cfg.ifname);
  auto master = transport::resolve_host(master_addr.empty() ? "127.0.0.1" : master_addr, "MASTER_ADDR");
  return transport::address_routing_to(master);
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

communicator runtime::create_communicator(const comm_options& o) {
  auto p = std::make_shared<communicator::impl>();
  p->rt = impl_;
  p->cfg = resolve_config(merged(impl_->overrides, o.overrides));
  p->rank = o.rank;
  p->world = o.world_size;
  p->comm_id = o.comm_id;
  auto& cfg = p->cfg;
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    throw error(errc::invalid_argument, "rank " + std::to_string(o.rank) + " of world size "
                                          + std::to_string(o.world_size)
                                          + ": need 0 <= rank < world size");
  log::set_rank(o.rank);
  log::set_level(cfg.log_level);
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
  pi.watchdog = impl_->watchdog;
  std::vector<transport::connection_ptr> conns;

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
        p->store_server = std::make_unique<tcp_store_server>(
          impl_->reactor->io(), boost::asio::ip::tcp::endpoint(addr, static_cast<unsigned short>(o.master_port)));
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
    mo.listen_addr = choose_listen_address(cfg, o.master_addr);
    mo.listen_port = static_cast<unsigned short>(cfg.port_base == 0 ? 0 : cfg.port_base + o.rank);
    mo.connect_timeout = cfg.connect_timeout;
    mo.socket_buffer_bytes = cfg.socket_buffer_bytes;
    mo.rendezvous = rendezvous.get();
    mo.key_prefix = prefix;
    conns = transport::build_tcp_mesh(impl_->reactor->io(), mo);
    MCCL_LOG(info, "rank " << o.rank << ": connected to " << o.world_size - 1 << " peer(s)");
  }

  auto& sys = *impl_->system;
  p->progress = sys.spawn<actors::progress_actor>(pi);
  std::vector<caf::actor> links(static_cast<std::size_t>(o.world_size));
  for (int peer = 0; peer < o.world_size; ++peer) {
    if (!conns.empty() && conns[peer]) {
      actors::link_init li;
      li.rank = o.rank;
      li.peer = peer;
      li.comm_id = o.comm_id;
      li.conn = conns[peer];
      li.progress = p->progress;
      li.pool = &impl_->pool;
      li.crc = cfg.transport_crc;
      li.spin = cfg.spin;
      li.heartbeat = cfg.heartbeat;
      // The largest data frame a peer sends: a pipelining chunk, or a whole
      // small op on the latency path.
      li.max_payload = static_cast<uint32_t>(std::min<std::size_t>(
        std::max(cfg.chunk_bytes, cfg.small_msg_threshold), wire::max_payload_limit));
      links[peer] = sys.spawn<actors::link_actor>(std::move(li));
    }
  }
  // Sent from this thread before any submit, so the progress actor has its
  // links before the first op arrives (mailboxes keep per-sender order).
  caf::anon_send(p->progress, std::move(links));
  {
    std::lock_guard<std::mutex> guard{impl_->comms_mutex};
    impl_->comms.push_back(p);
  }
  return communicator(p);
}

communicator::impl& communicator::checked() const {
  if (!impl_)
    throw error(errc::invalid_argument, "use of an empty communicator handle");
  return *impl_;
}

int communicator::rank() const { return checked().rank; }
int communicator::size() const { return checked().world; }
const config& communicator::settings() const { return checked().cfg; }

work communicator::allreduce(void* data, std::size_t count, dtype type, redop op) {
  return checked().submit(op_kind::allreduce, data, data, count, type, op, 0);
}

work communicator::allreduce(const void* send, void* recv, std::size_t count, dtype type, redop op) {
  return checked().submit(op_kind::allreduce, send, recv, count, type, op, 0);
}

work communicator::broadcast(void* data, std::size_t count, dtype type, int root) {
  return checked().submit(op_kind::broadcast, data, data, count, type, redop::sum, root);
}

work communicator::barrier() {
  return checked().submit(op_kind::barrier, nullptr, nullptr, 0, dtype::uint8, redop::sum, 0);
}

void communicator::abort(const std::string& reason) {
  auto& p = checked();
  if (!p.finalized.load() && p.progress)
    caf::anon_send(p.progress, actors::abort_atom::value, reason);
}

void communicator::finalize() {
  if (impl_)
    impl_->finalize();
}

} // namespace mccl
