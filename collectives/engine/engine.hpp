#pragma once
/// The engine: mccl's one data plane. One per communicator. It reaches each
/// peer through that peer's link (peer_link.hpp: its channel and the chunks
/// held for ops not started yet), which the peer's link actor keeps, and
/// owns the ops in flight, each an
/// op session (op_session.hpp) hosting its algorithm, and moves every op of
/// every kind (collectives, custom collectives, send and receive, with or
/// without CRC, under fault scenarios) over every transport the same way.
///
/// Leadership. One thread at a time leads the engine (try_lead()); only
/// the leader moves bytes, runs algorithms and reductions. Which thread
/// leads is the drivers' choice (actors/comm_core.hpp): the thread that
/// issued or waits for an op, the communicator's op thread, or the
/// progress actor; they take turns, never run the engine twice. A pass
/// (progress()) never blocks; wait() blocks the leader until a connection
/// is ready, something is posted, or a time is reached.
///
/// Posting. Any thread may post work (ops to start, an abort, a
/// re-established connection, a health check, a task); the leader picks it
/// up at its next pass, and a leader blocked in wait() is woken for it.
/// Collectives start in issue order; those of a megabyte and more run one
/// at a time, the next started in the pass where the previous one ends
/// (admit()).
///
/// What it decides itself, in the leader: routing each frame to its op (or
/// to its link, which keeps it for an op not started yet), point-to-point
/// matching (run on each link's matcher), when a peer's frames are all in,
/// failing every op and sending ABORT to every peer once one op fails,
/// heartbeats on directions idle for half an interval. A lost peer is a
/// finding it reports instead of acting on it: it marks the communicator
/// revoked and tells the listener (peer_failed: the peer's link actor
/// exits, and the supervisor revokes through post_member_lost), acting
/// alone only after supervisor_window. What it is told by the control
/// plane: start this op, abort, revoke, a member is lost, check deadlines
/// and liveness now (the watchdog's clock), use this new connection (the
/// link actor's reconnect).
///
/// Completions run after the leader has let go of the engine, on that
/// thread, never while it is held: a Work's callback may issue the next op.

#include "collectives/engine/chunk_faults.hpp"
#include "collectives/observability/flight_recorder.hpp"
#include "collectives/observability/trace.hpp"
#include "collectives/engine/op.hpp"
#include "collectives/engine/op_runner.hpp"
#include "collectives/engine/peer_link.hpp"
#include "collectives/engine/p2p_matcher.hpp"
#include "collectives/extension/registry.hpp"
#include <mccl/config.hpp>
#include "transport/buffer_pool.hpp"
#include "transport/channel.hpp"

#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace mccl {

class engine_op;

/// True for the collectives whose result on any rank depends on every
/// rank's part (allreduce, allgather, reduce_scatter, alltoall, barrier):
/// completed on one rank means issued on all. What a revoke's agreement
/// counts (engine_revoke.cpp).
bool every_rank_contributes(op_kind k) noexcept;

/// How long a connection lost without BYE or ABORT waits for an ABORT from
/// another rank that explains it before the peer is blamed: a peer that
/// aborted because a third rank died may exit (closing its connections)
/// before its ABORT, or the first rank's, reaches us over another socket.
constexpr auto loss_grace = std::chrono::milliseconds(100);

/// How long a lost peer, reported to its link actor (engine_listener::
/// peer_failed), waits for the supervisor's revoke (post_member_lost)
/// before the engine revokes by itself: the supervisor answers within a
/// few milliseconds unless CAF's workers cannot run it, and the ops waiting on
/// the peer must still fail, promptly, through whoever drives the engine.
constexpr auto supervisor_window = std::chrono::milliseconds(200);

