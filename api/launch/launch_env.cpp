// Who this rank is, from what the launcher put in the environment:
// torchrun's and mcclrun's RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT,
// else mlx.launch's MLX_RANK with MLX_HOSTFILE (ring) or
// MLX_JACCL_COORDINATOR with MLX_IBV_DEVICES (JACCL). MLX's launchers give
// every rank its address instead of a rendezvous service; mccl's rank 0
// serves the rendezvous at its own address from the hostfile (or the
// coordinator's), so an MLX job needs nothing else running.

#include "config/log.hpp"
#include <mccl/communicator.hpp>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace mccl {

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

std::string env_or_empty(const environment& env, const char* name) {
  auto i = env.find(name);
  return i == env.end() ? std::string() : i->second;
}

[[noreturn]] void bad_launch(const std::string& message) {
  throw error(errc::invalid_config, message);
}

struct host_port {
  std::string host;
  int port = 0;
};

/// "10.0.0.1:5000" or "[fe80::1]:5000"; `where` names the variable or file entry.
host_port parse_host_port(const std::string& text, const std::string& where) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    bad_launch(where + " = " + mccl::quoted(text) + ": expected \"ip:port\"");
  host_port out;
  out.host = text.substr(0, colon);
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']')
    out.host = out.host.substr(1, out.host.size() - 2);
  char* end = nullptr;
  long port = std::strtol(text.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port < 1 || port > 65535)
    bad_launch(where + " = " + mccl::quoted(text) + ": the port is not in 1..65535");
  out.port = static_cast<int>(port);
  return out;
}

nlohmann::json read_json_file(const std::string& path, const char* variable) {
  std::ifstream in(path);
  if (!in)
    bad_launch(std::string(variable) + "=" + mccl::quoted(path) + ": cannot read the file");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    bad_launch(std::string(variable) + "=" + mccl::quoted(path) + ": not valid JSON: " + e.what());
  }
}

/// The launcher's address for this rank becomes its listen address, unless
/// the program chose one itself (MCCL_LISTEN_ADDR or MCCL_IFNAME).
void listen_on(comm_options& o, const environment& env, const std::string& host) {
  if (env.count("MCCL_LISTEN_ADDR") == 0 && env.count("MCCL_IFNAME") == 0)
    o.overrides.set("MCCL_LISTEN_ADDR", host);
}

/// MLX ring: MLX_HOSTFILE is a JSON list with one list of "ip:port" per rank.
void from_mlx_hostfile(comm_options& o, const environment& env, const std::string& path) {
  auto doc = read_json_file(path, "MLX_HOSTFILE");
  if (!doc.is_array() || doc.empty())
    bad_launch("MLX_HOSTFILE=" + mccl::quoted(path) + ": expected a list with one list of \"ip:port\" per rank");
  std::vector<host_port> first(doc.size());
  for (std::size_t r = 0; r < doc.size(); ++r) {
    std::string where = "MLX_HOSTFILE " + path + " rank " + std::to_string(r);
    const auto& entry = doc[r];
    if (!entry.is_array() || entry.empty() || !entry[0].is_string())
      bad_launch(where + ": expected a non-empty list of \"ip:port\" strings");
    first[r] = parse_host_port(entry[0].get<std::string>(), where);
  }
  o.world_size = static_cast<int>(doc.size());
  if (o.rank >= o.world_size)
    bad_launch("MLX_RANK=" + std::to_string(o.rank) + " but MLX_HOSTFILE " + path + " lists "
               + std::to_string(o.world_size) + " rank(s)");
  o.master_addr = first[0].host;
  o.master_port = first[0].port;
  listen_on(o, env, first[o.rank].host);
  MCCL_LOG(info, "rank " << o.rank << " of " << o.world_size << " from MLX_HOSTFILE " << path
                         << ": rank 0 serves the rendezvous at " << first[0].host << ":"
                         << first[0].port);
}

