#include "collectives/builtin.hpp"
#include "collectives/chunking.hpp"
#include "reducers/reduce.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

namespace mccl::builtin {
namespace {

/// Radices whose product is `world`, largest first: fours while they
/// divide it, then what is left factored into primes (16 -> 4 4, 8 -> 4 2,
/// 12 -> 4 3, 10 -> 5 2, 7 -> 7).
std::vector<int> radices_of(int world) {
  std::vector<int> radices;
  int left = world;
  while (left % 4 == 0) {
    radices.push_back(4);
    left /= 4;
  }
  for (int f = 2; left > 1; ++f)
    while (left % f == 0) {
      radices.push_back(f);
      left /= f;
    }
  std::sort(radices.begin(), radices.end(), std::greater<int>());
  return radices;
}

/// The latency path for small allreduces on many ranks: the one-shot
/// exchange within groups, in rounds. Round j groups the ranks that differ
/// only in digit j of their rank written in the mixed radix radices_of(world);
/// every member sends its partial sum to the other members of its group,
/// then all of them add the group's partial sums in digit order, so they
/// compute the same bits. After the last round every rank holds the same
/// total. 16 ranks: 2 rounds of 3 peers where recursive doubling takes 4
/// rounds of 1, and the one-shot exchange 1 round of 15.
///
/// Each round's partial sum lives in its own buffer until the op ends, so a
/// send never waits for the next round's result to be computed elsewhere;
/// chunks of a later round that arrive early are held until it starts.
class allreduce_knomial final : public algorithm {
public:
  allreduce_knomial(collective_io& io, const collective_args& a)
    : io_(io), a_(a), elem_(dtype_size(a.op.type)), chunk_elems_(chunk_elems_for(a)),
      chunks_(sched::chunk_count(a.op.count, chunk_elems_)), radices_(radices_of(a.world)),
      received_(radices_.size()), arrived_(radices_.size()) {}

  void start() override {
    auto bytes = a_.op.bytes();
    if (bytes == 0 || a_.world == 1) {
      if (a_.op.send != a_.op.recv && bytes > 0)
        std::memcpy(a_.op.recv, a_.op.send, bytes);
      return io_.finish();
    }
    partial_.resize(radices_.size());
    partial_[0].assign(static_cast<const uint8_t*>(a_.op.send),
                       static_cast<const uint8_t*>(a_.op.send) + bytes);
    for (std::size_t j = 0; j < radices_.size(); ++j)
      received_[j].assign(static_cast<std::size_t>(radices_[j]), std::vector<incoming_chunk>(chunks_));
    start_round(0);
  }

  void on_chunk(const incoming_chunk& c) override {
    auto bad = check(c);
    if (!bad.empty())
      return io_.fail(errc::protocol_error, bad);
    auto j = static_cast<std::size_t>(c.step);
    received_[j][static_cast<std::size_t>(digit(c.peer, j))][c.chunk] = c;
    ++arrived_[j];
    // Later rounds complete only after this one; an early one waits.
    while (round_ < radices_.size() && arrived_[round_] == expected(round_))
      if (!finish_round())
        return;
  }

  std::string where() const override {
    if (round_ >= radices_.size())
      return "k-nomial exchange, done";
    std::string missing;
    for (int d = 0; d < radices_[round_]; ++d) {
      int peer = member(round_, d);
      if (peer == a_.rank)
        continue;
      for (const auto& c : received_[round_][static_cast<std::size_t>(d)])
        if (!c.data) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(peer);
          break;
        }
    }
    return "k-nomial exchange, round " + std::to_string(round_ + 1) + " of "
           + std::to_string(radices_.size()) + " (radix " + std::to_string(radices_[round_]) + ")"
           + (missing.empty() ? std::string() : ", waiting on rank(s) " + missing);
  }

private:
  /// The stride of digit j: the product of the radices before it.
  int stride(std::size_t j) const {
    int s = 1;
    for (std::size_t i = 0; i < j; ++i)
      s *= radices_[i];
    return s;
  }
  int digit(int rank, std::size_t j) const { return rank / stride(j) % radices_[j]; }
  /// The member of this rank's round-j group whose digit j is d.
  int member(std::size_t j, int d) const { return a_.rank + (d - digit(a_.rank, j)) * stride(j); }
  std::size_t expected(std::size_t j) const {
    return static_cast<std::size_t>(radices_[j] - 1) * chunks_;
  }

