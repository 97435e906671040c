#pragma once
/// Op actors: every op in flight (collective or point-to-point, built-in or
/// custom) is hosted by one. Its behaviour is the op's state machine
/// (collectives/engine/op_session.hpp): a start message binds it to the op and
/// starts the algorithm (with the chunks that came before it), chunk
/// messages bring the op's frames (a descriptor: communicator, sequence,
/// step, chunk, peer, and a view of the bytes where they landed, never a
/// copy), sent messages say one of its frames has left, a fail message ends
/// it with a reason. What the op's own handler causes for its own op (a
/// small frame copied and so sent at once, a send to a closed link) the
/// handler takes in place: only events from elsewhere are messages. The
/// frames it sends go out through the engine's channels; its outcome goes
/// back to the engine, which completes the caller's Work.
///
/// Where they run: on the communicator's driving unit
/// (driving_unit.hpp), drained by the thread that leads the engine, so a
/// message to an op actor costs a mailbox push and is handled before the
/// engine's call returns (collectives/engine/op_runner.hpp), with no thread hop.
///
/// Board ops (small collectives when every rank is on this host) are op
/// actors too, of a pool of their own on a unit of their own: the board
/// runs beside the engine, one board op at a time under the board's lock,
/// whose holder drives that unit. A board op's start message is handled
/// in place and runs the whole exchange (board_session).
///
/// Pooled: an op actor that ended goes back to its communicator's pool and
/// hosts a later op; spawning one costs several microseconds (bench
/// actor-hop), more than a small op's whole path.
///
/// Supervised: the communicator's supervisor monitors every op actor. An
/// op actor whose handler throws what the op's own guard does not catch
/// fails its op with the reason and dies with an error; the supervisor's
/// down handler aborts the communicator, and the pool drops the actor.

#include "actors/driving_unit.hpp"
#include "collectives/engine/op_runner.hpp"
#include "transport/received_frame.hpp"

#include <mccl/error.hpp>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mccl::actors {

// The messages an op actor takes, from the engine. Each is one value of a
// type of its own, which names it: no atom before it, so CAF's match of a
// message to a handler is one type check (an atom is a second element,
// compared by value as well).

/// Start: the op an actor hosts from now on, and the chunks that came for
/// it before it started.
struct op_binding {
  op_session* op = nullptr;
  std::vector<transport::received_frame> early;
};

/// A frame of the op (peer, step, chunk) has fully left the op's memory.
struct frame_left {
  int peer = 0;
  uint32_t step = 0;
  uint32_t chunk = 0;
};

/// End the op with an error.
struct op_failure {
  errc code = errc::none;
  std::string why;
};

/// A board op: a collective of ranks that all sit on this host, exchanged
/// over the host board (collectives/algorithms/board_collectives.hpp).
/// Its state machine has one state: the exchange runs to its end inside
/// the start's handler (it waits on its peers' flags, spinning, then
/// sleeping, bounded by the op's deadline), so it sends and takes no
/// other message. actors/comm_core_board.cpp makes them.
class board_session {
public:
  virtual ~board_session() = default;
  /// The whole exchange; its outcome stays with the session.
  virtual void run() = 0;
  /// Its actor died in run(): the op fails with `why`.
  virtual void fail(errc code, const std::string& why) = 0;
};

/// Start of a board op: the actor runs it to its end.
struct board_binding {
  board_session* op = nullptr;
};

using op_handle = caf::typed_actor<
  /// A chunk of the op's from `frame.peer`: its header names the
  /// communicator, sequence, step and chunk; its payload is a view. The
  /// most frequent message, so the first handler tried.
  caf::reacts_to<transport::received_frame>,
  caf::reacts_to<op_binding>,
  caf::reacts_to<frame_left>,
  caf::reacts_to<op_failure>,
  caf::reacts_to<board_binding>>;

/// What an op actor's handlers tell its pool of it (driving thread only).
struct op_slot {
  bool running = false; ///< one of its handlers runs now
  bool failed = false;  ///< its exception handler ran: the actor died
};

/// A communicator's op actors: spawns them on its driving unit, pools the
/// idle ones, and makes each op's runner (the engine's side of its actor).
class op_actors final : public op_runners {
public:
  /// `supervise` is told of every op actor spawned (the communicator's
  /// supervisor monitors it: once per actor of the pool, not per op).
  op_actors(driving_unit& unit, std::function<void(const op_handle&)> supervise);
  ~op_actors() override;
  op_actors(const op_actors&) = delete;
  op_actors& operator=(const op_actors&) = delete;

  std::unique_ptr<op_runner> runner_for(op_session& op) override;

  /// Runs a board op on an actor of the pool, on the calling thread, and
  /// returns once it ended. The caller drives this pool's unit (the
  /// board's lock held): a pool hosts either engine ops or board ops,
  /// since the two run on different threads at once.
  void run(board_session& op);

private:
  struct slot;
  class runner;

  /// An idle actor of the pool, or a new one (told to `supervise_`).
  std::unique_ptr<slot> take();

  /// Sends `xs...` to the actor of `to` and drains the unit: the message
  /// is handled before this returns, or (sent from inside a handler) right
  /// after the running handler.
  /// An idle actor outside any handler of the unit handles it in place
  /// (driving_unit::dispatch); otherwise it goes through the mailbox.
  template <class... Ts>
  void send(slot& to, Ts&&... xs);

  driving_unit& unit_;
  std::function<void(const op_handle&)> supervise_;
  std::vector<std::unique_ptr<slot>> idle_; ///< the leader's only
};

} // namespace mccl::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::actors::op_binding)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::actors::frame_left)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::actors::op_failure)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::actors::board_binding)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mccl::transport::received_frame)
