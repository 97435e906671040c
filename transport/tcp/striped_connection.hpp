#pragma once
/// One byte stream to a peer over several connected sockets (stripes), for
/// links that go faster with several TCP flows: several networks between two
/// hosts, or paths that limit each flow (MCCL_SOCKETS_PER_PEER).
///
/// The stream is dealt round-robin in fixed segments: bytes [0, S) go on
/// stripe 0, [S, 2S) on stripe 1, ..., wrapping around. Both ends know S and
/// the stripe order, so the reader always knows which socket the next bytes
/// come from and no framing is added. A stripe that is full (or empty) holds
/// the stream up at that point, exactly as one socket would; the other
/// stripes keep what they were given moving.
///
/// Readiness: the readiness monitor watches each stripe; a pending
/// notification always waits on the stripe the stream is blocked on, and
/// moves with it. For callers that poll(2) (the inline path) poll_fd() is an
/// epoll descriptor that becomes readable when the current read stripe is
/// readable, or the current write stripe writable while a write is pending.
///
/// A single socket needs none of this: one stripe is a tcp_connection.

#include "transport/connection.hpp"
#include "transport/tcp/readiness.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace mccl::transport {

/// Segment size of the round-robin: big enough that one syscall moves a lot,
/// small enough that a 1 MiB chunk spreads over several stripes.
constexpr std::size_t default_stripe_segment_bytes = std::size_t{128} << 10;

/// One connected socket of a striped connection.
struct stripe_socket {
  int fd = -1;      ///< connected, owned by the striped_connection from then on
  std::string name; ///< "10.77.1.2:40123", for error messages
};

class striped_connection : public connection {
public:
  /// Takes ownership of the descriptors (at least two), makes them
  /// non-blocking and registers each with `monitor`. Stripe i of the stream
  /// is stripes[i]; the peer must use the same order and segment size.
  striped_connection(std::shared_ptr<readiness_monitor> monitor, std::vector<stripe_socket> stripes,
                     std::string description, std::size_t segment_bytes = default_stripe_segment_bytes);
  ~striped_connection() override;

  io_result write_some(const iovec* iov, int count) override;
  io_result read_some(void* data, std::size_t len) override;
  void notify_when_ready(bool want_write, std::function<void()> ready) override;
  void close() override;
  const std::string& description() const override { return description_; }
  /// Points the epoll descriptor at the stripes the stream waits on now, so
  /// call it again before every poll(2).
  int poll_fd() const override;

  std::size_t stripes() const noexcept { return stripes_.size(); }

private:
  /// Where one direction of the stream is: the stripe and the bytes of the
  /// current segment already moved on it. The stripe is atomic because
  /// poll_fd() may be asked (for its descriptor) by a thread that does not
  /// hold the connection; a stale answer there is corrected by the next call.
  struct cursor {
    std::atomic<std::size_t> stripe{0};
    std::size_t done = 0;
  };
  /// A notification asked for by the link, re-armed on whichever stripe
  /// the stream is blocked on.
  struct pending {
    std::function<void()> ready;
    uint64_t generation = 0;
  };
  struct shared_state; // outlives this object while monitor callbacks run

  /// Moves a cursor past `n` bytes; true when it went to the next stripe.
  bool advance(cursor& c, std::size_t n) noexcept;
  /// Re-arms a pending notification of one direction on its current stripe.
  void follow(bool want_write);
  /// Arms stripe `stripe`'s watch for one direction; the caller holds the lock.
  void arm_locked(bool want_write, std::size_t stripe);
  std::string stripe_error(std::size_t stripe, const std::string& what) const;

  std::shared_ptr<readiness_monitor> monitor_;
  std::vector<stripe_socket> stripes_;
  std::vector<uint64_t> watch_ids_;
  std::string description_;
  std::size_t segment_;
  cursor rd_;
  cursor wr_;
  std::atomic<bool> write_blocked_{false}; ///< the last write_some left bytes unwritten
  std::atomic<bool> closed_{false};

  std::shared_ptr<shared_state> state_;

  // The poll_fd() epoll set: which stripes it watches, for what.
  int epoll_fd_ = -1;
  mutable std::vector<uint32_t> epoll_interest_;
};

} // namespace mccl::transport
