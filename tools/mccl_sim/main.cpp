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

namespace {

const char* usage =
  "usage: mccl-sim --ranks N [--ranks-per-host K] --op OP [--algo A] --bytes B\n"
  "                [--alpha-us A] [--beta-gbps G] [--host-alpha-us A] [--host-gbps G] [--host-bus-gbps G]\n"
  "                [--max-rank-bytes B] [--kill RANK [--kill-at SECONDS] [--shrink]] [--json FILE|-]\n"
  "  OP: allreduce, broadcast, reduce, allgather, reduce_scatter; B: bytes of the op's largest\n"
  "  buffer (64M, 1G, ...); A: the algorithm (default: the table's choice for B and N).\n"
  "  Between hosts: --alpha-us (10) and --beta-gbps (10 Gbit/s); within a host: --host-alpha-us (1)\n"
  "  and --host-gbps (80) per rank, and --host-bus-gbps (320), the host's memory that all its ranks\n"
  "  share (0: unlimited). --kill: that rank dies at --kill-at virtual seconds (default: a quarter\n"
  "  of the op's time without the fault); --shrink: the survivors then run the op again.\n"
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

std::string ms(double seconds) {
  std::ostringstream s;
  s.precision(seconds < 1e-3 ? 3 : 4);
  s << seconds * 1e3 << " ms";
  return s.str();
}

nlohmann::json to_json(const mccl::sim::run_options& o, const mccl::sim::run_result& r) {
  std::size_t failed = 0;
  for (const auto& x : r.outcomes)
    failed += x.ok ? 0 : 1;
  nlohmann::json j = {{"ranks", o.ranks},
                      {"ranks_per_host", o.ranks_per_host},
                      {"op", mccl::to_string(o.op)},
                      {"bytes", o.bytes},
                      {"algorithm", r.algorithm},
                      {"alpha_s", o.net.alpha},
                      {"bytes_per_s", o.net.bytes_per_s},
                      {"host_alpha_s", o.host.alpha},
                      {"host_bytes_per_s", o.host.bytes_per_s},
                      {"host_bus_bytes_per_s", o.host_bus_bytes_per_s},
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
  if (failed > 0) {
    nlohmann::json errors = nlohmann::json::array();
    for (std::size_t i = 0; i < r.outcomes.size(); ++i)
      if (!r.outcomes[i].ok)
        errors.push_back({{"rank", i}, {"at_s", r.outcomes[i].ended_at}, {"error", r.outcomes[i].error}});
    j["errors"] = errors;
  }
  if (r.after_shrink)
    j["after_shrink"] = to_json([&] { auto s = o; s.ranks -= 1; s.kill_rank.reset(); return s; }(), *r.after_shrink);
  return j;
}

void print(const mccl::sim::run_options& o, const mccl::sim::run_result& r, const char* indent = "") {
  std::printf("%smccl-sim: %s of %zu bytes on %d ranks (%d per host), algorithm %s\n", indent,
              mccl::to_string(o.op), o.bytes, o.ranks, o.ranks_per_host, r.algorithm.c_str());
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
    if (!r.outcomes[i].ok && static_cast<int>(i) != o.kill_rank.value_or(-1) && failed++ < 3)
      std::printf("%s  rank %zu failed at %s: %s\n", indent, i, ms(r.outcomes[i].ended_at).c_str(),
                  r.outcomes[i].error.c_str());
  if (o.kill_rank) {
    auto name = "rank " + std::to_string(*o.kill_rank);
    std::size_t naming = 0;
    double latest = 0;
    for (std::size_t i = 0; i < r.outcomes.size(); ++i)
      if (static_cast<int>(i) != *o.kill_rank && !r.outcomes[i].ok) {
        naming += r.outcomes[i].error.find(name) != std::string::npos ? 1 : 0;
        latest = std::max(latest, r.outcomes[i].ended_at - o.kill_at);
      }
    std::printf("%s  rank %d killed at %s: %zu of %d survivors failed, %zu naming it, the last %s after the "
                "death; %zu finished correctly first\n",
                indent, *o.kill_rank, ms(o.kill_at).c_str(), failed, o.ranks - 1, naming, ms(latest).c_str(),
                static_cast<std::size_t>(o.ranks - 1) - failed);
  } else if (failed > 3) {
    std::printf("%s  ... %zu ranks failed in all\n", indent, failed);
  }
  std::printf("%s  checked every element: %s; wall %.1f s\n", indent,
              r.mismatches == 0 ? "ok" : (std::to_string(r.mismatches) + " wrong, first: " + r.first_mismatch).c_str(),
              r.wall_seconds);
  if (r.after_shrink) {
    std::printf("%s  after shrink to %d ranks:\n", indent, o.ranks - 1);
    auto s = o;
    s.ranks -= 1;
    s.kill_rank.reset();
    print(s, *r.after_shrink, "    ");
  }
}

bool succeeded(const mccl::sim::run_options& o, const mccl::sim::run_result& r) {
  if (r.mismatches > 0)
    return false;
  if (!o.kill_rank) {
    for (const auto& x : r.outcomes)
      if (!x.ok)
        return false;
    return true;
  }
  // Fault mode: every survivor fails naming the dead rank.
  auto name = "rank " + std::to_string(*o.kill_rank);
  for (std::size_t i = 0; i < r.outcomes.size(); ++i)
    if (static_cast<int>(i) != *o.kill_rank
        && (r.outcomes[i].ok || r.outcomes[i].error.find(name) == std::string::npos))
      return false;
  return !r.after_shrink || succeeded([&] { auto s = o; s.ranks -= 1; s.kill_rank.reset(); return s; }(),
                                      *r.after_shrink);
}

} // namespace

int main(int argc, char** argv) {
  mccl::sim::run_options o;
  o.host = {1e-6, 80e9 / 8};
  std::string json_to;
  bool kill_at_given = false;
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
    } else if (a == "--max-rank-bytes") {
      o.max_rank_bytes = byte_size(a, argv[++i]);
    } else if (a == "--kill") {
      o.kill_rank = static_cast<int>(number(a, argv[++i]));
    } else if (a == "--kill-at") {
      o.kill_at = number(a, argv[++i]);
      kill_at_given = true;
    } else if (a == "--shrink") {
      o.shrink = true;
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
  if (o.shrink && !o.kill_rank)
    bad("--shrink needs --kill");
  try {
    // The engines of a thousand ranks would each log what mccl-sim reports
    // once: quiet unless MCCL_LOG_LEVEL asks (resolved like any setting).
    auto cfg = mccl::resolve_config();
    mccl::log::set_level(cfg.sources["MCCL_LOG_LEVEL"] == mccl::setting_source::default_value
                           ? mccl::log_level::off : cfg.log_level);
    if (o.kill_rank && !kill_at_given) {
      // A quarter into the op (a run without the fault says how long it
      // takes): every rank's result still needs the dead rank's part then.
      auto probe = o;
      probe.kill_rank.reset();
      probe.shrink = false;
      auto r = mccl::sim::run(probe);
      o.kill_at = r.seconds / 4;
      o.algorithm = r.algorithm;
    }
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
