#pragma once
/// A SIMULATED network with virtual time, for mccl-sim: thousands of ranks
/// in one process, where every byte a rank writes arrives when an α–β link
/// model says it would. Unlike sim_network.hpp (whose tests pick every
/// delivery by hand), bytes here are delivered by the clock.
///
/// The model (times in seconds, rates in bytes per second):
/// - Every rank has a send port and a receive port (full duplex, one
///   transfer at a time each way). Ranks of one host talk over the host
///   link (`host`: shared memory); ranks of different hosts over the
///   network (`net`), through their host's NIC, which all ranks of the
///   host share (one send and one receive port per host).
/// - A write of w wire bytes at time t starts when the sender's port (and,
///   between hosts, its NIC) is free, occupies it for w / rate, and arrives
///   α after it was sent, or later when the receiver's port (NIC) is busy:
///   arrival = max(sent + α, receiver free + w / rate). Bytes of one
///   direction arrive in order.
/// - `host_bus_bytes_per_s`: the memory of a host, which every transfer
///   between two of its ranks passes (shared memory copies the bytes into
///   a ring and out again, and a reduction reads them once more). All of a
///   host's transfers queue for it one after another, each for w / bus
///   rate, so the host moves at most that many bytes a second however many
///   ranks it runs: what makes 64 ranks of one host take twice as long as
///   32 for the same op. A write leaves when both its port and the bus are
///   done with it. 0: not modelled (every pair has its own path).
/// - `payload_scale`: data frames' payloads count as that many times their
///   size (headers and control frames as they are), so a run that moves
///   small buffers takes the time of a large op (mccl-sim's scaled mode).
///   The stream is parsed frame by frame to tell payloads from headers.
///
/// Not modelled: the CPU (reductions and copies take no virtual time),
/// switches and contention inside the network (only ports and NICs),
/// packet loss.
///
/// Single-threaded: one thread runs every rank and advances the clock.
/// Pipes are created on first use, so a full mesh of 1024 ranks costs
/// memory only for the pairs that exchange bytes.

#include "transport/connection.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace mccl::transport {

struct link_model {
  double alpha = 0;         ///< seconds from sent to arrived
  double bytes_per_s = 1e9; ///< rate of a port
};

struct timed_network_options {
  int world = 1;
  int ranks_per_host = 1; ///< ranks r and q share a host when r / k == q / k
  link_model net;         ///< between hosts (through the hosts' NICs)
  link_model host;        ///< within a host
  double host_bus_bytes_per_s = 0; ///< a host's memory, shared by its ranks' transfers (0: unlimited)
  double payload_scale = 1;
};

namespace detail {
struct timed_state;
}

class timed_network {
public:
  explicit timed_network(const timed_network_options& options);
  ~timed_network();
  timed_network(const timed_network&) = delete;
  timed_network& operator=(const timed_network&) = delete;

  /// Rank `rank`'s connections by peer (null at `rank`).
  std::vector<connection_ptr> connections(int rank);

  /// Virtual seconds since the start.
  double now() const;

  /// When the next write in flight arrives (infinity when none is).
  double next_arrival() const;

  /// Moves the clock to `t` (never back) and makes every write that has
  /// arrived by then readable. Returns (receiver, sender) of every pipe
  /// that got bytes, ascending, without repeats.
  std::vector<std::pair<int, int>> advance_to(double t);

  /// Bytes written and not yet arrived, over every pipe.
  std::size_t in_flight() const;

  /// The rank's process dies: its connections fail in both directions at
  /// once (peers read "connection reset"), what it had in flight is lost.
  void kill(int rank);

private:
  std::shared_ptr<detail::timed_state> state_;
};

} // namespace mccl::transport
