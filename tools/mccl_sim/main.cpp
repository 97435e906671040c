// mccl-sim: N ranks of mccl's engine in one process over a simulated
// network with virtual time; prints the simulated time of one op next to
// the α–β–γ model's prediction. docs/performance.md, "Simulating large worlds".

#include "tools/mccl_sim/sim_run.hpp"

#include "config/log.hpp"

#include <mccl/config.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

const char* usage =
  "usage: mccl-sim --ranks N [--ranks-per-host K] --op OP [--algo A] --bytes B\n"
  "                [--alpha-us A] [--beta-gbps G] [--host-alpha-us A] [--host-gbps G] [--host-bus-gbps G]\n"
  "                [--host-memory CURVE] [--host-cache CURVE] [--host-peer CURVE]\n"
  "                [--host-cache-per-rank B] [--board-round-us U]\n"
  "                [--max-rank-bytes B] [--kill R[,R...] [--kill-at S[,S...]] [--shrink [--grow K]]]\n"
  "                [--json FILE|-]\n"
  "  OP: allreduce, broadcast, reduce, allgather, reduce_scatter; B: bytes of the op's largest\n"
  "  buffer (64M, 1G, ...); A: the algorithm (default: the table's choice for B and N).\n"
  "  Between hosts: --alpha-us (10) and --beta-gbps (10 Gbit/s); within a host: --host-alpha-us (1)\n"
  "  and --host-gbps (80) per rank, and --host-bus-gbps, the host's memory that all its links share\n"
  "  (default: a quarter of --host-memory's rate for K ranks; 0: unlimited). --host-memory,\n"
  "  --host-cache, --host-peer: RANKS:GB/s,... that many ranks copying at once move through the host's\n"
  "  memory, through their cores' caches, and from banks other cores wrote (bench/host_memory.sh;\n"
  "  default: the lent 64-core machine's); --host-cache-per-rank (6M): the caches a rank's core has.\n"
  "  With every rank on one host mccl-sim models the host board a job would take, each flag round\n"
  "  --board-round-us (0.16) per rank. --kill: those ranks die at --kill-at virtual seconds (one time for all, or\n"
  "  one per rank; default: a quarter of the op's time without the fault); --shrink: the survivors\n"
  "  then run the op again; --grow K: then K newcomers join after them, rank 0 broadcasts the state\n"
  "  to them, and the op runs again.\n"
  "  MCCL_LOG_LEVEL shows the engines' own log (off by default).\n";

[[noreturn]] void bad(const std::string& what) {
  std::cerr << "mccl-sim: " << what << "\n" << usage;
  std::exit(2);
}

double number(const std::string& flag, const std::string& text) {
  try {
    std::size_t used = 0;
    double v = std::stod(text, &used);
    if (used == text.size() && v >= 0)
      return v;
  } catch (const std::exception&) {
  }
  bad(flag + " " + text + ": expected a non-negative number");
}

std::size_t byte_size(const std::string& flag, const std::string& text) {
  auto v = mccl::parse_byte_size(text);
  if (!v)
    bad(flag + " " + text + ": expected a byte size (4, 64K, 64M, 1G)");
  return *v;
}

/// "17,517,900" -> numbers, each checked as `number` does.
std::vector<double> numbers(const std::string& flag, const std::string& text) {
  std::vector<double> out;
  std::size_t from = 0;
  while (true) {
    auto comma = text.find(',', from);
    out.push_back(number(flag, text.substr(from, comma - from)));
    if (comma == std::string::npos)
      return out;
    from = comma + 1;
  }
}

int whole_number(const std::string& flag, double v) {
  if (v != static_cast<double>(static_cast<int>(v)))
    bad(flag + " " + std::to_string(v) + ": expected a whole number");
  return static_cast<int>(v);
}

std::string ms(double seconds) {
  std::ostringstream s;
  s.precision(seconds < 1e-3 ? 3 : 4);
  s << seconds * 1e3 << " ms";
  return s.str();
}

mccl::sim::run_options as_state_broadcast(const mccl::sim::run_options& grown) {
  auto b = grown;
  b.op = mccl::op_kind::broadcast;
  return b;
}

std::size_t failed_survivors(const mccl::sim::run_result& r) {
  std::size_t failed = 0;
  for (const auto& x : r.outcomes)
    failed += x.ok || x.killed ? 0 : 1;
  return failed;
}

