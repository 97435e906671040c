#include "collectives/engine/op_runner.hpp"

namespace mccl {
namespace {

class direct_runner final : public op_runner {
public:
  explicit direct_runner(op_session& op) : op_(op) {}
  void start(std::vector<transport::received_frame> early) override { op_.start_op(early); }
  void chunk(transport::received_frame& f) override { op_.deliver(f); }
  void sent(int peer, uint32_t step, uint32_t chunk) override { op_.frame_sent(peer, step, chunk); }
  void fail(errc code, const std::string& why) override { op_.fail(code, why); }

private:
  op_session& op_;
};

} // namespace

std::unique_ptr<op_runner> direct_runners::runner_for(op_session& op) {
  return std::make_unique<direct_runner>(op);
}

} // namespace mccl
