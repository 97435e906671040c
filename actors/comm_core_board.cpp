// comm_core's board path: small collectives among ranks of one host, run on
// the calling thread over the host board (collectives/algorithms/board_collectives.hpp)
// instead of the engine.

#include "actors/comm_core.hpp"

#include "collectives/algorithms/board_collectives.hpp"
#include "collectives/engine/op.hpp"
#include "config/log.hpp"

#include <thread>

namespace mccl::actors {

// Every rank decides alike: the op and the settings only, never local
// state (a rank that took the engine for an op its peers put on the board
// would wait for them in vain). MCCL_ALGO naming an algorithm for the op
// keeps it in the engine, unless it names board_rs.
std::string comm_core::board_algorithm_for(const op_request& op) const {
  const auto& board = init_.board;
  if (!board)
    return {};
  auto kind = static_cast<std::size_t>(op.kind);
  std::string named;
  if (kind < algo_named_.size() && algo_named_[kind])
    named = algo_for(init_.cfg.algo, to_string(op.kind), op.selection_bytes(init_.world));
  return board_algorithm(op, init_.world, board->slot_bytes(), board->stage_bytes(), init_.cfg.inline_bytes,
                         named);
}

void comm_core::run_on_board(const op_ptr& op, const std::shared_ptr<work_state>& work, const std::string& algorithm) {
  bool staged = algorithm == "board_rs";
  std::lock_guard<std::mutex> board_guard{board_mutex_};
  board_call call;
  {
    std::lock_guard<std::mutex> guard{submit_mutex_};
    op->id = next_id_++;
    op->seq = next_seq_++; // one numbering for both paths
    call.seq = op->seq;
    call.n = next_board_op_;
    next_board_op_ += staged ? board_rs_ops(op->count, op->elem_size(), init_.board->stage_bytes()) : 1;
  }
  call.board = init_.board.get();
  call.rank = init_.rank;
  call.world = init_.world;
  call.spin = init_.cfg.spin;
  call.timeout = op->timeout;
  call.deadline = clock::now() + op->timeout;
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
  auto started = clock::now();
  auto ticket = flight_->started(recorded_op(*op, init_.world, algorithm, driver_kind::caller));
  {
    std::lock_guard<std::mutex> guard{board_status_mutex_};
    board_op_ = op; // described only when someone asks (status)
    board_op_algorithm_ = algorithm;
    board_op_started_ = started;
  }
  auto outcome = staged ? run_board_rs(*op, call) : mccl::run_on_board(*op, call);
  if (outcome.code == errc::none)
    outcome = revoke_verdict_on_board(*op, call.seq);
  {
    std::lock_guard<std::mutex> guard{board_status_mutex_};
    board_op_ = nullptr;
  }
  if (trace_)
    trace_->op(to_string(op->kind), true, call.seq, algorithm, op->selection_bytes(init_.world), 0,
               started, clock::now(), outcome.code == errc::none);
  flight_->ended(ticket, outcome.code == errc::none ? flight_recorder::state::done : flight_recorder::state::failed);
  op_report report;
  report.algorithm = algorithm;
  report.seq = call.seq;
  report.bytes = op->selection_bytes(init_.world);
  report.duration = clock::now() - started;
  if (outcome.code == errc::none || engine_->closed()) { // closed: the communicator's own reason
    report.code = outcome.code;
    report.message = outcome.message;
    work->complete(std::move(report));
    return;
  }
  // As an op over links says it: "allreduce seq 7 on rank 1 (board, count
  // 1, float32, sum) failed at board exchange, ..., waiting on rank 0: ..."
  auto what = describe(*op);
  auto paren = what.find('(');
  auto message = what.substr(0, paren) + " seq " + std::to_string(op->seq) + " on rank " + std::to_string(init_.rank)
                 + " (" + algorithm + ", " + what.substr(paren + 1) + " failed at " + outcome.where + ": " + outcome.message;
  if (outcome.code == errc::timeout)
    message += " (" + flight_->progress_note() + ")";
  if (outcome.code == errc::revoked) { // every rank fails it alike: nothing to abort
    report.code = outcome.code;
    report.message = message;
    work->complete(std::move(report));
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
  report.message = message;
  work->complete(std::move(report));
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