nlohmann::json to_json(const mccl::sim::run_options& o, const mccl::sim::run_result& r) {
  auto failed = failed_survivors(r);
  nlohmann::json j = {{"ranks", o.ranks},
                      {"ranks_per_host", o.ranks_per_host},
                      {"op", mccl::to_string(o.op)},
                      {"bytes", o.bytes},
                      {"algorithm", r.algorithm},
                      {"runtime_algorithm", r.runtime_algorithm.empty() ? nlohmann::json() : nlohmann::json(r.runtime_algorithm)},
                      {"alpha_s", o.net.alpha},
                      {"bytes_per_s", o.net.bytes_per_s},
                      {"host_alpha_s", o.host.alpha},
                      {"host_bytes_per_s", o.host.bytes_per_s},
                      {"host_bus_bytes_per_s", mccl::sim::host_bus_of(o)},
                      {"host_memory_gbps", o.board.memory.to_string()},
                      {"host_cache_gbps", o.board.cache.to_string()},
                      {"host_peer_gbps", o.board.peer.to_string()},
                      {"host_cache_bytes_per_rank", o.board.cache_bytes_per_rank},
                      {"simulated_s", r.seconds},
                      {"predicted_s", r.predicted.known ? nlohmann::json(r.predicted.seconds) : nlohmann::json()},
                      {"formula", r.predicted.formula},
                      {"ratio", r.predicted.known && r.predicted.seconds > 0 ? nlohmann::json(r.seconds / r.predicted.seconds)
                                                                             : nlohmann::json()},
                      {"scale", r.scale},
                      {"elements_moved", r.count},
                      {"mismatches", r.mismatches},
                      {"failed_ranks", failed},
                      {"wall_s", r.wall_seconds}};
  if (r.board)
    j["board"] = {{"algorithm", r.board->algorithm},
                  {"modelled_s", r.board->seconds},
                  {"board_ops", r.board->board_ops},
                  {"memory_bytes", r.board->memory_bytes},
                  {"cache_bytes", r.board->cache_bytes},
                  {"peer_bytes", r.board->peer_bytes},
                  {"round_s_per_rank", o.board.round_s_per_rank}};
  if (!o.kills.empty()) {
    nlohmann::json kills = nlohmann::json::array();
    for (const auto& k : o.kills)
      kills.push_back({{"rank", k.rank}, {"at_s", k.at}});
    j["kills"] = kills;
  }
  if (failed > 0) {
    nlohmann::json errors = nlohmann::json::array();
    for (std::size_t i = 0; i < r.outcomes.size(); ++i)
      if (!r.outcomes[i].ok && !r.outcomes[i].killed)
        errors.push_back({{"rank", i}, {"at_s", r.outcomes[i].ended_at}, {"error", r.outcomes[i].error}});
    j["errors"] = errors;
  }
  if (!r.origin.empty())
    j["origin"] = r.origin; // each rank's rank before; -1: a newcomer
  if (r.state_broadcast)
    j["state_broadcast"] = to_json(as_state_broadcast(o), *r.state_broadcast);
  if (r.after_shrink)
    j["after_shrink"] = to_json(mccl::sim::shrunk_options(o), *r.after_shrink);
  if (r.after_grow)
    j["after_grow"] = to_json(mccl::sim::grown_options(o), *r.after_grow);
  return j;
}

/// "rank 17 killed at 29.15 ms" or "ranks 17, 517, 900 killed at 20, 25, 30 ms".
std::string deaths(const mccl::sim::run_options& o) {
  std::ostringstream ranks, times;
  for (std::size_t i = 0; i < o.kills.size(); ++i) {
    ranks << (i > 0 ? ", " : "") << o.kills[i].rank;
    times << (i > 0 ? ", " : "") << o.kills[i].at * 1e3;
  }
  return std::string(o.kills.size() == 1 ? "rank " : "ranks ") + ranks.str() + " killed at " + times.str() + " ms";
}