/// What the engine tells the communicator's control plane. Called on the
/// thread that leads (or just let go); must only signal, never block or
/// call back into the engine.
class engine_listener {
public:
  virtual ~engine_listener() = default;
  /// Ops are posted or running and nobody leads: a background driver of
  /// kind `who` (op thread or actor) should take over.
  virtual void needs_driver(driver_kind who) = 0;
  /// The communicator aborted (once): why, and the rank that began it.
  virtual void aborted(errc code, const std::string& why, int origin) = 0;
  /// The connection to `peer` was lost and waits to be re-established
  /// (MCCL_RECONNECT_MS): answer with post_resume().
  virtual void link_lost(int peer, const std::string& why) = 0;
  /// The engine found `peer` lost for good (reset, EOF, a protocol error,
  /// CRC recovery that gave up, a silent peer): `code` and `why`, the text
  /// the ops waiting on it will fail with. revoked() holds already; the
  /// ops fail once the supervisor revokes (post_member_lost()), or after
  /// supervisor_window without it.
  virtual void peer_failed(int peer, errc code, const std::string& why) = 0;
};

struct engine_options {
  int rank = 0;
  int world = 1;
  uint32_t comm_id = 0;
  config cfg;
  transport::buffer_pool* pool = nullptr;
  /// Lost connections wait for post_resume() (MCCL_RECONNECT_MS with
  /// MCCL_TRANSPORT_CRC and a resumer).
  bool resumable = false;
  std::shared_ptr<transport::fault_recorder> faults; ///< null: no scenario
  /// The scenario whose "on": "chunk" faults act on the chunks this rank's
  /// ops receive (chunk_faults.hpp); null: none.
  std::shared_ptr<const transport::fault_scenario> scenario;
  std::shared_ptr<flight_recorder> flight;           ///< null: none
  std::shared_ptr<trace_recorder> trace;             ///< MCCL_TRACE; null: off
  /// Who runs the ops' state machines (op_runner.hpp): the communicator's
  /// op actors; null: in place (direct_runners).
  op_runners* runners = nullptr;
  /// Who keeps the links (peer_link.hpp) besides the engine: the
  /// communicator's link actors; null: the engine alone.
  link_hosts* links = nullptr;
  /// The clock of every time the engine keeps (heartbeats, deadlines,
  /// silences); a deterministic test passes its virtual one.
  std::function<std::chrono::steady_clock::time_point()> now = [] {
    return std::chrono::steady_clock::now();
  };
};

class engine : private transport::channel_listener {
public:
  using clock = std::chrono::steady_clock;

  /// `conns` by rank, null at this rank's own.
  engine(engine_options opts, std::vector<transport::connection_ptr> conns, engine_listener& listener);
  ~engine() override;
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  // ---- any thread ------------------------------------------------------------

  /// Starts `op` (numbered already, `op->done` set) at the next pass.
  void post(op_ptr op);
  /// Aborts the communicator at the next pass.
  void post_abort(errc code, std::string why, int origin);
  /// Revokes the communicator (communicator::revoke; engine_revoke.cpp):
  /// revoked() holds from now on, so this rank issues nothing more; at the
  /// next pass the leader agrees on the revoke point with every peer and
  /// ends what is in flight. `origin`: the rank that revoked; `reason`:
  /// its words.
  void post_revoke(int origin, std::string reason);
  /// The link actor's answer to link_lost(): the new connection, or null
  /// and why it could not be re-established.
  void post_resume(int peer, transport::connection_ptr conn, std::string why);
  /// The supervisor's decision on a link that exited with `code` and `why`:
  /// the member `peer` is lost and the communicator is revoked. Every op in
  /// flight fails (naming the peer: with the engine's finding if it made
  /// one, else with `why`) and every peer gets an ABORT that revokes it on
  /// that rank too. A link still being re-established fails with `why`.
  void post_member_lost(int peer, errc code, std::string why);
  /// A lost member found outside the engine (the host board: a rank that
  /// finalized without an op this rank waits for): the communicator is
  /// revoked from now on, and the leader reports it as its own finding
  /// (engine_listener::peer_failed); `text` is what the ops fail with.
  void post_lost(int peer, errc code, std::string text);
  /// Check op deadlines (MCCL_TIMEOUT_MS) and peers' silence
  /// (MCCL_HEARTBEAT_MS x MCCL_HEARTBEAT_MISSES) at the next pass.
  void post_check();
  /// Runs `task` in the leader at the end of the next pass, after every
  /// channel was read (inspection: probe).
  void post_task(std::function<void()> task);
  /// Wakes a leader blocked in wait() (to let go: the op thread stops).
  void wake() { knock(false); }

