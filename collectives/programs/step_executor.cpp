#include "collectives/programs/step_executor.hpp"

#include "collectives/programs/step_plan.hpp"
#include "reducers/reduce.hpp"

#include <algorithm>
#include <cstring>

namespace mccl {

namespace {

/// Disjoint, sorted element ranges [begin, end) of the working buffer that
/// hold data (as opposed to "still only in the source").
class written_set {
public:
  enum class coverage { none, all, partial };

  coverage covers(std::size_t a, std::size_t b) const {
    auto i = ranges_.upper_bound(a);
    if (i != ranges_.begin()) {
      auto p = std::prev(i);
      if (p->second > a)
        return p->second >= b ? coverage::all : coverage::partial;
    }
    return i != ranges_.end() && i->first < b ? coverage::partial : coverage::none;
  }

  /// The unwritten gaps inside [a, b).
  std::vector<std::pair<std::size_t, std::size_t>> gaps(std::size_t a, std::size_t b) const {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    auto pos = a;
    auto i = ranges_.upper_bound(a);
    if (i != ranges_.begin() && std::prev(i)->second > a)
      pos = std::prev(i)->second;
    for (; pos < b; ++i) {
      auto next = i == ranges_.end() ? b : std::min(b, i->first);
      if (next > pos)
        out.emplace_back(pos, next);
      if (i == ranges_.end())
        break;
      pos = std::max(pos, i->second);
    }
    return out;
  }

  void mark(std::size_t a, std::size_t b) {
    if (a >= b)
      return;
    auto i = ranges_.upper_bound(a);
    if (i != ranges_.begin() && std::prev(i)->second >= a) {
      --i;
      a = i->first;
      b = std::max(b, i->second);
    }
    while (i != ranges_.end() && i->first <= b) {
      b = std::max(b, i->second);
      i = ranges_.erase(i);
    }
    ranges_.emplace(a, b);
  }

private:
  std::map<std::size_t, std::size_t> ranges_;
};

class step_executor final : public algorithm {
public:
  step_executor(collective_io& io, const collective_args& a, sched::program prog,
                program_buffers buf, std::string name)
    : io_(io), a_(a), prog_(std::move(prog)), buf_(std::move(buf)), name_(std::move(name)),
      elem_(dtype_size(a.op.type)), wire_type_(wire_type_of(a.op)),
      wire_elem_(dtype_size(wire_type_)) {
    if (!buf_.source)
      written_.mark(buf_.source_begin, buf_.source_begin + buf_.source_count);
    plan_ = compile_step_plan(a_, prog_, buf_.block_elems);
    items_.reserve(plan_->items.size());
    for (const auto& shape : plan_->items)
      items_.emplace_back(shape);
  }

  void start() override {
    offer_landing();
    for (uint32_t i = 0; i < items_.size(); ++i)
      if (items_[i].pending == 0 && items_[i].is_send)
        ready_.push_back(i);
    drain();
  }

  void on_chunk(const incoming_chunk& c) override {
    auto k = step_plan::find(plan_->recvs, {c.step, c.peer, c.chunk});
    if (!k)
      return io_.fail(errc::protocol_error,
                      "unexpected chunk " + std::to_string(c.chunk) + " of step " + std::to_string(c.step)
                        + " from rank " + std::to_string(c.peer) + " (" + name_
                        + " has no such transfer; do all ranks pass the same count?)");
    auto& it = items_[*k];
    if (it.done || it.has_data)
      return io_.fail(errc::protocol_error, "duplicate chunk " + std::to_string(c.chunk) + " of step "
                                              + std::to_string(c.step) + " from rank "
                                              + std::to_string(c.peer));
    if (c.len != it.count * wire_elem_)
      return io_.fail(errc::protocol_error,
                      "chunk " + std::to_string(c.chunk) + " of step " + std::to_string(c.step)
                        + " from rank " + std::to_string(c.peer) + " has " + std::to_string(c.len)
                        + " bytes, expected " + std::to_string(it.count * wire_elem_)
                        + " (do all ranks pass the same count and dtype?)");
    it.data = c;
    it.has_data = true;
    if (it.pending == 0) {
      ready_.push_back(*k);
      drain();
    }
  }

  void on_sent(int peer, uint32_t step, uint32_t chunk) override {
    auto k = step_plan::find(plan_->sends, {step, peer, chunk});
    if (!k)
      return;
    complete_item(*k);
    drain();
  }

  bool receives() const override { return !plan_->recvs.empty(); }

