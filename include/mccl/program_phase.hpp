#pragma once
/// One of mccl's step programs (program.hpp: rd_allreduce, ring_allgather,
/// ...) run inside a step collective (step_collective.hpp), over a buffer
/// of yours, with a combine of yours. A collective made of several
/// collectives runs one phase after another in one op:
///
///   grads_ = mccl::program_phase::of<float>(
///     mccl::sched::rabenseifner_allreduce(io.rank(), io.world()), out, count,
///     [](float& acc, const float& theirs) { acc += theirs; });
///   if (grads_.start(io)) ... // done at once (a world of one)
///   // on_message: if (grads_.owns(m) && grads_.on_message(io, m)) start the next
///   //             phase at step grads_.end_step()
///
/// The program's blocks are a balanced split of the buffer's elements
/// (sched::block_range). Each step sends one message per peer (the blocks
/// the program sends it, in order, copied when the step starts, so the
/// buffer may change while they travel) and applies what arrives, part by
/// part as it comes for elements of 1 to 64 bytes (a power of two), whole
/// otherwise: copied over the blocks, or combined into them. Steps run one
/// after another, each once the previous one's messages are in.

#include <mccl/program.hpp>
#include <mccl/step_collective.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace mccl {

class program_phase {
public:
  /// Combines `count` elements that arrived (`theirs`) into `acc`.
  using combine_fn = std::function<void(void* acc, const void* theirs, std::size_t count)>;

  program_phase() = default;

  /// Runs `prog` over `count` elements of `elem_bytes` at `work`; its step
  /// s travels as step first_step + s.
  program_phase(sched::program prog, void* work, std::size_t count, std::size_t elem_bytes,
                combine_fn combine, uint32_t first_step = 0);

  /// The same with typed elements and an element-wise combine
  /// `void(T& acc, const T& theirs)`.
  template <class T, class F>
  static program_phase of(sched::program prog, T* work, std::size_t count, F combine,
                          uint32_t first_step = 0) {
    return program_phase(std::move(prog), work, count, sizeof(T),
                         [combine](void* acc, const void* theirs, std::size_t n) {
                           auto* a = static_cast<T*>(acc);
                           auto* b = static_cast<const T*>(theirs);
                           for (std::size_t i = 0; i < n; ++i)
                             combine(a[i], b[i]);
                         },
                         first_step);
  }

  /// Asks for every message of the phase and runs its first steps. True
  /// when the phase is already complete (no steps with receives left).
  bool start(step_io& io);

  /// True when `m` is a message of this phase.
  bool owns(const step_message& m) const noexcept {
    return m.step >= first_step_ && m.step < end_step();
  }

  /// Applies one of its messages; true when that completed the phase.
  bool on_message(step_io& io, const step_message& m);

  bool done() const noexcept { return step_ >= prog_.steps.size(); }

  /// The first step number after this phase: where the next one starts.
  uint32_t end_step() const noexcept {
    return first_step_ + static_cast<uint32_t>(prog_.steps.size());
  }

  /// "step 2 of 3".
  std::string where() const;

private:
  struct range_bytes {
    std::size_t offset = 0;
    std::size_t bytes = 0;
  };
  /// The bytes of transfer `x`'s blocks in the buffer.
  range_bytes bytes_of(const sched::xfer& x) const;
  /// Sends the current step's messages and counts its receives; runs on
  /// through steps without receives. True once the program is done.
  bool run_steps(step_io& io);

  sched::program prog_;
  uint8_t* work_ = nullptr;
  std::size_t count_ = 0;
  std::size_t elem_bytes_ = 1;
  combine_fn combine_;
  uint32_t first_step_ = 0;
  std::size_t step_ = 0;
  std::size_t awaiting_ = 0;
};

} // namespace mccl