/// JACCL: MLX_IBV_DEVICES names a JSON matrix, row r = the RDMA device rank r
/// uses towards each peer (null towards itself); MLX_JACCL_COORDINATOR is
/// rank 0's "ip:port". The mesh is described in the log; the transport asks
/// for RDMA, which falls back to TCP with a warning where there is none.
void from_mlx_jaccl(comm_options& o, const environment& env, const std::string& coordinator) {
  auto c = parse_host_port(coordinator, "MLX_JACCL_COORDINATOR");
  auto devices_path = env_or_empty(env, "MLX_IBV_DEVICES");
  if (devices_path.empty())
    bad_launch("MLX_JACCL_COORDINATOR is set but MLX_IBV_DEVICES is not: set it to the JSON file "
               "of RDMA devices per rank (mlx.launch --backend jaccl writes it)");
  auto devices = read_json_file(devices_path, "MLX_IBV_DEVICES");
  if (!devices.is_array() || devices.empty())
    bad_launch("MLX_IBV_DEVICES=" + mccl::quoted(devices_path) + ": expected a list with one row per rank");
  o.world_size = static_cast<int>(devices.size());
  if (o.rank >= o.world_size)
    bad_launch("MLX_RANK=" + std::to_string(o.rank) + " but MLX_IBV_DEVICES " + devices_path
               + " has " + std::to_string(o.world_size) + " row(s)");
  const auto& row = devices[o.rank];
  if (!row.is_array() || row.size() != devices.size())
    bad_launch("MLX_IBV_DEVICES " + devices_path + " row " + std::to_string(o.rank) + ": expected "
               + std::to_string(o.world_size) + " entries (a device name or null per rank)");
  std::ostringstream mesh;
  for (std::size_t p = 0; p < row.size(); ++p)
    if (row[p].is_string())
      mesh << (mesh.tellp() > 0 ? ", " : "") << "peer " << p << " via " << row[p].get<std::string>();
  o.master_addr = c.host;
  o.master_port = c.port;
  if (env.count("MCCL_TRANSPORT") == 0)
    o.overrides.set("MCCL_TRANSPORT", "rdma");
  MCCL_LOG(info, "rank " << o.rank << " of " << o.world_size << " from MLX_IBV_DEVICES "
                         << devices_path << " (RDMA mesh: " << (mesh.tellp() > 0 ? mesh.str() : "no devices")
                         << "); rank 0 serves the rendezvous at MLX_JACCL_COORDINATOR " << coordinator);
}

bool from_mlx(comm_options& o, const environment& env) {
  bool has_rank = false;
  o.rank = env_int(env, "MLX_RANK", 0, 1 << 20, has_rank);
  if (!has_rank)
    return false;
  auto coordinator = env_or_empty(env, "MLX_JACCL_COORDINATOR");
  auto hostfile = env_or_empty(env, "MLX_HOSTFILE");
  if (!coordinator.empty())
    from_mlx_jaccl(o, env, coordinator);
  else if (!hostfile.empty())
    from_mlx_hostfile(o, env, hostfile);
  else
    bad_launch("MLX_RANK=" + std::to_string(o.rank) + " is set but neither MLX_HOSTFILE nor "
               "MLX_JACCL_COORDINATOR is: start the ranks with mcclrun or mlx.launch");
  return true;
}

} // namespace

comm_options comm_options_from_env(bool strict) {
  auto env = process_environment();
  comm_options o;
  bool has_rank = false, has_world = false, has_port = false;
  o.world_size = env_int(env, "WORLD_SIZE", 1, 1 << 20, has_world);
  o.rank = env_int(env, "RANK", 0, 1 << 20, has_rank);
  if (!has_rank && !has_world) {
    if (from_mlx(o, env))
      return o;
    if (strict)
      bad_launch("no distributed setting found: set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
                 "(mcclrun and torchrun do), or MLX_RANK with MLX_HOSTFILE (mlx.launch does)");
    o.world_size = 1; // a lone process: a group of one
    o.rank = 0;
    return o;
  }
  if (has_rank != has_world)
    bad_launch(std::string(has_rank ? "RANK" : "WORLD_SIZE") + " is set but "
               + (has_rank ? "WORLD_SIZE" : "RANK") + " is not; set both (mcclrun and torchrun do)");
  if (o.rank >= o.world_size)
    bad_launch("RANK=" + std::to_string(o.rank) + " is not below WORLD_SIZE=" + std::to_string(o.world_size));
  auto a = env.find("MASTER_ADDR");
  if (a != env.end() && !a->second.empty())
    o.master_addr = a->second;
  o.master_port = env_int(env, "MASTER_PORT", 1, 65535, has_port);
  if (o.world_size > 1 && (!has_port || a == env.end()))
    bad_launch(std::string(!has_port ? "MASTER_PORT" : "MASTER_ADDR") + " is not set (rank "
               + std::to_string(o.rank) + " of " + std::to_string(o.world_size)
               + "): set MASTER_ADDR to rank 0's address and MASTER_PORT to a free port, or "
                 "start the ranks with mcclrun");
  return o;
}

} // namespace mccl