  bool next_senders(std::vector<int>& peers) const override {
    // Items are in step order and a receive, once in, stays in: the first
    // outstanding one only moves forward.
    auto outstanding = [](const item& it) { return !it.is_send && !it.done && !it.has_data; };
    while (first_outstanding_recv_ < items_.size() && !outstanding(items_[first_outstanding_recv_]))
      ++first_outstanding_recv_;
    auto i = first_outstanding_recv_;
    if (i == items_.size())
      return true;
    auto step = items_[i].step;
    auto first = peers.size();
    // A step of many chunks lists the peers of its first few: enough for
    // the links that matter next, without a long scan on every pass.
    auto end = std::min(items_.size(), i + 64);
    for (; i < end && items_[i].step == step; ++i)
      if (outstanding(items_[i])
          && std::find(peers.begin() + static_cast<std::ptrdiff_t>(first), peers.end(), items_[i].peer) == peers.end())
        peers.push_back(items_[i].peer);
    return true;
  }

  std::string where() const override {
    for (const auto& it : items_)
      if (!it.is_send && !it.done)
        return name_ + " step " + std::to_string(it.step + 1) + " of " + std::to_string(prog_.steps.size())
               + (it.has_data ? ", chunk from rank " + std::to_string(it.peer) + " waiting for earlier steps"
                              : ", waiting on rank " + std::to_string(it.peer));
    return name_ + ", all chunks received, waiting for sends to complete";
  }

private:
  /// A chunk of the plan and how far this op got with it.
  struct item : step_item {
    explicit item(const step_item& shape) : step_item(shape) {}
    bool done = false;         ///< sent (left the buffer) / applied
    bool has_data = false;
    incoming_chunk data;
    std::vector<uint8_t> wire; ///< a compressed send's payload, until sent
  };

  /// A copying receive that depends on nothing would be applied the moment
  /// it arrives: no other transfer touches its range before it, so the link
  /// may write it there itself (collectives/engine/landing.hpp).
  void offer_landing() {
    auto* map = io_.landing();
    if (!map || compressed())
      return; // compressed chunks are widened on the way in, never landed
    for (const auto& it : items_)
      if (!it.is_send && it.kind == sched::xfer_kind::recv_copy && it.pending == 0 && it.count > 0)
        map->add(it.peer, it.step, it.wire_chunk, buf_.work + it.begin * elem_, it.count * elem_);
  }

  /// Makes [a, b) of the working buffer hold data, copying unwritten parts
  /// from the source.
  void materialize(std::size_t a, std::size_t b) {
    for (auto [g0, g1] : written_.gaps(a, b)) {
      if (!buf_.source || g0 < buf_.source_begin || g1 > buf_.source_begin + buf_.source_count)
        throw error(errc::internal, name_ + " reads elements " + std::to_string(g0) + ".."
                                      + std::to_string(g1) + " before they hold data");
      std::memcpy(buf_.work + g0 * elem_, buf_.source + (g0 - buf_.source_begin) * elem_,
                  (g1 - g0) * elem_);
    }
    written_.mark(a, b);
  }

  /// Where the current value of [a, b) can be read.
  const uint8_t* readable(std::size_t a, std::size_t b) {
    auto cov = written_.covers(a, b);
    if (cov == written_set::coverage::none && buf_.source && a >= buf_.source_begin
        && b <= buf_.source_begin + buf_.source_count)
      return buf_.source + (a - buf_.source_begin) * elem_;
    materialize(a, b);
    return buf_.work + a * elem_;
  }

  /// The op's float32 payloads travel as this 16-bit type (compression);
  /// float32 itself when they travel as they are.
  static dtype wire_type_of(const op_request& op) {
    if (op.type != dtype::float32)
      return op.type;
    switch (op.compression) {
      case compression_kind::fp16: return dtype::float16;
      case compression_kind::bf16: return dtype::bfloat16;
      default: return op.type;
    }
  }

  bool compressed() const { return wire_type_ != a_.op.type; }

  float* floats_at(std::size_t elem) { return reinterpret_cast<float*>(buf_.work + elem * elem_); }

  void issue(item& it) {
    if (!compressed()) {
      auto p = readable(it.begin, it.begin + it.count);
      return io_.send(it.peer, it.step, it.wire_chunk, p, it.count * elem_);
    }
    // The sender rounds its own copy to what it sends, so every rank that
    // ends with this value holds the same bits (program.hpp's semantics let
    // no other transfer touch the range while it is being sent).
    materialize(it.begin, it.begin + it.count);
    it.wire.resize(it.count * wire_elem_);
    narrow_for_wire(wire_type_, it.wire.data(), floats_at(it.begin), it.count);
    io_.send(it.peer, it.step, it.wire_chunk, it.wire.data(), it.wire.size());
  }

