#pragma once
/// One communicator, put together: the engine (collectives/engine/engine.hpp) over
/// its connections, the drivers that move the engine, and the actors that
/// decide. The same over any transport: TCP for users, the simulated
/// network in deterministic tests.
///
/// Who drives (leads the engine; one at a time, they take turns):
/// - the calling thread: a collective up to MCCL_INLINE_BYTES runs to its
///   end inside the call, and wait() on any op drives it, so code that
///   issues and waits pays no thread hand-off;
/// - the op thread (op_thread.hpp): ops up to MCCL_OP_THREAD_BYTES that no
///   caller drives, so an op issued and not waited for still moves;
/// - the progress actor (progress_actor.hpp) on CAF workers: larger ops,
///   and every op when MCCL_OP_THREAD_BYTES=0;
/// - the watchdog's tick runs a single pass when nobody leads: heartbeats
///   while idle, deadlines, liveness verdicts;
/// - a thread that messages the communicator's actors from outside (the
///   API's revoke, finalize, the resumer) runs a pass when nobody leads.
///
/// Whoever leads runs the communicator's actors (op, link, supervisor) on
/// their driving unit after each of its passes (pass()): a message to one
/// of them from anywhere waits for the leader, or makes its sender the
/// leader for a pass, and never runs on a thread that does not lead.

#include "actors/driving_unit.hpp"
#include "actors/link_channel.hpp"
#include "actors/messages.hpp"
#include "actors/op_actor.hpp"
#include "actors/op_thread.hpp"
#include "actors/work_state.hpp"
#include "collectives/engine/engine.hpp"
#include "collectives/observability/flight_recorder.hpp"
#include <mccl/config.hpp>
#include "transport/buffer_pool.hpp"
#include "transport/connection.hpp"
#include "transport/fault/fault_report.hpp"
#include "transport/shm/shm_board.hpp"

#include <caf/actor_system.hpp>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mccl {
struct board_outcome;
}

namespace mccl::actors {

struct comm_core_init {
  int rank = 0;
  int world = 1;
  uint32_t comm_id = 0;
  config cfg;
  /// By rank; null at this rank (empty for a group of one).
  std::vector<transport::connection_ptr> conns;
  caf::actor_system* system = nullptr;
  /// The actor system's clock is simulated (deterministic tests): the
  /// engine and the drivers keep its time. Otherwise they read
  /// steady_clock directly (CAF's real-time clock is the same, one virtual
  /// call further away, on the hot path of every op).
  bool simulated_time = false;
  transport::buffer_pool* pool = nullptr;
  watchdog_handle watchdog;
  /// Re-establishes lost connections (MCCL_RECONNECT_MS); null: never.
  std::shared_ptr<transport::resumer> resumer;
  /// The fault report (MCCL_FAULTS); null: no scenario.
  std::shared_ptr<transport::fault_recorder> faults;
  /// The fault scenario, whose chunk faults the engine injects; null: none.
  std::shared_ptr<const transport::fault_scenario> scenario;
  /// Every rank on this host: small collectives go over this board
  /// (collectives/algorithms/board_collectives.hpp); null: all over the engine.
  std::shared_ptr<transport::shm_board> board;
};

class comm_core : public std::enable_shared_from_this<comm_core>, private engine_listener {
public:
  using clock = std::chrono::steady_clock;

  /// Builds the engine, spawns the actors, registers with the watchdog.
  static std::shared_ptr<comm_core> create(comm_core_init init);
  ~comm_core() override;

  int rank() const noexcept { return init_.rank; }
  int world() const noexcept { return init_.world; }
  const config& cfg() const noexcept { return init_.cfg; }
  const std::shared_ptr<flight_recorder>& flight() const noexcept { return flight_; }

