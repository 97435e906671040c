/// MCCL_METRICS_PORT: what a rank's /metrics and /status endpoints say
/// (api/status/status_server.hpp serves them).

#include "api/status/runtime_status.hpp"

#include "api/communicator/communicator_impl.hpp"
#include "api/status/status_server.hpp"

#include <mccl/metrics.hpp>
#include "config/log.hpp"

#include <nlohmann/json.hpp>
#include <unistd.h>

namespace mccl {

namespace {

/// How long /status waits for one communicator's engine to answer.
constexpr std::chrono::milliseconds engine_answer{500};

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0)
    return "?";
  return buf;
}

/// {"rank", "pid", "host", "communicators": [{"comm_id", "rank", "size",
/// "epoch", "members", "revoked", "answered", "ops": [{"op", "seq",
/// "algorithm", "where", "running_ms"}]}]}; epoch and members as the
/// communicator's supervisor keeps them.
std::string status_json(runtime::impl& rt, int rank) {
  std::vector<std::shared_ptr<communicator::impl>> comms;
  {
    std::lock_guard<std::mutex> guard{rt.comms_mutex};
    for (const auto& w : rt.comms)
      if (auto c = w.lock())
        comms.push_back(std::move(c));
  }
  nlohmann::json out;
  out["rank"] = rank;
  out["pid"] = static_cast<long>(::getpid());
  out["host"] = host_name();
  out["communicators"] = nlohmann::json::array();
  for (const auto& c : comms) {
    if (c->finalized.load() || !c->core)
      continue;
    nlohmann::json comm;
    comm["comm_id"] = c->comm_id;
    comm["rank"] = c->rank;
    comm["size"] = c->world;
    auto members = c->core->members();
    comm["epoch"] = members.epoch;
    comm["members"] = members.members;
    comm["revoked"] = c->core->revoked();
    std::vector<engine::op_status> ops;
    bool answered = c->core->status(ops, engine_answer);
    comm["answered"] = answered;
    comm["ops"] = nlohmann::json::array();
    for (const auto& op : ops)
      comm["ops"].push_back({{"op", op.op},
                             {"collective", op.collective},
                             {"seq", op.seq},
                             {"algorithm", op.algorithm},
                             {"where", op.where},
                             {"running_ms", op.running_ms}});
    out["communicators"].push_back(std::move(comm));
  }
  return out.dump() + "\n";
}

} // namespace

void serve_status(runtime::impl& rt, const config& c, int rank) {
  if (c.metrics_port == 0)
    return;
  std::lock_guard<std::mutex> guard{rt.status_mutex};
  if (rt.status)
    return;
  long port = static_cast<long>(c.metrics_port) + rank;
  if (port > 65535)
    throw error(errc::invalid_config, "MCCL_METRICS_PORT=" + std::to_string(c.metrics_port)
                                        + " + rank " + std::to_string(rank)
                                        + " is beyond port 65535");
  auto server = std::make_shared<status_server>(
    c.metrics_addr, static_cast<unsigned short>(port),
    [rank] {
      return status_server::page{"text/plain; version=0.0.4", to_prometheus(get_metrics(), rank)};
    },
    [&rt, rank] { return status_server::page{"application/json", status_json(rt, rank)}; });
  MCCL_LOG(info, "rank " << rank << ": serving /metrics and /status on http://" << c.metrics_addr
                         << ":" << server->port());
  rt.status = std::move(server);
}

} // namespace mccl
