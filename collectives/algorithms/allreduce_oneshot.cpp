#include "collectives/algorithms/builtin.hpp"
#include "collectives/algorithms/chunking.hpp"
#include "reducers/reduce.hpp"

#include <cstring>
#include <vector>

namespace mccl::builtin {
namespace {

/// The latency path for small allreduces: one round. Every rank sends its
/// whole buffer to every other rank (in MCCL_CHUNK_BYTES frames, so a forced
/// oneshot works at any size), then reduces all contributions in rank order
/// 0..n-1, so every rank computes bit-identical results. The input is copied
/// first, which lets the result overwrite the caller's buffer while our own
/// sends may still be in flight.
class allreduce_oneshot final : public algorithm {
public:
  allreduce_oneshot(collective_io& io, const collective_args& a)
    : io_(io), a_(a), elem_(dtype_size(a.op.type)), chunk_elems_(chunk_elems_for(a)),
      chunks_(sched::chunk_count(a.op.count, chunk_elems_)),
      contributions_(static_cast<std::size_t>(a.world)) {}

  void start() override {
    auto bytes = a_.op.bytes();
    if (bytes == 0 || a_.world == 1) {
      if (a_.op.send != a_.op.recv && bytes > 0)
        std::memcpy(a_.op.recv, a_.op.send, bytes);
      return io_.finish();
    }
    mine_.assign(static_cast<const uint8_t*>(a_.op.send),
                 static_cast<const uint8_t*>(a_.op.send) + bytes);
    for (int p = 0; p < a_.world; ++p)
      if (p != a_.rank)
        for (std::size_t k = 0; k < chunks_; ++k) {
          auto r = range_of(k);
          io_.send(p, 0, static_cast<uint32_t>(k), mine_.data() + r.begin * elem_, r.count * elem_);
        }
  }

  void on_chunk(const incoming_chunk& c) override {
    bool known = c.peer >= 0 && c.peer < a_.world && c.peer != a_.rank;
    auto want = c.chunk < chunks_ ? range_of(c.chunk).count * elem_ : 0;
    auto bad = known ? check_chunk(c, c.peer, 0, chunks_, want)
                     : "chunk from unexpected rank " + std::to_string(c.peer);
    auto& from = contributions_[known ? c.peer : 0];
    if (bad.empty() && from.size() > c.chunk && from[c.chunk].data)
      bad = "duplicate chunk " + std::to_string(c.chunk) + " from rank " + std::to_string(c.peer);
    if (!bad.empty())
      return io_.fail(errc::protocol_error, bad);
    from.resize(chunks_);
    from[c.chunk] = c;
    if (++arrived_ < (a_.world - 1) * chunks_)
      return;
    // Every contribution is in: reduce chunk by chunk, in rank order.
    auto dst = static_cast<uint8_t*>(a_.op.recv);
    for (std::size_t k = 0; k < chunks_; ++k) {
      auto r = range_of(k);
      auto out = dst + r.begin * elem_;
      auto part = [&](int p) {
        return p == a_.rank ? mine_.data() + r.begin * elem_ : contributions_[p][k].data;
      };
      std::memcpy(out, part(0), r.count * elem_);
      for (int p = 1; p < a_.world; ++p)
        reduce(a_.op.op, a_.op.type, out, part(p), r.count);
    }
    if (a_.op.op == redop::avg)
      finish_avg(a_.op.type, dst, a_.op.count, a_.world);
    contributions_.clear();
    io_.finish();
  }

  std::string where() const override {
    std::string missing;
    for (int p = 0; p < a_.world && p < static_cast<int>(contributions_.size()); ++p)
      if (p != a_.rank && contributions_[p].size() < chunks_)
        missing += (missing.empty() ? "" : ", ") + std::to_string(p);
    return "one-shot exchange, " + std::to_string(arrived_) + " of "
           + std::to_string((a_.world - 1) * chunks_) + " chunks in"
           + (missing.empty() ? std::string() : ", waiting on rank(s) " + missing);
  }

private:
  sched::range range_of(std::size_t k) const {
    return sched::chunk_range({0, a_.op.count}, chunk_elems_, k);
  }

  collective_io& io_;
  collective_args a_;
  std::size_t elem_;
  std::size_t chunk_elems_;
  std::size_t chunks_;
  std::vector<uint8_t> mine_;
  std::vector<std::vector<incoming_chunk>> contributions_; ///< [rank][chunk]
  std::size_t arrived_ = 0;
};

} // namespace

std::unique_ptr<algorithm> make_allreduce_oneshot(collective_io& io, const collective_args& a) {
  return std::make_unique<allreduce_oneshot>(io, a);
}

} // namespace mccl::builtin
