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
/// How it is built: a state machine (mccl::algorithm) that walks the
/// recursive-doubling step program mccl's own "rd" allreduce uses
/// (mccl::sched::rd_allreduce), one step at a time, with its own reduction.
/// It talks only through mccl::collective_io: send, finish, fail.

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

class maxloc_collective final : public mccl::algorithm {
public:
  maxloc_collective(mccl::collective_io& io, const mccl::collective_args& args)
    : io_(io), args_(args), program_(mccl::sched::rd_allreduce(args.rank, args.world)) {}

  void start() override {
    if (args_.op.type != mccl::dtype::float32)
      return io_.fail(mccl::errc::invalid_argument,
                      std::string("maxloc takes float32 values, got ") + mccl::to_string(args_.op.type));
    auto in = static_cast<const float*>(args_.op.send);
    acc_.resize(args_.op.count);
    for (std::size_t i = 0; i < acc_.size(); ++i)
      acc_[i] = {in[i], args_.rank};
    run_step();
  }

  void on_chunk(const mccl::incoming_chunk& c) override {
    if (c.step > step_) { // a partner already in a later step: keep it
      early_.push_back(c);
      return;
    }
    auto first = c.chunk * piece_elems();
    if (c.step < step_ || first >= acc_.size()
        || c.len != std::min(piece_elems(), acc_.size() - first) * sizeof(value_and_rank))
      return io_.fail(mccl::errc::protocol_error,
                      "unexpected chunk " + std::to_string(c.chunk) + " of step " + std::to_string(c.step)
                        + " (" + std::to_string(c.len) + " bytes) from rank " + std::to_string(c.peer)
                        + " (same count on every rank?)");
    auto theirs = reinterpret_cast<const value_and_rank*>(c.data);
    bool copy = kind_from(c.peer) == mccl::sched::xfer_kind::recv_copy;
    for (std::size_t i = 0; i < c.len / sizeof(value_and_rank); ++i)
      acc_[first + i] = copy ? theirs[i] : better(acc_[first + i], theirs[i]);
    if (--awaiting_ == 0) {
      ++step_;
      run_step();
    }
  }

  std::string where() const override {
    return "maxloc step " + std::to_string(step_ + 1) + " of " + std::to_string(program_.steps.size());
  }

private:
  static value_and_rank better(value_and_rank a, value_and_rank b) {
    if (std::isnan(a.value) != std::isnan(b.value))
      return std::isnan(a.value) ? a : b; // NaN wins, as with max
    if (a.value != b.value)
      return a.value > b.value ? a : b;
    return a.rank <= b.rank ? a : b;
  }

  std::size_t bytes() const { return acc_.size() * sizeof(value_and_rank); }

  /// Elements per frame: frames stay within MCCL_CHUNK_BYTES.
  std::size_t piece_elems() const {
    return std::max<std::size_t>(1, args_.chunk_bytes / sizeof(value_and_rank));
  }
  std::size_t pieces() const {
    return acc_.empty() ? 1 : (acc_.size() + piece_elems() - 1) / piece_elems();
  }

  mccl::sched::xfer_kind kind_from(int peer) const {
    for (const auto& x : program_.steps[step_].xfers)
      if (x.peer == peer && x.kind != mccl::sched::xfer_kind::send)
        return x.kind;
    return mccl::sched::xfer_kind::recv_reduce;
  }

  /// Sends this step's transfers from a snapshot (the accumulator changes
  /// while they are in flight) and counts the receives it waits for.
  void run_step() {
    while (step_ < program_.steps.size()) {
      const auto& xs = program_.steps[step_].xfers;
      auto& snapshot = snapshots_.emplace_back(acc_);
      awaiting_ = 0;
      for (const auto& x : xs) {
        for (std::size_t k = 0; k < pieces(); ++k) {
          if (x.kind != mccl::sched::xfer_kind::send) {
            ++awaiting_;
            continue;
          }
          auto first = k * piece_elems();
          auto n = std::min(piece_elems(), acc_.size() - std::min(first, acc_.size()));
          io_.send(x.peer, static_cast<uint32_t>(step_), static_cast<uint32_t>(k),
                   snapshot.data() + first, n * sizeof(value_and_rank));
        }
      }
      if (awaiting_ > 0) {
        // Replay what partners sent for this step before we got here.
        auto early = std::move(early_);
        early_.clear();
        for (auto& c : early)
          on_chunk(c);
        return;
      }
      ++step_;
    }
    std::memcpy(args_.op.recv, acc_.data(), bytes());
    io_.finish();
  }

  mccl::collective_io& io_;
  mccl::collective_args args_;
  mccl::sched::program program_;
  std::vector<value_and_rank> acc_;
  /// One per step: sent memory must stay untouched until it has left.
  std::vector<std::vector<value_and_rank>> snapshots_;
  std::vector<mccl::incoming_chunk> early_;
  std::size_t step_ = 0;
  std::size_t awaiting_ = 0;
};

inline void register_maxloc() {
  mccl::register_collective("maxloc", [](mccl::collective_io& io, const mccl::collective_args& a) {
    return std::make_unique<maxloc_collective>(io, a);
  });
}

} // namespace mccl_examples