  /// Nothing posted and no op in flight.
  bool idle() const noexcept { return unfinished_.load(std::memory_order_acquire) == 0; }
  /// The communicator aborted or was shut down: new ops fail at once.
  bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }
  std::string why_closed() const;
  /// Why, as an error code: the aborting rank's, or errc::finalized.
  errc closed_code() const;
  /// This rank knows the communicator is revoked (by itself or a peer):
  /// new ops are refused. Thread-safe.
  bool revoked() const noexcept { return revoked_.load(); }
  /// "revoked by rank R: reason", once revoked().
  std::string why_revoked() const;
  /// The revoke is a lost member's (the supervisor's, or a peer's ABORT
  /// that revokes): no revoke point is agreed; what completed stands.
  bool revoked_for_lost_member() const noexcept { return revoked_lost_.load(); }
  /// A collective with sequence number `seq` completed on this rank outside
  /// the engine (the host board): it counts toward this rank's revoke point.
  void note_completed(uint64_t seq) noexcept;
  /// For an op outside the engine (the host board) that is still running
  /// or has just completed while the communicator is being revoked.
  enum class revoke_verdict { undecided, completes, fails };
  revoke_verdict verdict_for(uint64_t seq) const noexcept;
  /// The thread leading now is this one (a completion callback, say).
  bool led_by_this_thread() const noexcept;

  /// Holds the engine while it exists. Letting go runs the completions
  /// collected meanwhile and, when ops are left that nobody drives, asks
  /// the listener for a background driver.
  class leadership {
  public:
    leadership() = default;
    leadership(leadership&& o) noexcept;
    leadership& operator=(leadership&& o) noexcept;
    ~leadership() { release(); }
    explicit operator bool() const noexcept { return e_ != nullptr; }
    driver_kind who() const noexcept { return who_; }
    /// Lets go now. `hand_off`: ask for a background driver if work is
    /// left (a background driver parking itself passes false).
    void release(bool hand_off = true);

  private:
    friend class engine;
    leadership(engine* e, driver_kind who) : e_(e), who_(who) {}
    engine* e_ = nullptr;
    driver_kind who_ = driver_kind::caller;
  };

  /// Leadership if nobody leads; an empty guard otherwise. Never blocks.
  leadership try_lead(driver_kind who);
  /// Blocks until a leader lets go (and has run its completions) or
  /// `until`: for a thread that wants to lead, or waits for an op another
  /// leader completes.
  void await_release(clock::time_point until);
  /// After letting go without handing off: asks for a background driver
  /// when work is left and no caller is driving.
  void hand_off();
  /// A thread that issued or waits for an op drives the engine from now
  /// on (until caller_left()): background drivers leave the engine to it,
  /// since it leads whenever the engine is free.
  void caller_arrived() noexcept { callers_.fetch_add(1, std::memory_order_acq_rel); }
  void caller_left() noexcept { callers_.fetch_sub(1, std::memory_order_acq_rel); }
  bool callers_driving() const noexcept { return callers_.load(std::memory_order_acquire) > 0; }

  // ---- the leader --------------------------------------------------------------

  /// One pass: posted work, every channel both ways, heartbeats, timers.
  /// True when anything moved or changed.
  bool progress(leadership& l);
  /// One link's turn in the leader's pass: its channel writes what is
  /// queued and reads (each frame goes to its op actor as a chunk message,
  /// or is held for an op not started yet, or is matched to a receive);
  /// what ended settles. True when bytes moved. The pass asks the link's
  /// keeper (engine_options::links: the peer's link actor, in its handler)
  /// to run it, and runs it itself without one; what the reads made ops
  /// queue for other links, the pass writes in those links' turns. Every
  /// pass reads and writes a channel only here. The leader only.
  bool move_link(int peer);
  /// An op's frame for `peer` goes on its link's send queue, to be written
  /// in the link's turns; a link that refuses it (closed) fails the op when
  /// the peer finalized before taking it. The pass asks the link's keeper
  /// (engine_options::links: the peer's link actor, in its handler of the
  /// op's chunk message) to run it, and runs it itself without one. The
  /// leader only.
  void queue_chunk(int peer, const outgoing_chunk& chunk);
  /// A pass for a driver that knows which connections became readable (the
  /// simulator, tools/mccl_sim/): posted work, the channels of `readable`
  /// and those with frames queued to send, timers; no heartbeats. With
  /// thousands of peers it visits a few channels instead of all.
  bool progress_peers(leadership& l, const std::vector<int>& readable);
  /// The engine's clock (engine_options::now).
  clock::time_point now() const { return opts_.now(); }
  /// Blocks until a connection is ready, something is posted, or `until`
  /// (by the engine's clock; a real one, since this blocks a thread).
  void wait(leadership& l, clock::time_point until);
  /// For drivers that cannot block: `wake` is called (on another thread)
  /// when a connection becomes ready.
  void arm(leadership& l, const std::function<void()>& wake);
  /// When a pass is due without any I/O (a heartbeat to send, a lost
  /// peer's grace period ending).
  clock::time_point next_due(leadership& l) const;
  /// When a lost peer's grace period ends (time_point::max() when no peer
  /// is lost): the one timer of a driver without heartbeats (the simulator).
  clock::time_point grace_due(leadership& l) const;
  /// Ops ended in this leadership: letting go completes them.
  bool completions_pending(leadership&) const noexcept { return !completions_.empty(); }
  /// Something is posted that no pass has taken yet.
  bool has_posted() const noexcept { return inbox_ready_.load(std::memory_order_acquire); }
  /// No op is running and nothing is posted (completions may be pending).
  bool quiet(leadership&) const noexcept { return ops_.empty() && held_.empty() && !inbox_ready_.load(); }
  /// Finalize: fails what is in flight, tells every peer BYE (this rank
  /// issued `issued` collectives), writes what is queued until `deadline`
  /// (with CRC: until the peers acknowledged everything), closes every
  /// connection. Later posts fail with errc::finalized.
  void shutdown(leadership& l, uint64_t issued, clock::time_point deadline);

  /// Inspection for the leader (tasks): a message with `tag` from `peer`
  /// that no receive has claimed yet.
  bool has_unclaimed_message(int peer, uint32_t tag) const;

  /// Inspection for the leader (tasks): an op in flight, for status queries.
  struct op_status {
    std::string op;        ///< describe(request): "allreduce(count 10, float32, sum)"
    bool collective = true;
    uint64_t seq = 0;      ///< collectives: the sequence number
    std::string algorithm;
    std::string where;     ///< the algorithm's where(): step, and the peer waited on
    double running_ms = 0;
  };
  /// Every op in flight, in sequence order (point-to-point ones last).
  std::vector<op_status> running_ops() const;

