#pragma once
/// A custom collective: "maxloc" — for every element, the largest value
/// over all ranks and the rank that held it (ties go to the lower rank),
/// the MPI_MAXLOC reduction that the built-in redops cannot express.
///
///   mccl_examples::register_maxloc();                 // once per process
///   std::vector<float> grads = ...;                   // count values
///   std::vector<mccl_examples::value_and_rank> out(grads.size());
///   comm.custom("maxloc", grads.data(), out.data(), grads.size(),
///               mccl::dtype::float32).wait();
///
/// How it is built: a step collective (mccl/step_collective.hpp) that walks
/// the recursive-doubling step program mccl's own "rd" allreduce uses
/// (mccl::sched::rd_allreduce) with its own reduction. It sends one
/// message per partner and step and combines what arrives part by part as
/// it comes; mccl cuts messages into frames, holds a partner's message
/// until this rank reaches its step, and frees what was sent once it has
/// left.

#include <mccl/mccl.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace mccl_examples {

/// One result element. Sent over the wire as raw bytes (both ends are the
/// same program on the same architecture).
struct value_and_rank {
  float value;
  int32_t rank;
};

class maxloc_collective final : public mccl::step_collective {
public:
  void start(mccl::step_io& io) override {
    const auto& op = io.args().op;
    if (op.type != mccl::dtype::float32)
      return io.fail(mccl::errc::invalid_argument,
                     std::string("maxloc takes float32 values, got ") + mccl::to_string(op.type));
    auto in = static_cast<const float*>(op.send);
    acc_.resize(op.count);
    std::transform(in, in + op.count, acc_.begin(), [&](float v) { return value_and_rank{v, io.rank()}; });
    // Ask for every partner's message now, in parts: mccl hands them over
    // step by step, each part as it arrives, so combining overlaps the
    // transfer.
    program_ = mccl::sched::rd_allreduce(io.rank(), io.world());
    for (std::size_t s = 0; s < program_.steps.size(); ++s)
      for (const auto& x : program_.steps[s].xfers)
        if (x.kind != mccl::sched::xfer_kind::send)
          io.receive_parts(x.peer, static_cast<uint32_t>(s), acc_.size() * sizeof(value_and_rank));
    run_steps(io, 0);
  }

  void on_message(mccl::step_io& io, const mccl::step_message& m) override {
    auto theirs = m.as<value_and_rank>();
    auto mine = acc_.data() + m.offset / sizeof(value_and_rank);
    for (std::size_t i = 0; i < m.count<value_and_rank>(); ++i)
      mine[i] = replace_ ? theirs[i] : better(mine[i], theirs[i]);
    if (m.last && --awaiting_ == 0)
      run_steps(io, step_ + 1);
  }

private:
  static value_and_rank better(value_and_rank a, value_and_rank b) {
    if (std::isnan(a.value) != std::isnan(b.value))
      return std::isnan(a.value) ? a : b; // NaN wins, as with max
    if (a.value != b.value)
      return a.value > b.value ? a : b;
    return a.rank <= b.rank ? a : b;
  }

  /// From step `first` on: sends the step's messages (a copy of the
  /// accumulator, which changes while they travel) and counts those it
  /// waits for (recursive doubling receives at most one per step); steps
  /// without receives run on at once.
  void run_steps(mccl::step_io& io, std::size_t first) {
    for (step_ = first; step_ < program_.steps.size(); ++step_) {
      awaiting_ = 0;
      for (const auto& x : program_.steps[step_].xfers) {
        if (x.kind == mccl::sched::xfer_kind::send) {
          io.send(x.peer, static_cast<uint32_t>(step_), acc_);
        } else {
          ++awaiting_;
          replace_ = x.kind == mccl::sched::xfer_kind::recv_copy; // the fold's result
        }
      }
      if (awaiting_ > 0)
        return;
    }
    std::memcpy(io.args().op.recv, acc_.data(), acc_.size() * sizeof(value_and_rank));
    io.finish();
  }

  mccl::sched::program program_;
  std::vector<value_and_rank> acc_;
  std::size_t step_ = 0;
  std::size_t awaiting_ = 0;
  bool replace_ = false; ///< the awaited message replaces the values instead of competing
};

inline void register_maxloc() {
  mccl::register_step_collective("maxloc", [](const mccl::collective_args&) {
    return std::make_unique<maxloc_collective>();
  });
}

} // namespace mccl_examples
