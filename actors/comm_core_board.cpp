// comm_core's board path: small collectives among ranks of one host, run
// over the host board (collectives/algorithms/board_collectives.hpp) instead
// of the engine, each by an op actor of the board's pool on the thread that
// holds the board (the caller, or the board thread).

#include "actors/comm_core.hpp"
#include "actors/helper_thread.hpp"

#include "collectives/algorithms/board_collectives.hpp"
#include "collectives/observability/metrics_registry.hpp"
#include "collectives/engine/op.hpp"
#include "config/log.hpp"

#include <thread>
#include <utility>
#include <vector>

namespace mccl::actors {

// Every rank decides alike: the op and the settings only, never local
// state (a rank that took the engine for an op its peers put on the board
// would wait for them in vain). MCCL_ALGO naming an algorithm for the op
// keeps it in the engine, unless it names board_rs.
std::string_view comm_core::board_algorithm_for(const op_request& op) const {
  const auto& board = init_.board;
  if (!board)
    return {};
  auto kind = static_cast<std::size_t>(op.kind);
  std::string named;
  if (kind < algo_named_.size() && algo_named_[kind])
    named = algo_for(init_.cfg.algo, to_string(op.kind), op.selection_bytes(init_.world));
  return board_algorithm(op, init_.world, board->slot_bytes(), board->stage_bytes(), named);
}

comm_core::board_job comm_core::number_for_board(const op_ptr& op, const std::shared_ptr<work_state>& work,
                                                 std::string_view algorithm) {
  board_job job;
  op->id = next_id_++;
  op->seq = next_seq_++; // one numbering for both paths
  job.n = next_board_op_;
  next_board_op_ += board_ops(*op, init_.world, init_.board->stage_bytes(), algorithm);
  job.op = op;
  job.work = work;
  job.algorithm = algorithm;
  return job;
}

namespace {

/// Set on a board thread: its ops' metrics say who ran them.
thread_local bool on_board_thread = false;

/// Completes what ran, in order, once the board is let go: a Work's
/// callback may issue the next board op.
void complete_all(std::vector<std::pair<std::shared_ptr<work_state>, op_report>>& ran) {
  for (auto& [work, report] : ran)
    work->complete(std::move(report));
}

} // namespace

void comm_core::run_on_board(const op_ptr& op, const std::shared_ptr<work_state>& work, std::string_view algorithm) {
  // Usually nothing waits before it: it runs and completes alone, with no
  // list of completions to allocate.
  std::vector<std::pair<std::shared_ptr<work_state>, op_report>> ran;
  op_report report;
  bool behind = false;
  {
    std::lock_guard<std::mutex> board_guard{board_mutex_};
    board_job job;
    {
      std::lock_guard<std::mutex> guard{submit_mutex_};
      job = number_for_board(op, work, algorithm);
      // Board ops posted before this one and not started yet go first:
      // every rank runs the board in the order it numbered its ops.
      behind = !board_queue_.empty();
      if (behind)
        board_queue_.push_back(std::move(job));
    }
    if (behind)
      run_queued_jobs(work.get(), ran);
    else
      run_board_job(job, report);
  }
  if (behind)
    return complete_all(ran);
  work->complete(std::move(report));
}

void comm_core::run_queued_jobs(const work_state* until,
                                std::vector<std::pair<std::shared_ptr<work_state>, op_report>>& ran) {
  for (bool ours = until && until->done(); !ours;) {
    board_job next;
    {
      std::lock_guard<std::mutex> guard{submit_mutex_};
      if (board_queue_.empty())
        break;
      next = std::move(board_queue_.front());
      board_queue_.pop_front();
    }
    ours = next.work.get() == until;
    ran.emplace_back(next.work, op_report{});
    run_board_job(next, ran.back().second);
  }
}

void comm_core::post_to_board(const op_ptr& op, const std::shared_ptr<work_state>& work,
                              std::string_view algorithm) {
  {
    std::lock_guard<std::mutex> guard{submit_mutex_};
    if (board_thread_stop_) { // finalized: the board thread is gone
      work->complete(errc::finalized, describe(*op) + ": the communicator was finalized");
      return;
    }
    board_queue_.push_back(number_for_board(op, work, algorithm));
    if (!board_thread_.joinable())
      board_thread_ = std::thread([this] { board_thread_main(); });
  }
  // A caller that waits before the board thread took the op runs it itself
  // (and every board op numbered before it): no hand-off then.
  std::weak_ptr<comm_core> self = weak_from_this();
  work->set_driver([self](const work_state& state, clock::time_point) {
    auto c = self.lock();
    return c && c->run_board_queue(&state, true);
  });
  metrics_registry::count_thread_wakeup();
  board_queue_cv_.notify_one();
}

bool comm_core::run_board_queue(const work_state* until, bool try_only) {
  std::vector<std::pair<std::shared_ptr<work_state>, op_report>> ran;
  {
    std::unique_lock<std::mutex> board_guard{board_mutex_, std::defer_lock};
    if (try_only) {
      if (!board_guard.try_lock())
        return false; // another thread runs the board: it completes the op
    } else {
      board_guard.lock();
    }
    run_queued_jobs(until, ran);
  }
  complete_all(ran);
  return true;
}

void comm_core::board_thread_main() {
  on_board_thread = true;
  start_helper_thread("mccl-board", init_.cfg.helper_cpus);
  std::unique_lock<std::mutex> lock{submit_mutex_};
  for (;;) {
    board_queue_cv_.wait(lock, [this] { return board_thread_stop_ || !board_queue_.empty(); });
    if (board_thread_stop_)
      return;
    lock.unlock();
    run_board_queue(nullptr, false);
    lock.lock();
  }
}

void comm_core::stop_board_thread() {
  std::deque<board_job> left;
  {
    std::lock_guard<std::mutex> guard{submit_mutex_};
    board_thread_stop_ = true;
  }
  board_queue_cv_.notify_all();
  // The op it runs ends at once: the engine is closed (its board waits stop).
  if (board_thread_.joinable())
    board_thread_.join();
  {
    std::lock_guard<std::mutex> guard{submit_mutex_};
    left.swap(board_queue_);
  }
  for (auto& job : left)
    job.work->complete(errc::finalized, describe(*job.op) + " seq " + std::to_string(job.op->seq) + " on rank "
                                          + std::to_string(init_.rank)
                                          + ": the communicator was finalized before it ran");
}

/// A board job as its op actor runs it. What escapes the exchange (it
/// catches its own failures; this is a fault) fails the op, naming it.
struct comm_core::board_run final : board_session {
  board_run(comm_core& c, board_job& j, op_report& r) : core(c), job(j), report(r) {}
  void run() override { core.exchange_on_board(job, report); }
  void fail(errc code, const std::string& why) override {
    {
      std::lock_guard<std::mutex> guard{core.board_status_mutex_};
      core.board_op_ = nullptr;
    }
    report.algorithm = job.algorithm;
    report.seq = job.op->seq;
    report.code = code;
    report.message = core.board_failure(job, "board exchange", why);
    MCCL_LOG(error, report.message);
  }

