#include "collectives/builtin.hpp"
#include "collectives/chunking.hpp"
#include "reducers/reduce.hpp"

#include <cstring>
#include <vector>

namespace mccl::builtin {
namespace {

/// The latency path for small allreduces: one round. Every rank sends its
/// whole buffer to every other rank, then reduces all contributions in rank
/// order 0..n-1, so every rank computes bit-identical results. The input is
/// copied first, which lets the result overwrite the caller's buffer while
/// our own sends may still be in flight.
class allreduce_oneshot final : public algorithm {
public:
  allreduce_oneshot(collective_io& io, const collective_args& a)
    : io_(io), a_(a), contributions_(static_cast<std::size_t>(a.world)) {}

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
        io_.send(p, 0, 0, mine_.data(), bytes);
  }

  void on_chunk(const incoming_chunk& c) override {
    auto bad = c.peer < 0 || c.peer >= a_.world || c.peer == a_.rank
                 ? "chunk from unexpected rank " + std::to_string(c.peer)
                 : check_chunk(c, c.peer, 0, 1, a_.op.bytes());
    if (bad.empty() && contributions_[c.peer].data)
      bad = "duplicate contribution from rank " + std::to_string(c.peer);
    if (!bad.empty())
      return io_.fail(errc::protocol_error, bad);
    contributions_[c.peer] = c;
    if (++arrived_ < a_.world - 1)
      return;
    auto dst = a_.op.recv;
    auto first = a_.rank == 0 ? mine_.data() : contributions_[0].data;
    std::memcpy(dst, first, a_.op.bytes());
    for (int p = 1; p < a_.world; ++p) {
      auto src = p == a_.rank ? mine_.data() : contributions_[p].data;
      reduce(a_.op.op, a_.op.type, dst, src, a_.op.count);
    }
    if (a_.op.op == redop::avg)
      finish_avg(a_.op.type, dst, a_.op.count, a_.world);
    contributions_.clear();
    io_.finish();
  }

  std::string where() const override {
    std::string missing;
    for (int p = 0; p < a_.world && p < static_cast<int>(contributions_.size()); ++p)
      if (p != a_.rank && !contributions_[p].data)
        missing += (missing.empty() ? "" : ", ") + std::to_string(p);
    return "one-shot exchange, " + std::to_string(arrived_) + " of "
           + std::to_string(a_.world - 1) + " contributions in"
           + (missing.empty() ? std::string() : ", waiting on rank(s) " + missing);
  }

private:
  collective_io& io_;
  collective_args a_;
  std::vector<uint8_t> mine_;
  std::vector<incoming_chunk> contributions_;
  int arrived_ = 0;
};

} // namespace

std::unique_ptr<algorithm> make_allreduce_oneshot(collective_io& io, const collective_args& a) {
  return std::make_unique<allreduce_oneshot>(io, a);
}

} // namespace mccl::builtin