void print(const mccl::sim::run_options& o, const mccl::sim::run_result& r, const char* indent = "") {
  std::printf("%smccl-sim: %s of %zu bytes on %d ranks (%d per host), algorithm %s\n", indent,
              mccl::to_string(o.op), o.bytes, o.ranks, o.ranks_per_host, r.algorithm.c_str());
  if (r.board)
    std::printf("%s  on one host a job with the default settings takes the host board (%s): modelled %s\n"
                "%s    (%llu board ops; %.3g GB through the host's memory, %.3g GB in the cores' caches, %.3g GB\n"
                "%s    between cores; the model's schedule, not the board's code). Below: the engine's %s,\n"
                "%s    which a job runs with MCCL_SHM_BOARD_BYTES=0 or MCCL_TRANSPORT=tcp\n",
                indent, r.board->algorithm.c_str(), ms(r.board->seconds).c_str(), indent,
                static_cast<unsigned long long>(r.board->board_ops), r.board->memory_bytes / 1e9,
                r.board->cache_bytes / 1e9, r.board->peer_bytes / 1e9, indent, r.algorithm.c_str(), indent);
  std::printf("%s  moved %zu float32 per rank; each payload byte counts %.6g times\n", indent, r.count, r.scale);
  std::printf("%s  simulated %s", indent, ms(r.seconds).c_str());
  if (r.predicted.known)
    std::printf("   predicted %s (%s)   ratio %.3f", ms(r.predicted.seconds).c_str(), r.predicted.formula.c_str(),
                r.predicted.seconds > 0 ? r.seconds / r.predicted.seconds : 0.0);
  else
    std::printf("   (no model for this algorithm)");
  std::printf("\n");
  std::size_t failed = 0;
  for (std::size_t i = 0; i < r.outcomes.size(); ++i)
    if (!r.outcomes[i].ok && !r.outcomes[i].killed && failed++ < 3)
      std::printf("%s  rank %zu failed at %s: %s\n", indent, i, ms(r.outcomes[i].ended_at).c_str(),
                  r.outcomes[i].error.c_str());
  if (!o.kills.empty()) {
    double first = o.kills.front().at;
    for (const auto& k : o.kills)
      first = std::min(first, k.at);
    std::size_t naming = 0, survivors = 0;
    double latest = 0;
    for (const auto& x : r.outcomes) {
      if (x.killed)
        continue;
      ++survivors;
      if (x.ok)
        continue;
      naming += std::any_of(o.kills.begin(), o.kills.end(),
                            [&](const auto& k) { return mccl::sim::names_rank(x.error, k.rank); }) ? 1 : 0;
      latest = std::max(latest, x.ended_at - first);
    }
    std::printf("%s  %s: %zu of %zu survivors failed, %zu naming %s, the last %s after the %s; %zu finished "
                "correctly first\n",
                indent, deaths(o).c_str(), failed, survivors, naming, o.kills.size() == 1 ? "it" : "a dead rank",
                ms(latest).c_str(), o.kills.size() == 1 ? "death" : "first death", survivors - failed);
  } else if (failed > 3) {
    std::printf("%s  ... %zu ranks failed in all\n", indent, failed);
  }
  std::printf("%s  checked every element: %s; wall %.1f s\n", indent,
              r.mismatches == 0 ? "ok" : (std::to_string(r.mismatches) + " wrong, first: " + r.first_mismatch).c_str(),
              r.wall_seconds);
  if (r.after_shrink) {
    auto s = mccl::sim::shrunk_options(o);
    std::printf("%s  after shrink to %d ranks (the survivors, in their old order):\n", indent, s.ranks);
    print(s, *r.after_shrink, "    ");
  }
  if (r.after_grow) {
    auto g = mccl::sim::grown_options(o);
    auto old_ranks = mccl::sim::shrunk_options(o).ranks;
    std::printf("%s  after grow to %d ranks (newcomers are ranks %d to %d), the state from rank 0 first:\n", indent,
                g.ranks, old_ranks, g.ranks - 1);
    if (r.after_grow->state_broadcast)
      print(as_state_broadcast(g), *r.after_grow->state_broadcast, "    ");
    print(g, *r.after_grow, "    ");
  }
}

bool all_ok(const mccl::sim::run_result& r) {
  return r.mismatches == 0
         && std::all_of(r.outcomes.begin(), r.outcomes.end(), [](const auto& x) { return x.ok; });
}

bool succeeded(const mccl::sim::run_options& o, const mccl::sim::run_result& r) {
  if (r.mismatches > 0)
    return false;
  // Fault mode: every survivor fails naming a dead rank (or finished,
  // checked, before the deaths mattered).
  if (o.kills.empty() ? !all_ok(r) : !mccl::sim::survivors_named_a_dead_rank(o, r))
    return false;
  if (r.state_broadcast && !all_ok(*r.state_broadcast))
    return false;
  if (r.after_shrink && !succeeded(mccl::sim::shrunk_options(o), *r.after_shrink))
    return false;
  return !r.after_grow || succeeded(mccl::sim::grown_options(o), *r.after_grow);
}

} // namespace