  /// Numbers `op` (checked already, `op->done` a work_state), posts it to
  /// the engine and lets it move: a small collective runs to its end on
  /// this thread, anything else is left to a background driver until
  /// someone waits for it. Thread-safe; ops are numbered in call order.
  void submit(op_ptr op, const std::shared_ptr<work_state>& work);
  /// Aborts the communicator on every rank (communicator::abort).
  void abort(const std::string& reason);
  /// Revokes the communicator on every rank (communicator::revoke): the
  /// supervisor performs it (revoke_atom; this thread posts it when the
  /// supervisor does not answer within half a second); ops are refused
  /// once this returns; the engine agrees on the revoke point with the
  /// peers and ends what is in flight (collectives/engine/engine_revoke.cpp).
  void revoke(const std::string& reason);
  /// This rank knows the communicator is revoked.
  bool revoked() const { return engine_->revoked(); }
  /// The membership the supervisor knows (members_atom): the epoch, and by
  /// rank the member's rank in the communicator this one was made from.
  struct membership {
    uint64_t epoch = 0;
    std::vector<int> members;
  };
  membership members() const;
  /// The supervisor's: the membership is now `m`.
  void set_members(membership m);
  /// A membership change decided that this communicator is the group
  /// `members` at `epoch`: told to the supervisor (members_atom), which
  /// keeps it. Bounded: when CAF's workers cannot run the supervisor
  /// within half a second, kept here directly. With a test's clock the
  /// message is only sent (the test's scheduler delivers it).
  void announce_members(uint64_t epoch, std::vector<int> members);
  /// "revoked by rank R: reason", once revoked().
  std::string why_revoked() const { return engine_->why_revoked(); }
  /// Fails what is in flight, says BYE (writing what is queued for up to
  /// `flush`), closes the connections, stops the actors (waiting for them
  /// when `await_actors`; a deterministic test runs its scheduler itself).
  /// Returns within about a second, also when peers are gone. Idempotent.
  void finalize(std::chrono::milliseconds flush = std::chrono::milliseconds(500), bool await_actors = true);
  /// Peers with a message of `tag` no receive has claimed (communicator::probe).
  std::vector<int> probe(uint32_t tag);
  /// The ops in flight and where each stands (status queries,
  /// tools/mcclstatus). Nothing when the engine did not answer within
  /// `timeout` (false).
  bool status(std::vector<engine::op_status>& out, std::chrono::milliseconds timeout);
  /// True once the communicator aborted or was finalized.
  bool closed() const { return engine_->closed(); }
  /// communicator::on_abort: `cb` runs once when the communicator aborts
  /// (at once when it has).
  void on_abort(std::function<void(const error&)> cb);

  // ---- for the drivers and the actors

