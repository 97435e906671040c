/// Sparsified allreduce (compression topk): every rank sends only the k
/// elements of largest magnitude, as (index, value) pairs, and every rank
/// adds all ranks' pairs into a zeroed output, in rank order, so all end
/// with the same bits. With error feedback, what a rank did not send is
/// kept (op_request::residual) and added to its next contribution from
/// the same buffer: nothing is lost, only delayed.
///
/// The pairs travel by an allgather step program over a scratch buffer of
/// world blocks of k pairs; this algorithm runs it with its own
/// collective_io in between, which turns the allgather's end into the
/// accumulation.

#include "collectives/algorithms/builtin.hpp"
#include "collectives/algorithms/scratch.hpp"
#include "reducers/reduce.hpp"
#include "reducers/topk.hpp"

#include <algorithm>
#include <cstring>

namespace mccl::builtin {
namespace {

class allreduce_topk final : public algorithm, private collective_io {
public:
  allreduce_topk(collective_io& io, const collective_args& a)
    : io_(io), a_(a), n_(a.op.count), k_(topk_count(n_, a.op.topk_ratio)),
      block_bytes_(k_ * pair_bytes), scratch_(block_bytes_ * static_cast<std::size_t>(a.world)) {
    collective_args inner = a;
    inner.op.kind = op_kind::allgather;
    inner.op.type = dtype::uint8;
    inner.op.op = redop::sum;
    inner.op.count = block_bytes_;
    inner.op.send = scratch_.data() + block_bytes_ * static_cast<std::size_t>(a.rank);
    inner.op.recv = scratch_.data();
    inner.op.compression = compression_kind::none;
    inner.op.residual = nullptr;
    inner_ = gather_pairs(*this, inner);
  }

  void start() override {
    if (a_.op.compression != compression_kind::topk || a_.op.type != dtype::float32)
      return io_.fail(errc::invalid_argument,
                      "the topk algorithm carries float32 allreduces with topk compression only "
                      "(MCCL_COMPRESSION=topk or op_options::compression)");
    select();
    inner_->start();
  }

  // The first frame that left or arrived means the pairs are on the wire:
  // the output is cleared while they travel instead of after.
  void on_chunk(const incoming_chunk& c) override {
    clear_output_once();
    inner_->on_chunk(c);
  }
  void on_sent(int peer, uint32_t step, uint32_t chunk) override {
    clear_output_once();
    inner_->on_sent(peer, step, chunk);
  }
  bool receives() const override { return inner_->receives(); }
  bool next_senders(std::vector<int>& peers) const override { return inner_ && inner_->next_senders(peers); }
  std::string where() const override {
    return "top-" + std::to_string(k_) + " of " + std::to_string(n_) + ": " + inner_->where();
  }

private:
  /// A uint32 index and a float32 value.
  static constexpr std::size_t pair_bytes = 8;

  static std::unique_ptr<algorithm> gather_pairs(collective_io& io, const collective_args& a) {
    bool several_hosts = a.host_of && !a.host_of->empty()
                         && std::any_of(a.host_of->begin(), a.host_of->end(),
                                        [&](int h) { return h != a.host_of->front(); });
    if (several_hosts)
      return make_allgather_hier(io, a);
    bool power_of_two = (a.world & (a.world - 1)) == 0;
    return power_of_two ? make_allgather_rd(io, a) : make_allgather_ring(io, a);
  }

  /// This rank's k pairs into its block of the scratch buffer; with error
  /// feedback the residual becomes what is left unsent.
  void select() {
    const auto* input = static_cast<const float*>(a_.op.send);
    auto* block = scratch_.data() + block_bytes_ * static_cast<std::size_t>(a_.rank);
    auto* index = reinterpret_cast<uint32_t*>(block);
    auto* values = reinterpret_cast<float*>(block + k_ * sizeof(uint32_t));
    if (auto* residual = a_.op.residual.get()) {
      if (residual->size() != n_)
        residual->assign(n_, 0.0f); // first use of this key, or a new count
      topk_select_after_adding(residual->data(), input, n_, k_, index, values);
    } else {
      topk_select(input, n_, k_, index, values);
    }
    selected_ = true;
  }

  /// Zeroes the output, which the pairs are then added into; only once
  /// select() has copied this rank's pairs out (an in-place op's input is
  /// the output).
  void clear_output_once() {
    if (output_cleared_ || !selected_)
      return;
    auto* out = static_cast<float*>(a_.op.recv);
    std::fill(out, out + n_, 0.0f);
    output_cleared_ = true;
  }

  // ---- collective_io of the inner allgather ---------------------------------

  void send(int peer, uint32_t step, uint32_t chunk, const void* data, std::size_t bytes) override {
    io_.send(peer, step, chunk, data, bytes);
  }
  void send_block(int peer, uint32_t step, uint32_t chunk, const void* data, std::size_t bytes,
                  uint64_t block_bytes) override {
    io_.send_block(peer, step, chunk, data, bytes, block_bytes);
  }
  landing_spots* landing() override { return io_.landing(); }
  void fail(errc code, const std::string& why) override { io_.fail(code, why); }

  /// Every rank's pairs are here: add them up, rank by rank.
  void finish() override {
    clear_output_once();
    auto* out = static_cast<float*>(a_.op.recv);
    for (int r = 0; r < a_.world; ++r) {
      const auto* block = scratch_.data() + block_bytes_ * static_cast<std::size_t>(r);
      const auto* values = reinterpret_cast<const float*>(block + k_ * sizeof(uint32_t));
      for (std::size_t j = 0; j < k_; ++j) {
        uint32_t i;
        std::memcpy(&i, block + j * sizeof(uint32_t), sizeof i);
        if (i >= n_)
          return io_.fail(errc::protocol_error, "rank " + std::to_string(r) + " sent index "
                                                  + std::to_string(i) + " of a vector of "
                                                  + std::to_string(n_));
        out[i] += values[j];
      }
    }
    if (a_.op.op == redop::avg)
      finish_avg(dtype::float32, out, n_, a_.world);
    io_.finish();
  }

  collective_io& io_;
  collective_args a_;
  std::size_t n_;
  std::size_t k_;
  std::size_t block_bytes_;
  scratch_buffer scratch_;
  std::unique_ptr<algorithm> inner_;
  bool selected_ = false; ///< this rank's pairs are in the scratch block
  bool output_cleared_ = false;
};

} // namespace

std::unique_ptr<algorithm> make_allreduce_topk(collective_io& io, const collective_args& a) {
  return std::make_unique<allreduce_topk>(io, a);
}

} // namespace mccl::builtin
