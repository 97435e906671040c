#include "transport/fault/rank_faults.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <utility>

namespace mccl::transport {

void carry_out_rank_fault(const fault_spec& f, const std::string& what, fault_recorder* report) {
  if (report) {
    report->fault(to_string(f.kind), -1, {}, what);
    // The report is all this rank will say: write it before going away.
    report->write();
  }
  std::fprintf(stderr, "mccl: fault injection: %s\n", what.c_str());
  std::fflush(stderr);
  if (f.kind == fault_kind::crash)
    std::_Exit(f.exit_code);
  ::kill(::getpid(), SIGSTOP);
}

void fire_membership_faults(const fault_scenario& s, membership_change change, int rank,
                            fault_recorder* report) {
  // By (scenario source, fault index): every communicator of the process
  // loads the scenario again, so the fault's own object says nothing.
  static std::mutex mutex;
  static std::set<std::pair<std::string, std::size_t>> fired;
  for (std::size_t i = 0; i < s.faults.size(); ++i) {
    const auto& f = s.faults[i];
    if (f.during != change || f.rank != rank || is_link_fault(f.kind))
      continue;
    {
      std::lock_guard<std::mutex> guard{mutex};
      if (!fired.emplace(s.source, i).second)
        continue;
    }
    auto what = std::string("rank ") + std::to_string(rank) + " "
                + (f.kind == fault_kind::crash ? "crashes (exit " + std::to_string(f.exit_code) + ")"
                                               : std::string("freezes (SIGSTOP)"))
                + " during " + to_string(change)
                + ", connected to the new communicator before confirming it (fault #" + std::to_string(i) + ")";
    carry_out_rank_fault(f, what, report);
  }
}

} // namespace mccl::transport
