#include "collectives/algorithms/builtin.hpp"
#include "collectives/algorithms/chunking.hpp"
#include "reducers/reduce.hpp"

#include <vector>

namespace mccl::builtin {
namespace {

/// Two ranks send each other their whole buffer, chunk by chunk, and reduce
/// each arriving chunk at once. In place, a chunk is reduced only after our
/// own copy of it has left (on_sent), or the peer would receive a partial sum.
/// Both ranks compute a (op) b with the same operands, and every reduction
/// mccl offers is commutative, so the results are bit-identical.
class allreduce_direct final : public algorithm {
public:
  allreduce_direct(collective_io& io, const collective_args& a)
    : io_(io), a_(a), peer_(1 - a.rank), elem_(dtype_size(a.op.type)),
      chunk_elems_(pipelined_chunk_elems(a, a.op.count)),
      chunks_(sched::chunk_count(a.op.count, chunk_elems_)),
      sent_(chunks_, false), pending_(chunks_) {}

  void start() override {
    if (chunks_ == 0)
      return io_.finish();
    auto src = static_cast<const uint8_t*>(a_.op.send);
    for (std::size_t k = 0; k < chunks_; ++k) {
      auto r = range_of(k);
      io_.send(peer_, 0, static_cast<uint32_t>(k), src + r.begin * elem_, r.count * elem_);
    }
  }

  void on_sent(int, uint32_t, uint32_t chunk) override {
    sent_[chunk] = true;
    if (pending_[chunk].data)
      reduce_chunk(pending_[chunk]);
  }

  void on_chunk(const incoming_chunk& c) override {
    auto want = c.chunk < chunks_ ? range_of(c.chunk).count * elem_ : 0;
    auto bad = check_chunk(c, peer_, 0, chunks_, want);
    if (bad.empty() && (done_[c.chunk] || pending_[c.chunk].data))
      bad = "duplicate chunk " + std::to_string(c.chunk);
    if (!bad.empty())
      return io_.fail(errc::protocol_error, bad);
    if (a_.op.send == a_.op.recv && !sent_[c.chunk])
      pending_[c.chunk] = c;
    else
      reduce_chunk(c);
  }

  std::string where() const override {
    return "direct exchange, " + std::to_string(reduced_) + " of " + std::to_string(chunks_)
           + " chunks reduced, waiting on rank " + std::to_string(peer_);
  }

private:
  sched::range range_of(std::size_t k) const {
    return sched::chunk_range({0, a_.op.count}, chunk_elems_, k);
  }

  void reduce_chunk(const incoming_chunk& c) {
    auto r = range_of(c.chunk);
    auto off = r.begin * elem_;
    auto dst = static_cast<uint8_t*>(a_.op.recv) + off;
    auto src = static_cast<const uint8_t*>(a_.op.send) + off;
    reduce3(a_.op.op, a_.op.type, dst, src, c.data, r.count);
    if (a_.op.op == redop::avg)
      finish_avg(a_.op.type, dst, r.count, 2);
    pending_[c.chunk] = {};
    done_[c.chunk] = true;
    if (++reduced_ == chunks_)
      io_.finish();
  }

  collective_io& io_;
  collective_args a_;
  int peer_;
  std::size_t elem_;
  std::size_t chunk_elems_;
  std::size_t chunks_;
  std::vector<bool> sent_;
  std::vector<incoming_chunk> pending_;
  std::vector<bool> done_ = std::vector<bool>(chunks_, false);
  std::size_t reduced_ = 0;
};

} // namespace

std::unique_ptr<algorithm> make_allreduce_direct(collective_io& io, const collective_args& a) {
  return std::make_unique<allreduce_direct>(io, a);
}

} // namespace mccl::builtin