  /// Leads the engine on this thread until `done()` or `deadline`. False
  /// when another thread leads (it will finish the work).
  bool drive(driver_kind who, const std::function<bool()>& done, clock::time_point deadline);
  /// One pass if nobody leads (the watchdog's tick, an actor's decision,
  /// an API call that posted something): heartbeats, what arrived, what
  /// was posted. Nothing on the leader's own thread: its pass takes it.
  void kick();
  /// The watchdog's tick: check deadlines and liveness now.
  void check();
  /// How soon the watchdog should tick again for this communicator. Its
  /// engine fails an op past its deadline, and declares a silent peer dead,
  /// only in a check, so the interval bounds how late either comes: with
  /// ops in flight, a fiftieth of the shortest op timeout it has been
  /// given (at least 20 ms; at most a quarter heartbeat interval, as when
  /// idle); idle, a quarter heartbeat interval (its heartbeats go out in
  /// the checks' passes). A tick wakes the clock's thread and a CAF worker,
  /// which on a host whose cores all run ranks takes a core from a rank:
  /// the 20 ms it always was while busy made some 60 of each a second.
  std::chrono::milliseconds health_interval() const;
  /// What the progress actor does after its turn.
  struct actor_turn {
    bool more = false;        ///< ops are left: come back
    clock::time_point next{}; ///< when (now: at once, through the mailbox)
  };
  /// The progress actor's turn: passes while bytes move. When nothing moved
  /// for MCCL_SPIN_US (since `idle_since`, which it updates) it parks:
  /// `wake` is called when a connection is ready, and `next` says when a
  /// timer is due. Nothing happens when another thread leads.
  actor_turn drive_as_actor(const std::function<void()>& wake, clock::time_point& idle_since);
  engine& eng() noexcept { return *engine_; }
  /// Where its ops' completions send the metrics actor their batches
  /// (work_state, metrics_feed::add): idle_unit_.
  driving_unit& idle_unit() noexcept { return *idle_unit_; }
  const comm_core_init& init() const noexcept { return init_; }
  /// The actors (null once finalized), for inspection.
  const progress_handle& progress_actor() const noexcept { return progress_; }
  const supervisor_handle& supervisor_actor() const noexcept { return supervisor_; }
  const std::vector<link_handle>& link_actors() const noexcept { return links_; }
  /// The clock of the communicator's actors (virtual in deterministic tests).
  clock::time_point now() const;

private:
  explicit comm_core(comm_core_init init);
  /// This host's ranks of the communicator, this one included (all of
  /// them when the host of each is not known).
  int ranks_on_this_host() const;
  /// The board algorithm that runs `op` ("board", "board_rs", "board_stage"), or ""
  /// when it runs in the engine.
  std::string_view board_algorithm_for(const op_request& op) const;
  /// A board op numbered and waiting for its turn (comm_core_board.cpp).
  struct board_job {
    op_ptr op;
    std::shared_ptr<work_state> work;
    std::string_view algorithm; ///< a literal (board_algorithm())
    uint64_t n = 0;             ///< its first board op number
  };
  /// Runs a board op on this thread to its end, after any board op
  /// numbered before it (comm_core_board.cpp).
  void run_on_board(const op_ptr& op, const std::shared_ptr<work_state>& work, std::string_view algorithm);
  /// Numbers a board op larger than MCCL_INLINE_BYTES and leaves it to the
  /// board thread (or to the caller that waits for it first): the call
  /// returns at once, as one over the links does.
  void post_to_board(const op_ptr& op, const std::shared_ptr<work_state>& work, std::string_view algorithm);
  /// Numbers `op` for the board (id, seq, board op numbers); under submit_mutex_.
  board_job number_for_board(const op_ptr& op, const std::shared_ptr<work_state>& work, std::string_view algorithm);
  /// Runs queued jobs in order, board_mutex_ held, until `until`'s has run
  /// (null: until the queue is empty); their completions go to `ran`.
  void run_queued_jobs(const work_state* until, std::vector<std::pair<std::shared_ptr<work_state>, op_report>>& ran);
  /// Runs one numbered job on a board op actor; board_mutex_ held. Its
  /// completion goes to `report`, for the caller to deliver once it let go
  /// of the board.
  void run_board_job(board_job& job, op_report& report);
  /// A board job as its op actor runs it (board_session).
  struct board_run;
  /// The job's exchange over the board, start to end, into `report`: its
  /// actor's handler.
  void exchange_on_board(board_job& job, op_report& report);
  /// "allreduce seq 7 on rank 1 (board, count 1, float32, sum) failed at
  /// WHERE: WHY", as an op over links says it.
  std::string board_failure(const board_job& job, const std::string& where, const std::string& why) const;
  /// Runs queued jobs in order until `until` is done (null: the queue is
  /// empty). Blocks for board_mutex_, or with `try_only` returns false at
  /// once when another thread runs the board.
  bool run_board_queue(const work_state* until, bool try_only);
  void board_thread_main();
  /// At finalize, once the engine closed: ends the board thread and fails
  /// the board ops that never ran.
  void stop_board_thread();
  /// A board op failed because `departed.peer` finalized without it: the
  /// revoke or abort that rank sent before it left, if one arrives within
  /// a few milliseconds, else the departure.
  board_outcome departed_or_revoked(board_outcome departed);
  /// A board op completed here: while the communicator is being revoked,
  /// whether it stands (nothing) or fails (errc::revoked), once the ranks
  /// agreed on the revoke point.
  board_outcome revoke_verdict_on_board(const op_request& op, uint64_t seq);
  /// drive() without announcing a caller: leads while it can.
  bool lead_until(driver_kind who, const std::function<bool()>& done, clock::time_point deadline);
  /// One pass of the engine, then what it (or another thread) queued for
  /// the communicator's actors, which run here, as the leader; again while
  /// they queue more. True when bytes moved.
  bool pass(engine::leadership& lead);
  /// Lets go of the engine without handing off, and runs what another
  /// thread queued for the actors while it was letting go.
  void let_go(engine::leadership& lead);
  /// The driving unit's wake: a message for the communicator's actors came
  /// from a thread that is not draining it. Runs it here when nobody
  /// leads; otherwise the leader does.
  void actors_have_mail();
  void start_actors();

