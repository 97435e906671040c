#include "collectives/engine/chunk_faults.hpp"

#include "collectives/engine/frame_signature.hpp"
#include "transport/fault/fault_draw.hpp"

#include <random>

namespace mccl {

namespace {

using transport::fault_kind;
using transport::fault_layer;
using transport::matches_rank;
using transport::mix;

bool is_p2p(const wire::frame_header& h) {
  return (h.flags & wire::flag_p2p) != 0;
}

/// Whether two frames are for the same op on this rank: a collective's
/// sequence number, or one point-to-point message of one sender.
bool same_op(const transport::received_frame& a, const transport::received_frame& b) {
  return a.header.seq == b.header.seq && is_p2p(a.header) == is_p2p(b.header)
         && (!is_p2p(a.header) || a.peer == b.peer);
}

std::string kind_name(const transport::fault_spec& f) {
  return std::string("chunk_") + transport::to_string(f.kind);
}

} // namespace

std::unique_ptr<chunk_faults> chunk_faults::make(const transport::fault_scenario& s, int rank,
                                                 std::shared_ptr<transport::fault_recorder> recorder,
                                                 clock::time_point start) {
  std::vector<rule> rules;
  for (std::size_t i = 0; i < s.faults.size(); ++i) {
    const auto& f = s.faults[i];
    if (f.on == fault_layer::chunk && matches_rank(f.to, rank))
      rules.push_back(rule{&f, i, 0});
  }
  if (rules.empty())
    return nullptr;
  return std::unique_ptr<chunk_faults>(new chunk_faults(s, std::move(rules), std::move(recorder), start));
}

chunk_faults::chunk_faults(const transport::fault_scenario& s, std::vector<rule> rules,
                           std::shared_ptr<transport::fault_recorder> recorder, clock::time_point start)
  : seed_(s.seed), rules_(std::move(rules)), recorder_(std::move(recorder)), start_(start) {
}

chunk_faults::rule* chunk_faults::decide(int peer, const wire::frame_header& h, clock::time_point now) {
  for (auto& r : rules_) {
    const auto& f = *r.spec;
    if ((f.count && r.fired >= f.count) || !matches_rank(f.from, peer) || (f.seq && *f.seq != h.seq)
        || (f.step && *f.step != h.step) || (f.chunk && *f.chunk != h.chunk)
        || now - start_ < std::chrono::milliseconds(f.after_ms)
        || (f.op && *f.op != to_string(unpack_signature(h).kind)))
      continue;
    // The draw depends only on the seed, the fault, the sender and the
    // chunk, so the same program hits the same chunks run after run.
    if (f.probability < 1.0) {
      auto id = mix(mix(mix(mix(mix(seed_, r.index), static_cast<uint64_t>(peer)), h.seq),
                        (uint64_t{h.step} << 32) | h.chunk),
                    is_p2p(h) ? 1 : 0);
      std::mt19937_64 rng(id);
      if (std::uniform_real_distribution<double>(0.0, 1.0)(rng) >= f.probability)
        continue;
    }
    ++r.fired;
    return &r;
  }
  return nullptr;
}

void chunk_faults::admit(transport::received_frame f, clock::time_point now, const pass_fn& pass) {
  // Frames held for reorder before this one go on after it (taken out
  // first: passing one on may abort the communicator, which clears held_).
  std::vector<transport::received_frame> after;
  for (auto i = held_.begin(); i != held_.end();) {
    if (i->reordered && same_op(i->frame, f)) {
      after.push_back(std::move(i->frame));
      i = held_.erase(i);
    } else {
      ++i;
    }
  }
  if (auto* r = decide(f.peer, f.header, now)) {
    const auto& spec = *r->spec;
    switch (spec.kind) {
      case fault_kind::drop:
        record(*r, f, "the chunk never reaches its op");
        break;
      case fault_kind::duplicate: {
        record(*r, f, "the chunk reaches its op twice");
        auto copy = f; // shares the payload: both point at the same bytes
        pass(std::move(f));
        pass(std::move(copy));
        break;
      }
      case fault_kind::delay:
        record(*r, f, "the chunk reaches its op " + std::to_string(spec.ms) + " ms late");
        held_.push_back(held_frame{std::move(f), now + std::chrono::milliseconds(spec.ms), false});
        break;
      case fault_kind::reorder:
        record(*r, f, "the chunk reaches its op after the next chunk for that op");
        held_.push_back(held_frame{std::move(f), now + reorder_wait, true});
        break;
      default:
        pass(std::move(f)); // the parser admits no other kind on chunks
        break;
    }
  } else {
    pass(std::move(f));
  }
  for (auto& h : after)
    pass(std::move(h));
}

void chunk_faults::release_due(clock::time_point now, const pass_fn& pass) {
  if (held_.empty())
    return;
  std::vector<transport::received_frame> due;
  for (auto i = held_.begin(); i != held_.end();) {
    if (i->due <= now) {
      due.push_back(std::move(i->frame));
      i = held_.erase(i);
    } else {
      ++i;
    }
  }
  // Taken out first: passing one on may abort the communicator, which
  // clears held_.
  for (auto& f : due)
    pass(std::move(f));
}

chunk_faults::clock::time_point chunk_faults::next_due() const noexcept {
  auto due = clock::time_point::max();
  for (const auto& h : held_)
    due = std::min(due, h.due);
  return due;
}

void chunk_faults::record(const rule& r, const transport::received_frame& f, const std::string& detail) {
  if (recorder_)
    recorder_->fault(kind_name(*r.spec), f.peer, transport::key_of(f.header),
                     detail + " (fault #" + std::to_string(r.index) + ", on chunk)");
}

} // namespace mccl