  comm_core& core;
  board_job& job;
  op_report& report;
};

void comm_core::run_board_job(board_job& job, op_report& report) {
  board_run session{*this, job, report};
  board_actors_->run(session);
}

std::string comm_core::board_failure(const board_job& job, const std::string& where, const std::string& why) const {
  auto what = describe(*job.op);
  auto paren = what.find('(');
  return what.substr(0, paren) + " seq " + std::to_string(job.op->seq) + " on rank " + std::to_string(init_.rank)
         + " (" + std::string(job.algorithm) + ", " + what.substr(paren + 1) + " failed at " + where + ": " + why;
}

void comm_core::exchange_on_board(board_job& job, op_report& report) {
  const auto& op = job.op;
  const auto& algorithm = job.algorithm;
  board_call call;
  call.seq = op->seq;
  call.n = job.n;
  call.board = init_.board.get();
  call.rank = init_.rank;
  call.world = init_.world;
  call.spin = init_.cfg.spin;
  call.timeout = op->timeout;
  // One clock read for the start and one for the end, shared by the
  // deadline, the flight recorder, the trace and the report: a read costs
  // some 20-40 ns on the VMs measured, a few percent of a 2-rank board op.
  auto started = clock::now();
  call.deadline = started + op->timeout;
  call.asleep = [this] { kick(); }; // nobody else may be reading the links now
  call.closed = [this, seq = call.seq]() -> board_outcome {
    if (engine_->closed())
      return {engine_->closed_code(), engine_->why_closed(), "board exchange"};
    // Revoking: a board op at or past the agreed revoke point waits in vain
    // (some rank never posts it). Below it, every rank posted it: wait on.
    if (engine_->verdict_for(seq) == engine::revoke_verdict::fails)
      return {errc::revoked, "the communicator was " + engine_->why_revoked(), "board exchange"};
    return {};
  };
  auto driver = on_board_thread ? driver_kind::op_thread : driver_kind::caller;
  auto ticket = flight_->started(recorded_op(*op, init_.world, algorithm, driver), started);
  {
    std::lock_guard<std::mutex> guard{board_status_mutex_};
    board_op_ = op; // described only when someone asks (status)
    board_op_algorithm_ = algorithm;
    board_op_started_ = started;
  }
  auto outcome = algorithm == "board_rs"      ? run_board_rs(*op, call)
                 : algorithm == "board_stage" ? run_board_stage(*op, call)
                                              : mccl::run_on_board(*op, call);
  if (outcome.code == errc::peer_lost && outcome.peer >= 0)
    outcome = departed_or_revoked(std::move(outcome));
  if (outcome.code == errc::none)
    outcome = revoke_verdict_on_board(*op, call.seq);
  {
    std::lock_guard<std::mutex> guard{board_status_mutex_};
    board_op_ = nullptr;
  }
  auto ended = clock::now();
  if (trace_)
    trace_->op(to_string(op->kind), true, call.seq, std::string(algorithm), op->selection_bytes(init_.world), 0,
               started, ended, outcome.code == errc::none);
  flight_->ended(ticket, outcome.code == errc::none ? flight_recorder::state::done : flight_recorder::state::failed,
                 ended);
  report.algorithm = algorithm;
  report.driver = driver;
  report.seq = call.seq;
  report.bytes = op->selection_bytes(init_.world);
  report.duration = ended - started;
  if (outcome.code == errc::none || engine_->closed()) { // closed: the communicator's own reason
    report.code = outcome.code;
    report.message = std::move(outcome.message);
    return;
  }
  auto message = board_failure(job, outcome.where, outcome.message);
  if (outcome.code == errc::timeout)
    message += " (" + flight_->progress_note() + ")";
  if (outcome.code == errc::revoked) { // every rank fails it alike: nothing to abort
    report.code = outcome.code;
    report.message = std::move(message);
    return;
  }
  MCCL_LOG(error, message);
  if (!finalized_.load()) { // every rank fails, as when an op over links fails
    if (outcome.code == errc::peer_lost && outcome.peer >= 0)
      // A member that left: revoked before this op completes, and the
      // supervisor revokes on every rank (the peer's link actor exits).
      engine_->post_lost(outcome.peer, outcome.code, message);
    else
      engine_->post_abort(outcome.code, message, init_.rank);
    kick();
  }
  report.code = outcome.code;
  report.message = std::move(message);
}

board_outcome comm_core::departed_or_revoked(board_outcome departed) {
  // A rank that finalized without this op may have said why first (it
  // revoked, or aborted): its words come over the links, which a pass
  // reads. Look for a few milliseconds before calling it a departure.
  auto until = clock::now() + std::chrono::milliseconds(5);
  for (;;) {
    if (engine_->closed())
      return {engine_->closed_code(), engine_->why_closed(), departed.where};
    if (engine_->revoked() && !engine_->revoked_for_lost_member())
      return {errc::revoked, "the communicator was " + engine_->why_revoked(), departed.where};
    if (clock::now() >= until)
      return departed;
    kick();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

board_outcome comm_core::revoke_verdict_on_board(const op_request& op, uint64_t seq) {
  // Counted before revoked() is read: either the engine's revoke began
  // after this and counts the op in this rank's revoke point, or this sees
  // the revoke and holds the completion until the point is agreed
  // (collectives/engine/engine_revoke.cpp has the rule).
  if (every_rank_contributes(op.kind))
    engine_->note_completed(seq);
  if (!engine_->revoked() || engine_->revoked_for_lost_member())
    return {}; // a lost member's revoke agrees on no point: what completed stands
  // The engine agrees within the liveness window; a second more covers the
  // watchdog's tick that ends it.
  auto misses = init_.cfg.heartbeat_misses;
  auto window = misses > 0 ? init_.cfg.heartbeat * misses : init_.cfg.timeout;
  auto give_up = clock::now() + window + std::chrono::seconds(1);
  for (;;) {
    auto verdict = engine_->verdict_for(seq);
    if (verdict == engine::revoke_verdict::completes)
      return {};
    if (verdict == engine::revoke_verdict::fails || engine_->closed() || clock::now() >= give_up)
      return {errc::revoked, "the communicator was " + engine_->why_revoked()
                               + " before every rank completed this op", "board exchange"};
    kick();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

} // namespace mccl::actors
