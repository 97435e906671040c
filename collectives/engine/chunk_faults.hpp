#pragma once
/// Chunk faults: a scenario's faults with "on": "chunk" (faults.hpp), which
/// act where a frame that arrived becomes a chunk message for its op's actor
/// (engine::on_frame), one layer above the link faults of
/// transport/fault/fault_connection.hpp. They see every data frame this
/// rank receives, whatever the transport (TCP, shared memory), decoded and
/// in order, and can
///   - drop it: its op never gets it, and times out;
///   - delay it by `ms`: it is held here and passed on by the engine's pass
///     that finds it due (the engine's driver sleeps no longer than
///     next_due(), and no thread blocks for it);
///   - duplicate it: passed on twice, the copy sharing the payload;
///   - reorder it: held until the next frame for the same op has been
///     passed on (or, when none comes within reorder_wait, alone).
/// Every fault fired is recorded in the fault report with the chunk it hit.
///
/// The engine owns at most one, made only when the scenario has chunk
/// faults for this rank: without one, its only trace on the frame path is
/// a null check. Everything here runs on the engine's leader.

#include "transport/fault/fault_report.hpp"
#include "transport/received_frame.hpp"

#include <mccl/faults.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

namespace mccl {

class chunk_faults {
public:
  using clock = std::chrono::steady_clock;
  /// Hands a frame on to its op (the engine's routing).
  using pass_fn = std::function<void(transport::received_frame)>;

  /// How long a reordered chunk waits for a later one of its op to swap
  /// with: an op may need it before its peers send anything more.
  static constexpr std::chrono::milliseconds reorder_wait{5};

  /// The faults of `s` that act on the chunks `rank` receives; null when
  /// none does. `start`: when the communicator connected (after_ms).
  static std::unique_ptr<chunk_faults> make(const transport::fault_scenario& s, int rank,
                                            std::shared_ptr<transport::fault_recorder> recorder,
                                            clock::time_point start);

  /// A frame on its way to its op: passes it on now (zero, one or two
  /// times, with a held one it was swapped with), or keeps it.
  void admit(transport::received_frame f, clock::time_point now, const pass_fn& pass);
  /// Passes on the held frames whose time has come, in the order they came.
  void release_due(clock::time_point now, const pass_fn& pass);
  /// When the next held frame is due; max() when none is held.
  clock::time_point next_due() const noexcept;
  /// Forgets every held frame: the communicator aborted, and a frame read
  /// in place points into its op's memory, which the op's caller may free.
  void clear() noexcept { held_.clear(); }

private:
  struct rule {
    const transport::fault_spec* spec; ///< in the scenario, which outlives the engine
    std::size_t index;                 ///< in the scenario
    uint64_t fired = 0;
  };
  chunk_faults(const transport::fault_scenario& s, std::vector<rule> rules,
               std::shared_ptr<transport::fault_recorder> recorder, clock::time_point start);

  struct held_frame {
    transport::received_frame frame;
    clock::time_point due;
    bool reordered; ///< released early by the next frame of its op
  };

  /// The rule that fires for `h` from `peer`, or null.
  rule* decide(int peer, const wire::frame_header& h, clock::time_point now);
  void record(const rule& r, const transport::received_frame& f, const std::string& detail);

  uint64_t seed_;
  std::vector<rule> rules_;
  std::shared_ptr<transport::fault_recorder> recorder_;
  clock::time_point start_;
  std::vector<held_frame> held_; ///< in arrival order; a handful at most
};

} // namespace mccl
