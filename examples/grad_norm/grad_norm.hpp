#pragma once
/// A custom collective made of two: "grad_norm" sums float32 gradients
/// over all ranks (an allreduce) and then computes the L2 norm of the sum
/// (a second allreduce, of one number), in one op with one completion, as
/// a trainer that clips gradients by their global norm needs.
///
///   mccl_examples::register_grad_norm();              // once per process
///   std::vector<float> out(grads.size() + 1);         // the sum, then the norm
///   comm.custom("grad_norm", grads.data(), out.data(), grads.size(),
///               mccl::dtype::float32).wait();         // redop sum (or avg)
///
/// How it is built: a step collective (mccl/step_collective.hpp) that runs
/// two of mccl's step programs one after the other with
/// mccl::program_phase: the gradients' allreduce (recursive doubling when
/// small, Rabenseifner otherwise), then, with step numbers after the
/// first's, the recursive-doubling allreduce of one double, to which each
/// rank brings the squares of its own share of the summed gradients (so
/// every element is squared once in the whole world). Both phases' sends
/// and receives are whole messages; mccl chunks them, holds early ones and
/// keeps them alive until sent.

#include <mccl/mccl.hpp>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>

namespace mccl_examples {

class grad_norm_collective final : public mccl::step_collective {
public:
  void start(mccl::step_io& io) override {
    const auto& op = io.args().op;
    if (op.type != mccl::dtype::float32 || (op.op != mccl::redop::sum && op.op != mccl::redop::avg))
      return io.fail(mccl::errc::invalid_argument, "grad_norm takes float32 values summed or averaged");
    grads_ = static_cast<float*>(op.recv);
    if (op.send != op.recv)
      std::memcpy(grads_, op.send, op.count * sizeof(float));
    bool small = op.count * sizeof(float) <= 64 * 1024;
    auto program = small ? mccl::sched::rd_allreduce(io.rank(), io.world())
                         : mccl::sched::rabenseifner_allreduce(io.rank(), io.world());
    sum_ = mccl::program_phase::of<float>(std::move(program), grads_, op.count,
                                          [](float& acc, const float& theirs) { acc += theirs; });
    if (sum_.start(io))
      start_norm(io);
  }

  void on_message(mccl::step_io& io, const mccl::step_message& m) override {
    if (sum_.owns(m)) {
      if (sum_.on_message(io, m))
        start_norm(io);
    } else if (norm_.on_message(io, m)) {
      finish(io);
    }
  }

  std::string where() const override {
    return sum_.done() ? "grad_norm norm " + norm_.where() : "grad_norm sum " + sum_.where();
  }

private:
  /// The gradients are summed on every rank: average them if asked, then
  /// add up the squares of this rank's share and start the norm's phase.
  void start_norm(mccl::step_io& io) {
    const auto& op = io.args().op;
    if (op.op == mccl::redop::avg)
      for (std::size_t i = 0; i < op.count; ++i)
        grads_[i] /= static_cast<float>(io.world());
    auto share = mccl::sched::block_range(op.count, io.world(), io.rank());
    for (std::size_t i = share.begin; i < share.begin + share.count; ++i)
      squares_ += static_cast<double>(grads_[i]) * grads_[i];
    norm_ = mccl::program_phase::of<double>(mccl::sched::rd_allreduce(io.rank(), io.world()),
                                            &squares_, 1,
                                            [](double& acc, const double& theirs) { acc += theirs; },
                                            sum_.end_step());
    if (norm_.start(io))
      finish(io);
  }

  void finish(mccl::step_io& io) {
    grads_[io.args().op.count] = static_cast<float>(std::sqrt(squares_));
    io.finish();
  }

  float* grads_ = nullptr;
  double squares_ = 0;
  mccl::program_phase sum_, norm_;
};

inline void register_grad_norm() {
  mccl::register_step_collective("grad_norm", [](const mccl::collective_args&) {
    return std::make_unique<grad_norm_collective>();
  });
}

} // namespace mccl_examples
