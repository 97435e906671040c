#include "collectives/algorithms/builtin.hpp"
#include "collectives/algorithms/chunking.hpp"

#include <vector>

namespace mccl::builtin {
namespace {

/// Dissemination barrier: in round k each rank signals rank + 2^k and waits
/// for rank - 2^k. After ceil(log2 n) rounds every rank has heard, directly
/// or through others, from every rank, so none leaves before all arrived.
/// A signal for a later round may arrive early; it is remembered.
class barrier_dissemination final : public algorithm {
public:
  barrier_dissemination(collective_io& io, const collective_args& a)
    : io_(io), a_(a), rounds_(sched::dissemination_barrier(a.rank, a.world)),
      heard_(rounds_.size(), false) {}

  void start() override {
    if (rounds_.empty())
      return io_.finish();
    io_.send(rounds_[0].send_to, 0, 0, nullptr, 0);
  }

  void on_chunk(const incoming_chunk& c) override {
    if (c.step >= rounds_.size())
      return io_.fail(errc::protocol_error, "barrier signal for round " + std::to_string(c.step)
                                              + " of " + std::to_string(rounds_.size()));
    auto bad = check_chunk(c, rounds_[c.step].recv_from, static_cast<uint32_t>(rounds_.size() - 1), 1, 0);
    if (bad.empty() && heard_[c.step])
      bad = "duplicate barrier signal for round " + std::to_string(c.step);
    if (!bad.empty())
      return io_.fail(errc::protocol_error, bad);
    heard_[c.step] = true;
    // Advance through every round whose signal is in.
    while (round_ < rounds_.size() && heard_[round_]) {
      ++round_;
      if (round_ < rounds_.size())
        io_.send(rounds_[round_].send_to, static_cast<uint32_t>(round_), 0, nullptr, 0);
    }
    if (round_ == rounds_.size())
      io_.finish();
  }

  bool next_senders(std::vector<int>& peers) const override {
    if (round_ < rounds_.size())
      peers.push_back(rounds_[round_].recv_from);
    return true;
  }

  std::string where() const override {
    if (round_ >= rounds_.size())
      return "dissemination barrier, all rounds done";
    return "dissemination barrier round " + std::to_string(round_ + 1) + " of "
           + std::to_string(rounds_.size()) + ", waiting on rank "
           + std::to_string(rounds_[round_].recv_from);
  }

private:
  collective_io& io_;
  collective_args a_;
  std::vector<sched::barrier_round> rounds_;
  std::vector<bool> heard_;
  std::size_t round_ = 0;
};

} // namespace

std::unique_ptr<algorithm> make_barrier_dissemination(collective_io& io, const collective_args& a) {
  return std::make_unique<barrier_dissemination>(io, a);
}

} // namespace mccl::builtin