  /// A compressed chunk into the working buffer: widened, or widened and
  /// reduced in float32.
  void apply_compressed(item& it) {
    auto a = it.begin, b = it.begin + it.count;
    auto* dst = floats_at(a);
    if (it.kind == sched::xfer_kind::recv_copy) {
      widen_from_wire(wire_type_, dst, it.data.data, it.count);
    } else if (written_.covers(a, b) == written_set::coverage::none && buf_.source
               && a >= buf_.source_begin && b <= buf_.source_begin + buf_.source_count) {
      auto* input = reinterpret_cast<const float*>(buf_.source + (a - buf_.source_begin) * elem_);
      reduce_from_wire(a_.op.op, wire_type_, dst, input, it.data.data, it.count);
    } else {
      materialize(a, b);
      reduce_from_wire(a_.op.op, wire_type_, dst, dst, it.data.data, it.count);
    }
  }

  void apply(item& it) {
    auto a = it.begin, b = it.begin + it.count;
    auto dst = buf_.work + a * elem_;
    if (compressed()) {
      apply_compressed(it);
    } else if (it.kind == sched::xfer_kind::recv_copy) {
      if (it.data.data != dst) // not received in place
        std::memcpy(dst, it.data.data, it.data.len);
    } else {
      auto cov = written_.covers(a, b);
      if (cov == written_set::coverage::none && buf_.source && a >= buf_.source_begin
          && b <= buf_.source_begin + buf_.source_count) {
        // First touch of an out-of-place op: combine the input with the
        // incoming data straight into the working buffer.
        reduce3(a_.op.op, a_.op.type, dst, buf_.source + (a - buf_.source_begin) * elem_,
                it.data.data, it.count);
      } else {
        materialize(a, b);
        reduce(a_.op.op, a_.op.type, dst, it.data.data, it.count);
      }
    }
    written_.mark(a, b);
    it.data = incoming_chunk{}; // the staging buffer goes back to the pool
    it.has_data = false;
  }

  void complete_item(uint32_t index) {
    auto& it = items_[index];
    if (it.done)
      return;
    it.done = true;
    it.wire = {}; // a compressed send's payload has left
    ++done_;
    for (auto k = it.dependents_begin; k < it.dependents_end; ++k) {
      auto d = plan_->dependents[k];
      auto& dep = items_[d];
      if (--dep.pending == 0 && (dep.is_send || dep.has_data))
        ready_.push_back(d);
    }
  }

  /// Runs everything that became ready, iteratively (a long pipeline would
  /// otherwise recurse once per chunk).
  void drain() {
    // A queue in a vector (a deque allocates on construction, once per
    // op); the head is a member, so a drain() reached from inside this one
    // (a send reported sent at once) goes on where this one stands.
    while (ready_head_ < ready_.size()) {
      auto index = ready_[ready_head_++];
      auto& it = items_[index];
      if (it.is_send) {
        issue(it); // done once the link reports it sent
      } else {
        apply(it);
        complete_item(index);
      }
    }
    ready_.clear();
    ready_head_ = 0;
    if (done_ == items_.size() && !finished_)
      finish();
  }

  void finish() {
    finished_ = true;
    for (int b : prog_.result_blocks) {
      const auto& r = buf_.block_elems.at(static_cast<std::size_t>(b));
      if (r.count == 0)
        continue;
      materialize(r.begin, r.begin + r.count);
      // A compressed result is a value the wire type holds. Ranks that
      // received or sent it already have exactly that; one that only
      // computed it (in recursive doubling with folded ranks, the partner
      // of the rank that hands the result on) rounds it here, so all ranks
      // end with the same bits.
      if (compressed())
        round_for_wire(wire_type_, floats_at(r.begin), r.count);
    }
    for (const auto& r : buf_.average)
      if (r.count > 0)
        finish_avg(a_.op.type, buf_.work + r.begin * elem_, r.count, a_.world);
    for (const auto& o : buf_.outputs)
      if (o.count > 0 && o.dst != buf_.work + o.begin * elem_)
        std::memcpy(o.dst, buf_.work + o.begin * elem_, o.count * elem_);
    io_.finish();
  }

  collective_io& io_;
  collective_args a_;
  sched::program prog_;
  program_buffers buf_;
  std::string name_;
  std::size_t elem_;
  dtype wire_type_;
  std::size_t wire_elem_;
  std::shared_ptr<const step_plan> plan_;
  std::vector<item> items_; ///< plan_->items, with this op's progress
  mutable std::size_t first_outstanding_recv_ = 0; ///< next_senders()' cursor
  written_set written_;
  std::vector<uint32_t> ready_; ///< items to run, in order, from ready_head_ (drain())
  std::size_t ready_head_ = 0;
  std::size_t done_ = 0;
  bool finished_ = false;
};

} // namespace

std::unique_ptr<algorithm> make_step_executor(collective_io& io, const collective_args& args,
                                              sched::program prog, program_buffers buffers,
                                              std::string name) {
  return std::make_unique<step_executor>(io, args, std::move(prog), std::move(buffers),
                                         std::move(name));
}

} // namespace mccl
