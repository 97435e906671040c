#pragma once
/// One op in the engine (engine.hpp): its session (the algorithm and the
/// frame protocol around it, op_session.hpp) plus what the engine keeps
/// about it. Its frames go out through the engine's channels; its outcome
/// goes back to the engine, which ends it at the next safe point.

#include "collectives/engine/engine.hpp"
#include "collectives/observability/metrics_registry.hpp"
#include "collectives/engine/op_session.hpp"

namespace mccl {

class engine_op final : public op_session {
public:
  engine_op(engine& e, op_ptr request, std::size_t bytes, collective_args args, std::string algorithm,
            algorithm_factory factory, engine::clock::time_point now)
    : op_session(std::move(args), request->seq, e.opts_.comm_id, std::move(algorithm), std::move(factory)),
      request(std::move(request)), bytes(bytes), started(now),
      timeout(this->request->timeout.count() > 0 ? this->request->timeout : e.opts_.cfg.timeout),
      deadline(now + timeout), e_(e) {
  }

  /// Made when the algorithm first asks (in start()): small ops never do.
  landing_spots* landing() override {
    if (!landing_ && !is_p2p())
      landing_ = std::make_shared<landing_map>(args().op.signature(args().world));
    return landing_.get();
  }

  bool is_p2p() const noexcept {
    return request->kind == op_kind::send || request->kind == op_kind::recv;
  }
  /// Where its chunks may land in place; null when it offered none.
  landing_map* spots() noexcept { return landing_.get(); }

  const op_ptr request;
  const std::size_t bytes; ///< request->selection_bytes(world), computed once
  const engine::clock::time_point started;
  /// The op's own deadline (op_request::timeout, else MCCL_TIMEOUT_MS):
  /// set_timeout may change it between ops of one communicator.
  const std::chrono::milliseconds timeout;
  const engine::clock::time_point deadline;
  uint64_t ticket = 0; ///< in the flight recorder
  /// Carries the engine's events to the op's handlers (set before it starts).
  std::unique_ptr<op_runner> runner;
  errc code = errc::none;
  std::string message; ///< the outcome, once reported()

private:
  void emit(int peer, const wire::frame_header& h, const uint8_t* data, std::size_t len) override {
    if (e_.opts_.trace)
      e_.opts_.trace->chunk(true, peer, h.seq, h.step, h.chunk, len, e_.opts_.now());
    e_.send_frame(*this, peer, h, data, len);
  }
  void report(errc c, std::string m) override {
    code = c;
    message = std::move(m);
    e_.reported(*this);
  }
  void dropped_duplicate(int peer, const wire::frame_header& h) override {
    metrics_registry::count_duplicate_chunk();
    if (e_.opts_.faults)
      e_.opts_.faults->reaction("duplicate_dropped", peer, transport::key_of(h),
                                describe_op() + " already had this chunk: the copy was dropped");
  }

  engine& e_;
};

} // namespace mccl
