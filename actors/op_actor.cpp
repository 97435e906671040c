#include "actors/op_actor.hpp"

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace mccl::actors {
namespace {

struct op_state {
  /// The op it hosts, set by each start message. While the actor waits in
  /// the pool it still names the last one, but no message reaches it then.
  op_session* op = nullptr;
};

op_handle::behavior_type op_behavior(op_handle::stateful_pointer<op_state> self) {
  return {
    [=](start_atom, op_binding b) {
      self->state.op = b.op;
      b.op->start_op();
    },
    [=](chunk_atom, transport::received_frame& f) {
      if (auto* op = self->state.op)
        op->deliver(f);
    },
    [=](sent_atom, int peer, uint32_t step, uint32_t chunk) {
      if (auto* op = self->state.op)
        op->frame_sent(peer, step, chunk);
    },
    [=](fail_atom, errc code, const std::string& why) {
      if (auto* op = self->state.op)
        op->fail(code, why);
    },
  };
}

} // namespace

/// The engine's side of one op actor while it hosts an op; gives the
/// actor back to the pool when the engine forgets the op.
class op_actors::runner final : public op_runner {
public:
  runner(op_actors& pool, op_handle actor, op_session& op) : pool_(pool), actor_(std::move(actor)), op_(op) {}
  ~runner() override { pool_.idle_.push_back(std::move(actor_)); }

  void start() override { pool_.send(actor_, start_atom::value, op_binding{&op_}); }
  void chunk(transport::received_frame& f) override { pool_.send(actor_, chunk_atom::value, std::move(f)); }
  void sent(int peer, uint32_t step, uint32_t chunk) override {
    pool_.send(actor_, sent_atom::value, peer, step, chunk);
  }
  void fail(errc code, const std::string& why) override { pool_.send(actor_, fail_atom::value, code, why); }

private:
  op_actors& pool_;
  op_handle actor_;
  op_session& op_;
};

op_actors::~op_actors() = default; // dropping the last handle ends an idle actor

std::unique_ptr<op_runner> op_actors::runner_for(op_session& op) {
  op_handle actor;
  if (idle_.empty()) {
    driving_unit::driver_scope driving{unit_};
    actor = unit_.spawn(op_behavior);
  } else {
    actor = std::move(idle_.back());
    idle_.pop_back();
  }
  return std::make_unique<runner>(*this, std::move(actor), op);
}

} // namespace mccl::actors