  std::string check(const incoming_chunk& c) const {
    if (c.step >= radices_.size())
      return "chunk for round " + std::to_string(c.step) + " of a " + std::to_string(radices_.size())
             + "-round exchange";
    auto j = static_cast<std::size_t>(c.step);
    if (j < round_)
      return "chunk " + std::to_string(c.chunk) + " from rank " + std::to_string(c.peer) + " for round "
             + std::to_string(j) + ", which already has every chunk";
    bool in_group = c.peer >= 0 && c.peer < a_.world && c.peer != a_.rank
                    && c.peer == member(j, digit(c.peer, j));
    if (!in_group)
      return "chunk from rank " + std::to_string(c.peer) + ", not in this rank's group of round "
             + std::to_string(j);
    auto want = c.chunk < chunks_ ? range_of(c.chunk).count * elem_ : 0;
    auto bad = check_chunk(c, c.peer, c.step, chunks_, want);
    if (bad.empty() && received_[j][static_cast<std::size_t>(digit(c.peer, j))][c.chunk].data)
      bad = "duplicate chunk " + std::to_string(c.chunk) + " of round " + std::to_string(j) + " from rank "
            + std::to_string(c.peer);
    return bad;
  }

  void start_round(std::size_t j) {
    round_ = j;
    for (int d = 0; d < radices_[j]; ++d) {
      int peer = member(j, d);
      if (peer == a_.rank)
        continue;
      for (std::size_t k = 0; k < chunks_; ++k) {
        auto r = range_of(k);
        io_.send(peer, static_cast<uint32_t>(j), static_cast<uint32_t>(k), partial_[j].data() + r.begin * elem_,
                 r.count * elem_);
      }
    }
  }

  /// Adds the group's partial sums of this round in digit order into the
  /// next round's buffer (the output after the last); false once finished.
  bool finish_round() {
    auto j = round_;
    bool last = j + 1 == radices_.size();
    uint8_t* dst;
    if (last) {
      dst = static_cast<uint8_t*>(a_.op.recv);
    } else {
      partial_[j + 1].resize(a_.op.bytes());
      dst = partial_[j + 1].data();
    }
    int mine = digit(a_.rank, j);
    for (std::size_t k = 0; k < chunks_; ++k) {
      auto r = range_of(k);
      auto part = [&](int d) {
        return d == mine ? partial_[j].data() + r.begin * elem_
                         : received_[j][static_cast<std::size_t>(d)][k].data;
      };
      auto out = dst + r.begin * elem_;
      std::memcpy(out, part(0), r.count * elem_);
      for (int d = 1; d < radices_[j]; ++d)
        reduce(a_.op.op, a_.op.type, out, part(d), r.count);
    }
    received_[j].clear(); // the frames' memory goes back
    if (!last) {
      start_round(j + 1);
      return true;
    }
    round_ = radices_.size();
    if (a_.op.op == redop::avg)
      finish_avg(a_.op.type, a_.op.recv, a_.op.count, a_.world);
    io_.finish();
    return false;
  }

  sched::range range_of(std::size_t k) const {
    return sched::chunk_range({0, a_.op.count}, chunk_elems_, k);
  }

  collective_io& io_;
  collective_args a_;
  std::size_t elem_;
  std::size_t chunk_elems_;
  std::size_t chunks_;
  std::vector<int> radices_;
  std::vector<std::vector<uint8_t>> partial_; ///< [round]: what this rank sends in it
  std::vector<std::vector<std::vector<incoming_chunk>>> received_; ///< [round][digit][chunk]
  std::vector<std::size_t> arrived_;                               ///< [round]: chunks in
  std::size_t round_ = 0;
};

} // namespace

std::unique_ptr<algorithm> make_allreduce_knomial(collective_io& io, const collective_args& a) {
  return std::make_unique<allreduce_knomial>(io, a);
}

} // namespace mccl::builtin
