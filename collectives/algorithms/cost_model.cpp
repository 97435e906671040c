#include "collectives/algorithms/cost_model.hpp"

#include "collectives/algorithms/chunking.hpp"

#include <algorithm>
#include <cmath>

namespace mccl {

namespace {

int floor_log2(int p) {
  int l = 0;
  while ((2 << l) <= p)
    ++l;
  return l;
}

int ceil_log2(int p) {
  int l = 0;
  while ((1 << l) < p)
    ++l;
  return l;
}

/// One round in which every rank sends `m` bytes to the rank `distance`
/// away (and receives as much): within a host when the partner is on the
/// same host, else through the NIC that the host's k ranks share.
double round_cost(double m, int distance, const cost_params& c) {
  int k = std::max(1, c.ranks_per_host);
  if (distance < k)
    return c.host_alpha + m * c.host_beta;
  return c.alpha + m * c.beta * k;
}

/// A ring step: each rank sends m bytes to its successor. With several
/// ranks per host (numbered contiguously) one rank per host sends across
/// hosts, the others within it: the step takes as long as the slower.
double ring_step(double m, int p, const cost_params& c) {
  int k = std::max(1, c.ranks_per_host);
  double across = c.alpha + m * c.beta;
  double within = c.host_alpha + m * c.host_beta;
  if (k >= p)
    return within;
  return k > 1 ? std::max(across, within) : across;
}

/// Seconds per byte of the port a ring step's bytes go through.
double port_beta(int p, const cost_params& c) {
  return std::max(1, c.ranks_per_host) >= p ? c.host_beta : c.beta;
}

/// Recursive doubling over p2 = 2^l ranks (distances 1, 2, 4, ...), each
/// round moving bytes(round) with a reduction of reduced(round) bytes.
template <class Bytes, class Reduced>
double butterfly(int l, Bytes bytes, Reduced reduced, const cost_params& c) {
  double t = 0;
  for (int r = 0; r < l; ++r)
    t += round_cost(bytes(r), 1 << r, c) + reduced(r) * c.gamma;
  return t;
}

/// Ranks beyond the largest power of two fold into it first (and get the
/// result back after): two more rounds of the whole vector.
double fold(int p, double n, bool reduce, const cost_params& c) {
  int p2 = 1 << floor_log2(p);
  if (p2 == p)
    return 0;
  return 2 * round_cost(n, p2, c) + (reduce ? n * c.gamma : 0);
}

cost_estimate est(double seconds, const char* formula) {
  return {seconds, formula, true};
}

/// The payload bytes all p ranks send together for one op (what the
/// memory of their host moves when they share one), and the formula.
struct all_ranks_traffic {
  double bytes = 0;
  const char* formula = nullptr; ///< null: no figure for this algorithm
};

all_ranks_traffic all_ranks_sent(op_kind kind, const std::string& algorithm, int p, double n) {
  const double pm1 = p - 1;
  switch (kind) {
    case op_kind::allreduce:
      if (algorithm == "ring" || algorithm == "bidir_ring" || algorithm == "rabenseifner" || algorithm == "direct")
        return {2 * pm1 * n, "2(p-1)n"};
      if (algorithm == "rd")
        return {p * std::log2(static_cast<double>(p)) * n, "p·log2(p)·n"};
      if (algorithm == "oneshot")
        return {p * pm1 * n, "p(p-1)n"};
      if (algorithm == "board_rs") // staged in, gathered out; the shares' reads stay in cache
        return {2 * p * n, "2pn"};
      break;
    case op_kind::broadcast:
      if (algorithm == "tree" || algorithm == "chain")
        return {pm1 * n, "(p-1)n"};
      if (algorithm == "board_stage") // the root's copy in, every other rank's copy out
        return {p * n, "pn"};
      if (algorithm == "scatter_allgather")
        return {(std::log2(static_cast<double>(p)) / 2 + pm1) * n, "(log2(p)/2 + p-1)n"};
      break;
    case op_kind::allgather:
    case op_kind::reduce_scatter:
      if (algorithm == "ring" || algorithm == "bidir_ring" || algorithm == "rd" || algorithm == "halving")
        return {pm1 * n, "(p-1)n"};
      if (algorithm == "board_stage") {
        if (kind == op_kind::allgather) // each rank's block in, everything out
          return {(p + 1) * n, "(p+1)n"};
        return {2 * p * n, "2pn"}; // each rank's whole input in, and read back as it reduces
      }
      break;
    case op_kind::reduce:
      if (algorithm == "tree")
        return {pm1 * n, "(p-1)n"};
      if (algorithm == "board_rs")
        return {2 * p * n, "2pn"};
      break;
    default:
      break;
  }
  return {};
}

/// The α–β–γ terms of the ranks' ports (and NICs).
cost_estimate port_terms(op_kind kind, const std::string& algorithm, int p, double n, const cost_params& c) {
  if (p <= 1)
    return est(0, "0 (one rank)");
  const double pm1 = p - 1;
  const int l = floor_log2(p);
  const double chunk = static_cast<double>(std::max<std::size_t>(1, c.chunk_bytes));
  switch (kind) {
    case op_kind::allreduce:
      if (algorithm == "ring")
        // Reduce-scatter then allgather: 2(p-1) steps of n/p bytes.
        return est(2 * pm1 * ring_step(n / p, p, c) + pm1 / p * n * c.gamma,
                   "2(p-1)(α + n/p·β) + (p-1)/p·nγ");
      if (algorithm == "bidir_ring")
        // Two rings of n/2 through one port each way: while one direction's
        // message is α on its way, the port sends the other's, so the
        // latency hides behind the bytes once they take longer.
        return est(std::max(2 * pm1 * ring_step(n / (2 * p), p, c), 2 * pm1 * n / p * port_beta(p, c))
                     + pm1 / p * n * c.gamma,
                   "max(2(p-1)(α + n/2p·β), 2(p-1)/p·nβ) + (p-1)/p·nγ");
      if (algorithm == "rd")
        return est(fold(p, n, true, c) + butterfly(l, [&](int) { return n; }, [&](int) { return n; }, c),
                   "log2(p)(α + nβ + nγ) [+ 2(α + nβ) + nγ if p is not a power of 2]");
      if (algorithm == "rabenseifner")
        // Recursive halving (n/2, n/4, ...) then recursive doubling back.
        return est(fold(p, n, true, c)
                     + 2 * butterfly(l, [&](int r) { return n / (2 << (l - 1 - r)); }, [](int) { return 0.0; }, c)
                     + (1.0 - 1.0 / (1 << l)) * n * c.gamma,
                   "2·log2(p)·α + 2(p-1)/p·nβ + (p-1)/p·nγ");
      if (algorithm == "board_rs") {
        // One host only (shared memory): k pieces of the stage's size take
        // k + 1 flag rounds; each rank copies n in, reads n (one share of
        // every rank's piece) as it reduces n/p, and copies n out.
        if (c.ranks_per_host < p)
          break;
        double k = std::ceil(n / static_cast<double>(std::max<std::size_t>(1, c.stage_bytes)));
        return est((k + 1) * c.host_alpha + 3 * n * c.host_beta + pm1 / p * n * c.gamma,
                   "(k+1)α + 3nβ + (p-1)/p·nγ, k pieces");
      }
      if (algorithm == "oneshot" || algorithm == "direct")
        // Every rank sends its whole vector to every other: (p-1)n through
        // its port.
        return est(c.alpha + pm1 * n * (c.ranks_per_host >= p ? c.host_beta : c.beta) + pm1 * n * c.gamma,
                   "α + (p-1)nβ + (p-1)nγ");
      break;
    case op_kind::broadcast:
      if (algorithm == "tree")
        return est(butterfly(ceil_log2(p), [&](int) { return n; }, [](int) { return 0.0; }, c),
                   "⌈log2 p⌉(α + nβ)");
      if (algorithm == "chain") {
        // k chunks through p-1 hops: the last chunk leaves the root after k
        // chunk times and needs p-2 more hops. The chunk as the algorithm
        // cuts it (collectives/algorithms/chunking.hpp).
        double k = std::ceil(n / pipelined_chunk_bytes(chunk, n));
        double m = n / k;
        return est(pm1 * c.alpha + (p - 2 + k) * m * c.beta, "(p-1)α + (p-2+k)·(n/k)β, k chunks");
      }
      if (algorithm == "scatter_allgather")
        return est(butterfly(ceil_log2(p), [&](int r) { return n / (2 << r); }, [](int) { return 0.0; }, c)
                     + pm1 * ring_step(n / p, p, c),
                   "(log2 p + p - 1)α + 2(p-1)/p·nβ");
      if (algorithm == "board_stage" && c.ranks_per_host >= p) {
        // k pieces, a flag round each; the root stages piece j + 1 while
        // the others copy piece j out.
        double k = std::ceil(n / static_cast<double>(std::max<std::size_t>(1, c.stage_bytes)));
        return est(k * c.host_alpha + (n + n / std::max(1.0, k)) * c.host_beta, "kα + (n + n/k)β, k pieces");
      }
      break;
    case op_kind::allgather:
      if (algorithm == "ring")
        return est(pm1 * ring_step(n / p, p, c), "(p-1)(α + n/p·β)");
      if (algorithm == "bidir_ring")
        return est(std::max(pm1 * ring_step(n / (2 * p), p, c), pm1 * n / p * port_beta(p, c)),
                   "max((p-1)(α + n/2p·β), (p-1)/p·nβ)");
      if (algorithm == "rd")
        return est(fold(p, n, false, c)
                     + butterfly(l, [&](int r) { return n / p * (1 << r); }, [](int) { return 0.0; }, c),
                   "log2(p)·α + (p-1)/p·nβ");
      if (algorithm == "board_stage" && c.ranks_per_host >= p) {
        // k pieces of a rank's block: each copies its piece in, then every
        // rank's out.
        double k = std::ceil(n / p / static_cast<double>(std::max<std::size_t>(1, c.stage_bytes)));
        return est(k * c.host_alpha + (n / p + n) * c.host_beta, "kα + (n/p + n)β, k pieces");
      }
      break;
    case op_kind::reduce_scatter:
      if (algorithm == "ring")
        return est(pm1 * ring_step(n / p, p, c) + pm1 / p * n * c.gamma, "(p-1)(α + n/p·β) + (p-1)/p·nγ");
      if (algorithm == "rd")
        return est(fold(p, n, true, c) + butterfly(l, [&](int) { return n; }, [&](int) { return n; }, c),
                   "log2(p)(α + nβ + nγ)");
      if (algorithm == "halving")
        // Rabenseifner's first half: n/2, n/4, ... with a reduction each.
        return est(fold(p, n, true, c)
                     + butterfly(l, [&](int r) { return n / (2 << (l - 1 - r)); },
                                 [&](int r) { return n / (2 << (l - 1 - r)); }, c),
                   "log2(p)·α + (p-1)/p·n(β + γ)");
      if (algorithm == "board_stage" && c.ranks_per_host >= p) {
        // k pieces of the whole input (1/p of a stage bank per block): each
        // rank copies its input in, then reads its block's piece of every
        // rank's as it reduces.
        double k = std::ceil(n / static_cast<double>(std::max<std::size_t>(1, c.stage_bytes)));
        return est(k * c.host_alpha + 2 * n * c.host_beta + pm1 / p * n * c.gamma,
                   "kα + 2nβ + (p-1)/p·nγ, k pieces");
      }
      break;
    case op_kind::reduce:
      if (algorithm == "tree")
        return est(butterfly(ceil_log2(p), [&](int) { return n; }, [&](int) { return n; }, c),
                   "⌈log2 p⌉(α + nβ + nγ)");
      if (algorithm == "board_rs") // as allreduce's: the root's path is every rank's there
        return port_terms(op_kind::allreduce, algorithm, p, n, c);
      break;
    default:
      break;
  }
  return {};
}

} // namespace

cost_estimate predict(op_kind kind, const std::string& algorithm, int p, double n, const cost_params& c) {
  auto e = port_terms(kind, algorithm, p, n, c);
  // All ranks on one host: their bytes also queue for the host's memory.
  if (!e.known || c.host_bus_beta <= 0 || c.ranks_per_host < p || p <= 1)
    return e;
  auto traffic = all_ranks_sent(kind, algorithm, p, n);
  if (traffic.formula == nullptr)
    return e;
  double bus = traffic.bytes * c.host_bus_beta;
  if (bus > e.seconds) {
    e.seconds = bus;
    e.formula = "max(" + e.formula + ", " + traffic.formula + "·βbus)";
  }
  return e;
}

} // namespace mccl