  // engine_listener
  void needs_driver(driver_kind who) override;
  void aborted(errc code, const std::string& why, int origin) override;
  void link_lost(int peer, const std::string& why) override;
  void peer_failed(int peer, errc code, const std::string& why) override;

  comm_core_init init_;
  std::shared_ptr<flight_recorder> flight_;
  std::shared_ptr<trace_recorder> trace_; ///< MCCL_TRACE; null: off
  /// The unit the communicator's actors run on (the op actors, the
  /// supervisor, the link actors), shared with its driven actors
  /// (driven_actor.hpp), and the op actors; declared before the engine,
  /// which hands them its ops, so they outlive it.
  std::shared_ptr<driving_unit> unit_;
  /// Work that waits for the driver's idle moments: the metrics actor,
  /// when a batch of this communicator's ops reaches it. Drained by the
  /// engine's leader only when it has nothing else to do (a pass that
  /// moved nothing, while the peers' frames are on their way; a kick while
  /// nobody led), so a fold never delays a frame that could move; never
  /// woken (a batch that waits too long is folded by the next op that
  /// finishes: metrics_feed::max_waiting_batches).
  std::shared_ptr<driving_unit> idle_unit_;
  /// The shortest timeout of an op submitted to the engine so far
  /// (health_interval()), in milliseconds; only ever lowered.
  std::atomic<std::chrono::milliseconds::rep> shortest_timeout_ms_;
  std::unique_ptr<op_actors> op_actors_;
  /// The board ops' actors and their unit, driven by whoever holds
  /// board_mutex_ (the board runs beside the engine).
  std::unique_ptr<driving_unit> board_unit_;
  std::unique_ptr<op_actors> board_actors_;
  /// The links the engine builds, until start_actors() gives each to its
  /// link actor, and the link actors that take the engine's turns.
  std::unique_ptr<link_channels> link_channels_;
  std::unique_ptr<engine> engine_;
  std::unique_ptr<op_thread> op_thread_; ///< null when MCCL_OP_THREAD_BYTES=0
  progress_handle progress_;
  supervisor_handle supervisor_; ///< linked to links_; stops the actors at finalize
  std::vector<link_handle> links_; ///< by peer; null at this rank
  std::mutex links_mutex_;         ///< links_ against finalize, for peer_failed()
  uint64_t watch_key_ = 0;

  std::mutex submit_mutex_; ///< numbers ops in call order
  uint64_t next_seq_ = 0;   ///< collectives issued (engine and board)
  uint64_t next_board_op_ = 0; ///< collectives issued to the board
  /// Board ops run one at a time, in the order they were numbered.
  std::mutex board_mutex_;
  /// Numbered board ops not started yet, in board order (under
  /// submit_mutex_); whoever runs the board takes them from the front.
  std::deque<board_job> board_queue_;
  std::condition_variable board_queue_cv_; ///< with submit_mutex_: the board thread's wake-up
  std::thread board_thread_;               ///< started by the first op posted to the board
  bool board_thread_stop_ = false;         ///< under submit_mutex_
  /// The op on the board now, for status queries (null: none).
  std::mutex board_status_mutex_;
  op_ptr board_op_;
  std::string_view board_op_algorithm_;
  clock::time_point board_op_started_;
  /// By op_kind: MCCL_ALGO has rules for it (then it may keep an op off the
  /// board); worked out once, not per op.
  std::array<bool, 32> algo_named_{};
  std::vector<uint64_t> next_message_; ///< sends issued, by peer
  uint64_t next_id_ = 1;    ///< 0 means "no op" to the engine
  /// on_abort's callbacks, run (and dropped) at the abort.
  std::mutex abort_mutex_;
  std::vector<std::function<void(const error&)>> abort_callbacks_;
  std::optional<error> aborted_with_;
  std::mutex finalize_mutex_;
  std::atomic<bool> finalized_{false};
  mutable std::mutex members_mutex_;
  membership members_;
};

} // namespace mccl::actors
