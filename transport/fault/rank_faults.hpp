#pragma once
/// Rank faults (crash, freeze) carried out, and those that fire inside a
/// membership change ("during": shrink, grow, reconfigure; faults.hpp names
/// the point). The injector (fault_connection.hpp) fires the others, at an
/// op's first frame or by the clock.

#include "transport/fault/fault_report.hpp"
#include <mccl/faults.hpp>

#include <string>

namespace mccl::transport {

/// Records `f` (which `what` describes) in `report` (may be null), writes
/// the report, says so on stderr, then exits (crash: never returns) or
/// stops the process (freeze: returns once it is continued).
void carry_out_rank_fault(const fault_spec& f, const std::string& what, fault_recorder* report);

/// Fires the faults of `s` for `rank` during `change`, each at most once
/// per process (a change retried after a freeze that was continued does
/// not stop again). Blocking: a freeze stops the process here.
void fire_membership_faults(const fault_scenario& s, membership_change change, int rank,
                            fault_recorder* report);

} // namespace mccl::transport