int main(int argc, char** argv) {
  mccl::sim::run_options o;
  o.host = {1e-6, 80e9 / 8};
  std::string json_to;
  std::vector<int> kill_ranks;
  std::vector<double> kill_times; // one for all, or one per rank of --kill
  bool op_given = false, ranks_given = false, bytes_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::cout << usage;
      return 0;
    }
    if (i + 1 >= argc && a != "--shrink")
      bad(a + " needs a value");
    if (a == "--ranks") {
      o.ranks = static_cast<int>(number(a, argv[++i]));
      ranks_given = true;
    } else if (a == "--ranks-per-host") {
      o.ranks_per_host = static_cast<int>(number(a, argv[++i]));
    } else if (a == "--op") {
      try {
        o.op = mccl::sim::parse_op(argv[++i]);
      } catch (const std::exception& e) {
        bad(e.what());
      }
      op_given = true;
    } else if (a == "--algo") {
      o.algorithm = argv[++i];
    } else if (a == "--bytes") {
      o.bytes = byte_size(a, argv[++i]);
      bytes_given = true;
    } else if (a == "--alpha-us") {
      o.net.alpha = number(a, argv[++i]) * 1e-6;
    } else if (a == "--beta-gbps") {
      o.net.bytes_per_s = number(a, argv[++i]) * 1e9 / 8;
    } else if (a == "--host-alpha-us") {
      o.host.alpha = number(a, argv[++i]) * 1e-6;
    } else if (a == "--host-gbps") {
      o.host.bytes_per_s = number(a, argv[++i]) * 1e9 / 8;
    } else if (a == "--host-bus-gbps") {
      o.host_bus_bytes_per_s = number(a, argv[++i]) * 1e9 / 8;
    } else if (a == "--host-memory" || a == "--host-cache" || a == "--host-peer") {
      try {
        auto& curve = a == "--host-memory" ? o.board.memory : a == "--host-cache" ? o.board.cache : o.board.peer;
        curve = mccl::sim::memory_curve::parse(a, argv[++i]);
      } catch (const std::exception& e) {
        bad(e.what());
      }
    } else if (a == "--host-cache-per-rank") {
      o.board.cache_bytes_per_rank = byte_size(a, argv[++i]);
    } else if (a == "--board-round-us") {
      o.board.round_s_per_rank = number(a, argv[++i]) * 1e-6;
    } else if (a == "--max-rank-bytes") {
      o.max_rank_bytes = byte_size(a, argv[++i]);
    } else if (a == "--kill") {
      for (double v : numbers(a, argv[++i]))
        kill_ranks.push_back(whole_number(a, v));
    } else if (a == "--kill-at") {
      kill_times = numbers(a, argv[++i]);
    } else if (a == "--shrink") {
      o.shrink = true;
    } else if (a == "--grow") {
      o.grow = whole_number(a, number(a, argv[++i]));
    } else if (a == "--json") {
      json_to = argv[++i];
    } else {
      bad("unknown option " + a);
    }
  }
  if (!op_given || !ranks_given || !bytes_given)
    bad("--ranks, --op and --bytes are required");
  if (o.net.bytes_per_s <= 0 || o.host.bytes_per_s <= 0)
    bad("--beta-gbps and --host-gbps must be above 0");
  if (o.shrink && kill_ranks.empty())
    bad("--shrink needs --kill");
  if (o.grow > 0 && !o.shrink)
    bad("--grow needs --shrink (the newcomers join the survivors)");
  if (!kill_times.empty() && kill_ranks.empty())
    bad("--kill-at needs --kill");
  if (kill_times.size() > 1 && kill_times.size() != kill_ranks.size())
    bad("--kill-at gives " + std::to_string(kill_times.size()) + " times for " + std::to_string(kill_ranks.size())
        + " ranks of --kill: give one time for all or one per rank");
  try {
    // The engines of a thousand ranks would each log what mccl-sim reports
    // once: quiet unless MCCL_LOG_LEVEL asks (resolved like any setting).
    auto cfg = mccl::resolve_config();
    mccl::log::set_level(cfg.sources["MCCL_LOG_LEVEL"] == mccl::setting_source::default_value
                           ? mccl::log_level::off : cfg.log_level);
    for (int k : kill_ranks) // before a probe run spends the time
      if (k >= o.ranks)
        bad("--kill rank " + std::to_string(k) + " is not a rank of " + std::to_string(o.ranks));
    if (!kill_ranks.empty() && kill_times.empty()) {
      // A quarter into the op (a run without the fault says how long it
      // takes): every rank's result still needs the dead ranks' parts then.
      auto probe = o;
      probe.shrink = false;
      probe.grow = 0;
      auto r = mccl::sim::run(probe);
      kill_times = {r.seconds / 4};
      o.algorithm = r.algorithm;
    }
    for (std::size_t k = 0; k < kill_ranks.size(); ++k)
      o.kills.push_back({kill_ranks[k], kill_times.size() == 1 ? kill_times[0] : kill_times[k]});
    auto r = mccl::sim::run(o);
    print(o, r);
    if (!json_to.empty()) {
      auto text = to_json(o, r).dump(2) + "\n";
      if (json_to == "-") {
        std::cout << text;
      } else {
        std::ofstream f(json_to);
        f << text;
        if (!f)
          bad("cannot write " + json_to);
      }
    }
    return succeeded(o, r) ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "mccl-sim: " << e.what() << "\n";
    return 2;
  }
}