private:
  friend class engine_op;
  struct command;

  // channel_listener
  uint8_t* landing_for(int peer, const wire::frame_header& h) override;
  void on_frame(transport::received_frame f) override;
  /// Hands a frame to its op, or keeps it for an op not started yet.
  void route(transport::received_frame f);
  void on_sent(int peer, const transport::frame_ref& ref) override;
  void on_peer_abort(int peer, int origin, errc code, const std::string& reason, uint64_t revoke_point,
                     bool revokes) override;
  void on_peer_bye(int peer, uint64_t issued) override;
  void on_down(int peer, transport::down_kind kind, errc code, const std::string& why) override;
  void on_fatal(int peer, errc code, const std::string& why) override;
  void on_peer_revoke(int peer, int origin, uint64_t point, const std::string& reason) override;

  // Revoking (engine_revoke.cpp), in the leader.
  /// This rank stops accepting ops and tells every peer its revoke point.
  void begin_revoke(int origin, const std::string& reason);
  /// Agrees on the revoke point once every peer answered or the window
  /// ended; releases or fails the completions held meanwhile.
  void maybe_decide_revoke();
  /// Once the collectives below the point ended here: closes the
  /// communicator as revoked (abort with errc::revoked).
  void maybe_finish_revoke();
  /// settle(): a collective ended while revoking. True when its completion
  /// is held until the revoke point is agreed; otherwise it may be turned
  /// into the revoke's failure.
  bool hold_for_revoke(const op_ptr& request, op_report& r);
  /// While revoking: `peer` finished its part (ABORT or BYE), having
  /// agreed on `agreed_point` (0: not said). True when that is all there
  /// is to do (the revoke ends what the peer leaves).
  bool peer_done_revoking(int peer, uint64_t agreed_point = 0);
  /// While revoking: `peer` finished its part earlier, so its link going
  /// down is expected.
  bool revoking_without(int peer) const;
  /// Marks the communicator revoked by `origin` for `reason` (any thread
  /// reads revoked() true from now on), unless it is already.
  void mark_revoked(int origin, const std::string& reason, bool lost_member = false);
  /// A lost member found here: the communicator is revoked at once, the
  /// peer's link actor hears of it, and the ops fail when the supervisor
  /// answers (member_lost()) or supervisor_window ends. `text`: what the
  /// ops fail with; `silent`: the watchdog's verdict, whose channel is
  /// failed with `silent_why` after the ABORT went out on it.
  void found_lost(int peer, errc code, const std::string& text, bool silent = false,
                  const std::string& silent_why = {});
  /// The supervisor's revoke for the lost `peer` (or supervisor_window ended).
  void member_lost(int peer, errc code, const std::string& why);
  /// An abort (other than the revoke's own) while completions are held:
  /// they fail with it.
  void drop_held_for_revoke(errc code, const std::string& why);
  /// What an op ended by the revoke fails with.
  std::string revoke_failure() const;
  /// "allreduce seq 7 on rank 2: " + revoke_failure().
  std::string revoked_op(const issued_op& op) const;

  void push(command c);
  /// `peer`'s channel has frames to send: progress_peers() visits it.
  void note_queued(int peer);
  /// Gives the links frames were queued to since this last ran their
  /// turns (turn_of), in the order the frames were queued; true when
  /// anything moved.
  bool write_queued();
  /// `peer`'s link's turn (move_link), through its keeper when there is one.
  bool turn_of(int peer);
  /// The open channels a full pass visits (after their keep-alives): all
  /// of them, or with many peers those whose sockets poll(2) readable plus
  /// those with work of their own.
  const std::vector<transport::channel*>& channels_to_visit(clock::time_point now);
  /// Marks in awaited_ the peers the ops in flight wait on next; false when
  /// there are none in flight or one cannot tell.
  bool mark_next_senders();
  /// The start of every pass: posted work. True when there was some.
  bool begin_pass(clock::time_point now);
  /// The end of every pass: a lost peer's grace period, health checks,
  /// tasks. True when it changed anything.
  bool end_of_pass(clock::time_point now);
  /// Wakes a leader blocked in wait(); `for_an_op`: counted as a thread
  /// wake-up on an op's path (metrics_summary::thread_wakeups), not the
  /// watchdog's clock or a driver told to stop.
  void knock(bool for_an_op = true);
  void drain_inbox();
  /// Starts `op` now, or holds a collective back while others keep enough
  /// data in flight (see collective_window).
  void admit(op_ptr op);
  /// Starts held collectives, in order, while there is room.
  void admit_held();
  /// `bytes`: op->selection_bytes(world); `now`: the op's start time.
  void start(op_ptr op, std::size_t bytes, clock::time_point now);
  /// Ops that need no peers (a group of one) end here; true if it did.
  bool complete_locally(const op_ptr& op);
  /// The op ends before it started: `code` and why.
  void refuse(const op_ptr& op, errc code, const std::string& why);
  void deliver(engine_op& op, transport::received_frame& f);
  /// The chunks that came for `op` before it started (a collective's early
  /// frames, a receive's kept message), taken from where they were held; a
  /// receive is posted with its peer's matcher on the way.
  std::vector<transport::received_frame> take_early(engine_op& op);
  void deliver_matches(std::vector<p2p_matcher::match>& matches);
  /// The matcher of `peer`'s link; null when this rank has no link to it.
  p2p_matcher* matcher_of(int peer) const noexcept {
    return peer >= 0 && peer < opts_.world && links_[static_cast<std::size_t>(peer)]
             ? &links_[static_cast<std::size_t>(peer)]->matcher()
             : nullptr;
  }
  /// From an op's session: queue one data frame for `peer`.
  void send_frame(engine_op& op, int peer, const wire::frame_header& h, const uint8_t* data,
                  std::size_t len);
  /// From an op's session: it reported its outcome.
  void reported(engine_op& op);
  /// Tells `op` (through its runner) to fail with `code` and `why`.
  void fail(engine_op& op, errc code, const std::string& why);
  /// Ends the ops that reported: aborts first when one failed, then
  /// forgets them and queues their completions.
  void settle();
  /// `revokes`: the ABORT revokes the communicator on the peers that read
  /// it (a lost member; wire::abort_revokes).
  void abort(errc code, const std::string& why, int origin, const std::string& wire_text = {},
             bool revokes = false);
  void check_health();
  /// Aborts when more than 2 GiB wait for ops not started or receives not
  /// posted (ranks issuing different ops).
  void check_kept(int peer, uint64_t seq, const char* what);
  void finish_release(bool hand_off);
  std::string peer_name(int peer) const;

  engine_options opts_;
  engine_listener& listener_;
  direct_runners direct_runners_;
  algorithm_cache algorithms_; ///< the leader's: the factories of the algorithms ops ran with
  op_runners* runners_; ///< opts_.runners, or &direct_runners_
  std::shared_ptr<const std::vector<int>> host_of_; ///< opts_.cfg.host_of, shared with every op
  /// By rank: references to the links, which the link actors keep
  /// (engine_options::links); null at this rank.
  std::vector<std::shared_ptr<peer_link>> links_;
  /// Peers whose channels got frames to send since progress_peers() last
  /// visited them (listed once: queued_flag_), or all of them after an
  /// abort queued one to every peer.
  std::vector<int> queued_to_;
  std::vector<int> writing_; ///< write_queued()'s snapshot of queued_to_, kept for its capacity
  std::vector<char> queued_flag_;
  bool queued_to_all_ = false;
  /// By rank: the pass (passes_) in which its link last had a turn; a
  /// full pass reads a link once (progress()).
  std::vector<uint64_t> turned_in_pass_;
  uint64_t passes_ = 0;
  // channels_to_visit()'s scratch, kept to reuse its capacity.
  std::vector<transport::channel*> visit_;
  std::vector<struct pollfd> poll_fds_;
  std::vector<transport::channel*> poll_of_;
  std::vector<int> next_senders_; ///< as last marked in awaited_
  std::vector<char> awaited_;     ///< by rank
  int passes_since_sweep_ = 0;    ///< passes since every socket was polled

  // Leadership and posting.
  std::mutex lead_mutex_;
  std::atomic<const void*> leader_thread_{nullptr};
  driver_kind leader_kind_ = driver_kind::caller;
  mutable std::mutex inbox_mutex_;
  std::vector<command> inbox_;
  std::vector<command> draining_;            ///< the leader's: the inbox being worked off
  std::vector<std::function<void()>> tasks_; ///< the leader's, from the inbox
  std::atomic<bool> inbox_ready_{false};
  std::atomic<bool> check_due_{false};
  std::atomic<bool> waiting_{false};
  int knock_fd_ = -1; ///< eventfd: wakes a leader blocked in wait()
  /// Ops posted and not completed; what idle() reads.
  std::atomic<int> unfinished_{0};
  /// Posted and not completed, by the background driver they want.
  std::atomic<int> want_op_thread_{0};
  std::atomic<int> want_actor_{0};
  std::atomic<int> callers_{0};           ///< caller threads inside a drive
  std::mutex release_mutex_;
  std::condition_variable released_;      ///< a leader let go
  std::atomic<int> release_waiters_{0};
  std::atomic<bool> closed_{false};
  mutable std::mutex closed_mutex_;
  std::string closed_why_;
  errc closed_code_ = errc::none;

  // Ops (the leader only).
  clock::time_point now_;
  std::unordered_map<uint64_t, std::unique_ptr<engine_op>> ops_; ///< by op id
  std::unordered_map<uint64_t, engine_op*> routes_;             ///< collectives by seq
  uint64_t next_start_seq_ = 0; ///< collectives below this have started
  /// Collectives posted but held back (admit()), in issue order, with
  /// their selection bytes.
  std::deque<std::pair<op_ptr, std::size_t>> held_;
  /// Bytes (selection bytes) of the collectives running now.
  std::size_t running_bytes_ = 0;
  /// Chunks held by the links for collectives not started yet (peer_link::hold_early).
  std::size_t early_bytes_ = 0;
  std::size_t early_frames_ = 0;
  /// The scenario's chunk faults for this rank; null (the rule) when none.
  std::unique_ptr<chunk_faults> chunk_faults_;
  chunk_faults::pass_fn route_fn_; ///< route(), for chunk_faults_
  std::vector<engine_op*> reported_;
  std::vector<std::pair<op_ptr, op_report>> completions_; ///< run once the lead is let go

  // Revoking: what any thread reads (under closed_mutex_: the texts).
  std::atomic<bool> revoked_{false};
  std::atomic<bool> revoked_lost_{false}; ///< revoked_ was set for a lost member
  std::atomic<bool> revoke_decided_{false};
  std::atomic<uint64_t> revoke_point_{0};
  /// 1 + the highest sequence number of a collective that needs every
  /// rank's part (every_rank_contributes) and completed here, engine or board.
  std::atomic<uint64_t> completed_point_{0};
  int revoke_origin_ = -1;
  std::string revoke_reason_;
  /// The leader's revoke state.
  struct revoke_state {
    bool active = false;   ///< this rank froze and told its peers
    bool finished = false; ///< closed as revoked
    std::vector<char> answered; ///< by rank: its revoke point is in
    /// By rank: the peer finished its part (its ABORT with errc::revoked,
    /// or its BYE): every frame it owed the ops below the point is in, and
    /// its link going down or its departure fails nothing by itself.
    std::vector<char> peer_done;
    clock::time_point deadline; ///< the answers' window ends
    std::vector<std::pair<op_ptr, op_report>> held; ///< completions waiting for the point
  } revoke_;

  // Failure state (the leader only).
  bool aborted_ = false;
  errc abort_code_ = errc::none;
  std::string abort_reason_;
  bool shut_down_ = false;
  std::map<int, uint64_t> departed_; ///< peers that said BYE: collectives they issued
  /// A lost member reported to its link actor, awaiting the supervisor's
  /// revoke (peer -1: none).
  struct lost_member {
    int peer = -1;
    errc code = errc::none;
    std::string text;       ///< what the ops fail with
    bool silent = false;    ///< the watchdog's verdict: its channel fails after the ABORT
    std::string silent_why;
    clock::time_point due{}; ///< the engine revokes by itself then
  } lost_;
  /// The supervisor decided on `peer` before the engine found it lost (a
  /// link not re-established): the finding revokes at once.
  int decided_lost_ = -1;
  int pending_loss_peer_ = -1;       ///< a lost peer waiting for an ABORT that explains it
  std::string pending_loss_why_;     ///< with the others lost while it waits
  clock::time_point pending_loss_at_;
  std::vector<int> also_lost_;       ///< peers lost while pending_loss_peer_ waits, named in its text
};

} // namespace mccl
