#pragma once
/// What an algorithm should cost on an α–β–γ network: the classic model of
/// Thakur, Rabenseifner and Gropp ("Optimization of Collective
/// Communication Operations in MPICH", 2005), written for mccl's
/// algorithms as they move bytes, on the network mccl-sim simulates
/// (transport/sim/timed_network.hpp): α the latency of a message, β the
/// time per byte of a rank's port, γ the time per byte of a reduction.
///
/// p ranks; n bytes is the op's size as mccl-bench and the algorithm table
/// count it: the vector of allreduce, broadcast and reduce, the whole
/// output of allgather and the whole input of reduce_scatter. With
/// several ranks per host, messages between hosts share the host's NIC:
/// a step in which all k ranks of a host send across hosts takes k times
/// the bytes' time there. With every rank on one host, the host's memory
/// bus (host_bus_beta) bounds it too: no faster than the bytes all ranks
/// send, at the bus's rate.

#include <mccl/collective.hpp>

#include <cstddef>
#include <string>

namespace mccl {

struct cost_params {
  double alpha = 0;       ///< seconds per message between hosts
  double beta = 0;        ///< seconds per byte between hosts (1 / rate)
  double host_alpha = 0;  ///< the same within a host
  double host_beta = 0;
  double gamma = 0;       ///< seconds per byte reduced
  /// Seconds per byte through the memory of a host, which all its ranks'
  /// transfers share (timed_network.hpp); with every rank on one host the
  /// estimate is at least the bytes all ranks send times this. 0: not
  /// modelled.
  double host_bus_beta = 0;
  int ranks_per_host = 1;
  std::size_t chunk_bytes = 1 << 20; ///< pipelined algorithms' chunk (MCCL_CHUNK_BYTES)
  std::size_t stage_bytes = 1 << 20; ///< the host board's stage bank (MCCL_SHM_STAGE_BYTES)
};

struct cost_estimate {
  double seconds = 0;
  std::string formula; ///< the terms, e.g. "2(p-1)α + 2(p-1)/p·nβ"
  bool known = false;  ///< false: no model for this algorithm
};

/// The model's time for `algorithm` running op `kind` of n bytes on p ranks.
cost_estimate predict(op_kind kind, const std::string& algorithm, int p, double n, const cost_params& c);

} // namespace mccl
