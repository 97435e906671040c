#include "collectives/algorithms/builtin.hpp"
#include "collectives/algorithms/chunking.hpp"
#include "reducers/reduce.hpp"

#include <cstring>
#include <vector>

namespace mccl::builtin {
namespace {

/// Ring allreduce, pipelined by chunk. The schedule (which block goes where
/// at each step) is the pure function sched::ring_allreduce_schedule. The one
/// rule this actor adds: once chunk k of step s has been reduced (or copied),
/// chunk k of step s+1 may go, because the block sent at step s+1 is the one
/// received at step s. Blocks reduced in place are never overwritten while a
/// send of them is pending: a block comes back (allgather) only after it went
/// round the ring, which needs our earlier send of it to have arrived.
class allreduce_ring final : public algorithm {
public:
  allreduce_ring(collective_io& io, const collective_args& a)
    : io_(io), a_(a), elem_(dtype_size(a.op.type)), chunk_elems_(chunk_elems_for(a)),
      steps_(sched::ring_allreduce_schedule(a.rank, a.world)) {
    for (const auto& s : steps_) {
      auto n = sched::chunk_count(block(s.recv_block).count, chunk_elems_);
      got_.emplace_back(n, false);
      total_ += n;
    }
  }

  void start() override {
    if (a_.op.count == 0 || steps_.empty()) {
      if (a_.op.send != a_.op.recv && a_.op.count > 0)
        std::memcpy(a_.op.recv, a_.op.send, a_.op.bytes());
      return io_.finish();
    }
    auto first = block(steps_[0].send_block);
    auto n = sched::chunk_count(first.count, chunk_elems_);
    for (std::size_t k = 0; k < n; ++k)
      send_chunk(0, k, static_cast<const uint8_t*>(a_.op.send));
  }

  void on_chunk(const incoming_chunk& c) override {
    if (c.step >= steps_.size())
      return io_.fail(errc::protocol_error, "chunk for step " + std::to_string(c.step)
                                              + " of a " + std::to_string(steps_.size())
                                              + "-step ring");
    const auto& s = steps_[c.step];
    auto blk = block(s.recv_block);
    auto want = c.chunk < got_[c.step].size()
                  ? sched::chunk_range(blk, chunk_elems_, c.chunk).count * elem_
                  : 0;
    auto bad = check_chunk(c, s.recv_from, static_cast<uint32_t>(steps_.size() - 1),
                           got_[c.step].size(), want);
    if (bad.empty() && got_[c.step][c.chunk])
      bad = "duplicate chunk " + std::to_string(c.chunk) + " of step " + std::to_string(c.step);
    if (!bad.empty())
      return io_.fail(errc::protocol_error, bad);
    got_[c.step][c.chunk] = true;

    auto r = sched::chunk_range(blk, chunk_elems_, c.chunk);
    auto off = r.begin * elem_;
    auto dst = static_cast<uint8_t*>(a_.op.recv) + off;
    if (s.reduce) {
      reduce3(a_.op.op, a_.op.type, dst, static_cast<const uint8_t*>(a_.op.send) + off, c.data,
              r.count);
      bool last_reduce = c.step + 1 == static_cast<uint32_t>(a_.world - 1);
      if (last_reduce && a_.op.op == redop::avg)
        finish_avg(a_.op.type, dst, r.count, a_.world);
    } else {
      std::memcpy(dst, c.data, c.len);
    }
    if (c.step + 1 < steps_.size())
      send_chunk(c.step + 1, c.chunk, static_cast<const uint8_t*>(a_.op.recv));
    if (++received_ == total_)
      io_.finish();
  }

  std::string where() const override {
    for (std::size_t s = 0; s < steps_.size(); ++s)
      for (std::size_t k = 0; k < got_[s].size(); ++k)
        if (!got_[s][k]) {
          bool rs = s + 1 < static_cast<std::size_t>(a_.world);
          return "ring step " + std::to_string(s + 1) + " of " + std::to_string(steps_.size())
                 + (rs ? " (reduce-scatter)" : " (allgather)") + ", chunk " + std::to_string(k)
                 + ", waiting on rank " + std::to_string(steps_[s].recv_from);
        }
    return "ring, all chunks received, waiting for sends to complete";
  }

private:
  sched::range block(int b) const { return sched::block_range(a_.op.count, a_.world, b); }

  void send_chunk(std::size_t step, std::size_t k, const uint8_t* base) {
    const auto& s = steps_[step];
    auto r = sched::chunk_range(block(s.send_block), chunk_elems_, k);
    io_.send(s.send_to, static_cast<uint32_t>(step), static_cast<uint32_t>(k),
             base + r.begin * elem_, r.count * elem_);
  }

  collective_io& io_;
  collective_args a_;
  std::size_t elem_;
  std::size_t chunk_elems_;
  std::vector<sched::ring_step> steps_;
  std::vector<std::vector<bool>> got_; // [step][chunk]
  std::size_t total_ = 0;
  std::size_t received_ = 0;
};

} // namespace

std::unique_ptr<algorithm> make_allreduce_ring(collective_io& io, const collective_args& a) {
  return std::make_unique<allreduce_ring>(io, a);
}

} // namespace mccl::builtin
