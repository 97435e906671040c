#pragma once
/// A SIMULATED network for deterministic tests: in-process byte pipes that
/// implement transport::connection, where the test decides when written
/// bytes reach the other side. No sockets, no threads, no timers.
///
/// Every connected pair of ranks has two directions (pipes). Each pipe has
/// two stages:
///
///   write_some(sender) -> [in flight] --deliver()--> [readable] -> read_some(receiver)
///
/// Bytes a sender writes stay "in flight" until the test calls deliver() or
/// deliver_all(); only then can the receiver read them, and the receiver's
/// pending read notification fires. Within one direction bytes are moved
/// strictly FIFO (a stream never reorders); across directions the test picks
/// the order. In auto-deliver mode writes are readable at once, for tests
/// that do not care about interleavings.
///
/// End of stream and failures:
/// - close() on one end: the other end reads what was sent before the close
///   (in flight bytes included, once delivered) and then gets closed=true
///   with no error, like a FIN behind the data. Bytes travelling towards the
///   closed end are dropped, and the other end's writes fail with
///   "broken pipe (simulated)".
/// - break_link(a, b): the pair fails abruptly in both directions, like a
///   reset: bytes in flight are lost, bytes already readable can still be
///   read, then reads fail with "connection reset by peer (simulated)";
///   writes fail at once.
/// - The connection's destructor closes it.
///
/// Flow control: a direction may have a capacity (bytes in flight plus
/// readable, 0 = unlimited). write_some then accepts only what fits (a
/// partial write, or 0 bytes when full) and never blocks; a write
/// notification fires once the receiver reads and space frees up.
///
/// notify_when_ready(want_write, cb) invokes cb at once, on the calling
/// thread, when the condition already holds (readable bytes or end of stream
/// for reads; space, or a failure to report, for writes; any notification
/// on a locally closed end). Otherwise cb is stored and invoked by the call
/// that makes the condition true (deliver, close, break_link, a read that
/// frees space, set_capacity), on that caller's thread. Each callback runs
/// once; a stored one is replaced by the next request for the same
/// direction, as connection.hpp says. close() runs the closing end's stored callbacks too (cancelling
/// them, as connection::close documents), which also releases what they
/// hold.
///
/// Thread-safe: one mutex guards all pipes; callbacks are always invoked
/// after it is released, so they may call back into the network.

#include "transport/connection.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace mccl::transport {

/// One direction with bytes in flight.
struct sim_pipe_id {
  int from = 0;
  int to = 0;
  std::size_t bytes = 0; ///< bytes in flight (written, not yet delivered)

  friend bool operator==(const sim_pipe_id& a, const sim_pipe_id& b) {
    return a.from == b.from && a.to == b.to && a.bytes == b.bytes;
  }
};

namespace detail {
struct sim_state;
}

class sim_network {
public:
  /// auto_deliver: writes become readable at once (see set_auto_deliver).
  explicit sim_network(bool auto_deliver = false);
  ~sim_network();

  sim_network(const sim_network&) = delete;
  sim_network& operator=(const sim_network&) = delete;

  /// Connects rank_a with rank_b: first is rank_a's end (talking to rank_b),
  /// second is rank_b's end. One connection per pair of ranks; throws
  /// std::invalid_argument for rank_a == rank_b or a pair already connected.
  std::pair<connection_ptr, connection_ptr> connect(int rank_a, int rank_b);

  /// Full mesh of ranks 0..world-1: mesh[r][p] is r's connection to p,
  /// null on the diagonal.
  std::vector<std::vector<connection_ptr>> mesh(int world);

  // ---- delivery control ---------------------------------------------------------

  /// Directions with bytes in flight, ordered by (from, to).
  std::vector<sim_pipe_id> pending() const;

  /// Makes up to max_bytes of the from -> to direction's in-flight bytes
  /// readable, oldest first, and fires the receiver's read notification.
  /// Returns the bytes moved. Throws std::invalid_argument if from and to
  /// are not connected.
  std::size_t deliver(int from, int to, std::size_t max_bytes = SIZE_MAX);

  /// Delivers every in-flight byte, direction by direction in (from, to)
  /// order. Returns the bytes moved.
  std::size_t deliver_all();

  /// In auto-deliver mode writes are readable at once. Turning it on
  /// delivers whatever is in flight.
  void set_auto_deliver(bool on);
  bool auto_deliver() const;

  // ---- inspection -----------------------------------------------------------------

  /// Bytes of from -> to written but not delivered / delivered but not read.
  /// Throw std::invalid_argument if from and to are not connected.
  std::size_t in_flight(int from, int to) const;
  std::size_t readable(int from, int to) const;

  // ---- flow control and faults ----------------------------------------------------

  /// Capacity of every direction, existing and future (0 = unlimited).
  void set_capacity(std::size_t bytes);
  /// Capacity of one direction (0 = unlimited).
  void set_capacity(int from, int to, std::size_t bytes);

  /// Resets the connection between a and b (order does not matter); see the
  /// file comment.
  void break_link(int a, int b);

private:
  std::shared_ptr<detail::sim_state> state_;
};

} // namespace mccl::transport
