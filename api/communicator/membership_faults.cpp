// The points inside shrink, grow and reconfigure where a fault scenario's
// rank faults "during" that change fire (include/mccl/faults.hpp,
// membership_change; transport/fault/rank_faults.hpp carries them out),
// and where the change, decided, reaches the new communicator's supervisor.

#include "api/communicator/communicator_impl.hpp"
#include "transport/fault/rank_faults.hpp"

namespace mccl::detail {

void membership_fault_point(const communicator::impl* from, communicator::impl& built,
                            transport::membership_change change) {
  if (from)
    built.job_rank = from->job_rank;
  auto scenario = from && from->fault_scenario ? from->fault_scenario : built.fault_scenario;
  if (!scenario)
    return;
  // A scenario given in C++ (comm_options::faults) reaches the next change
  // too: the communicator built here did not load it from MCCL_FAULTS.
  if (!built.fault_scenario)
    built.fault_scenario = scenario;
  // The report of the communicator being built: its setup has just
  // written where it goes (MCCL_FAULTS_REPORT, the rank and its id).
  auto* report = built.fault_report ? built.fault_report.get() : from ? from->fault_report.get() : nullptr;
  transport::fire_membership_faults(*scenario, change, built.job_rank, report);
}

void membership_decided(communicator::impl& built, uint64_t epoch, std::vector<int> members) {
  if (built.core)
    built.core->announce_members(epoch, std::move(members));
}

} // namespace mccl::detail
