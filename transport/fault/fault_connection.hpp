#pragma once
/// Fault injection: a connection decorator that injects a scenario's faults
/// (fault_scenario.hpp) into the frames one rank sends to one peer, over any
/// transport (TCP, the simulated network, ...), and the per-rank injector
/// that wraps every connection of a communicator and fires rank faults
/// (crash, freeze).
///
/// The decorator sits below the link actor and the inline path and sees the
/// byte stream they write. It follows the frame boundaries (the headers go
/// by in the stream) and decides once per data frame, at its first byte,
/// whether a fault fires. A frame with a fault is copied out and handled
/// whole: dropped, corrupted, sent twice or held back until the next frame
/// went out; delay and stall report "would block" until their time is up
/// (so everything behind them waits too, as on a real link). Bytes the
/// decorator owns (copies it still has to send) go out before any new ones,
/// on the next write, read or readiness request of the holder.
///
/// Threading: as connection.hpp. The injector's rank faults may also fire
/// from the fault clock's thread (after_ms).

#include "transport/connection.hpp"
#include "transport/fault/fault_report.hpp"
#include <mccl/faults.hpp>
#include "transport/wire/frame.hpp"

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <tuple>
#include <mutex>
#include <optional>
#include <random>

namespace mccl::transport {

class fault_injector : public std::enable_shared_from_this<fault_injector> {
public:
  using clock = std::chrono::steady_clock;

  /// Faults act on `rank`'s links and process. Scheduling of after_ms rank
  /// faults starts with start().
  fault_injector(fault_scenario scenario, int rank, std::shared_ptr<fault_recorder> recorder);

  /// Arms the rank faults that fire after a time.
  void start();

  /// The decorated connection to `peer`.
  connection_ptr wrap(connection_ptr inner, int peer);

  /// A data frame is about to leave: fires rank faults waiting for its seq.
  void on_data_frame(const wire::frame_header& h);

  const fault_scenario& scenario() const noexcept { return scenario_; }
  fault_recorder& recorder() noexcept { return *recorder_; }
  int rank() const noexcept { return rank_; }
  clock::time_point started() const noexcept { return start_; }

private:
  void fire(std::size_t index, const std::string& trigger);

  fault_scenario scenario_;
  int rank_;
  std::shared_ptr<fault_recorder> recorder_;
  clock::time_point start_ = clock::now();
  std::mutex mutex_;
  std::vector<bool> fired_; ///< rank faults, by scenario index
};

class fault_connection : public connection, public std::enable_shared_from_this<fault_connection> {
public:
  fault_connection(connection_ptr inner, std::shared_ptr<fault_injector> injector, int peer);

  /// Arms the timers of time-triggered close and stall faults.
  void start();

  io_result write_some(const iovec* iov, int count) override;
  io_result read_some(void* data, std::size_t len) override;
  void notify_when_ready(bool want_write, std::function<void()> ready) override;
  void close() override;
  /// Keeps the faults' fire counts (a `close` that fired does not fire
  /// again on the resumed connection) and starts a fresh stream over it.
  connection_ptr resumed(connection_ptr fresh) override;
  void release_buffers(const abort_note& note) override { inner_->release_buffers(note); }
  std::optional<abort_note> peer_abort() const override { return inner_->peer_abort(); }
  int poll_fd() const override { return inner_->poll_fd(); }
  const std::string& description() const override { return inner_->description(); }

private:
  using clock = fault_injector::clock;

  /// One scenario fault that applies to this link. Its random draws for a
  /// frame come from a generator seeded by the scenario's seed, the fault,
  /// the link and the frame's identity (op seq, step, chunk, how often it
  /// was sent before), so the same seed and program inject the same faults
  /// whatever order the frames of different ops interleave in.
  struct rule {
    const fault_spec* spec;
    std::size_t index; ///< in the scenario
    uint64_t seed;     ///< of this fault on this link
    uint64_t fired = 0;
    bool timed; ///< close / stall with only after_ms: fires by the clock
  };

  /// -1: no fault for the frame; else an index into rules_.
  int decide(const wire::frame_header& h);
  /// Handles the frame at the stream position (whole in iov) that rule r hits.
  io_result apply(int r, const iovec* iov, int count, std::size_t frame_len,
                  const wire::frame_header& h);
  void apply_timed_faults();
  /// Writes decorator-owned bytes; false when some remain (or on error).
  bool flush(io_result& failure);
  void release_held(bool now);
  void frame_done();
  io_result closed_result() const;
  void wake_holder();
  void wake_when_flushable();
  void record(const rule& r, const wire::frame_header* h, const std::string& detail);
  /// The generator of rule r's draws for frame h (salt: which use).
  std::mt19937_64 frame_rng(const rule& r, const wire::frame_header& h, uint64_t salt) const;

  connection_ptr inner_;
  std::shared_ptr<fault_injector> injector_;
  int peer_;
  std::string link_; ///< "1->0"
  std::vector<rule> rules_;

  // Stream position: frames are numbered in the order they start.
  std::size_t cur_remaining_ = 0; ///< bytes of the current frame still to pass
  /// Decisions (rule or -1, and the frame's occurrence) of frames seen but
  /// not passed yet.
  std::deque<std::pair<int, uint64_t>> decided_;
  bool raw_ = false;              ///< lost track of frames: pass everything
  uint64_t occurrence_ = 0;       ///< of the frame at hand: 0 unless resent
  std::map<std::tuple<uint64_t, uint32_t, uint32_t>, uint64_t> resent_; ///< retransmissions by chunk

  std::vector<uint8_t> pending_;  ///< decorator-owned bytes to send first
  std::size_t pending_off_ = 0;
  std::vector<uint8_t> held_;     ///< a frame held back (reorder)
  clock::time_point held_since_;
  clock::time_point hold_until_{}; ///< delay / stall: no bytes before this
  bool closed_by_fault_ = false;
  std::string close_why_;

  std::mutex wake_mutex_; ///< the holder's last callbacks, for the clock
  std::function<void()> read_cb_, write_cb_;
  std::atomic<bool> flush_armed_{false};
};

} // namespace mccl::transport
