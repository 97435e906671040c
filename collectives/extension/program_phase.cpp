#include <mccl/program_phase.hpp>

#include <mccl/schedule.hpp>

#include <algorithm>
#include <cstring>

namespace mccl {

program_phase::program_phase(sched::program prog, void* work, std::size_t count,
                             std::size_t elem_bytes, combine_fn combine, uint32_t first_step)
  : prog_(std::move(prog)), work_(static_cast<uint8_t*>(work)), count_(count),
    elem_bytes_(elem_bytes), combine_(std::move(combine)), first_step_(first_step) {}

program_phase::range_bytes program_phase::bytes_of(const sched::xfer& x) const {
  // Blocks [first, first + n) are contiguous elements: from the first
  // block's start to the last block's end.
  auto first = sched::block_range(count_, prog_.blocks, x.first_block);
  auto last = sched::block_range(count_, prog_.blocks, x.first_block + x.block_count - 1);
  return {first.begin * elem_bytes_, (last.begin + last.count - first.begin) * elem_bytes_};
}

bool program_phase::start(step_io& io) {
  // Every message is asked for now: the runtime hands them over step by
  // step, in parts as they come where no part can split an element (so the
  // combine overlaps the transfer), else whole.
  for (std::size_t s = 0; s < prog_.steps.size(); ++s) {
    std::vector<std::pair<int, std::size_t>> from; // (peer, bytes), one message each
    for (const auto& x : prog_.steps[s].xfers) {
      if (x.kind == sched::xfer_kind::send)
        continue;
      auto it = std::find_if(from.begin(), from.end(), [&](const auto& p) { return p.first == x.peer; });
      if (it == from.end())
        from.emplace_back(x.peer, bytes_of(x).bytes);
      else
        it->second += bytes_of(x).bytes;
    }
    bool parts = 64 % elem_bytes_ == 0;
    for (const auto& [peer, bytes] : from)
      if (parts)
        io.receive_parts(peer, first_step_ + static_cast<uint32_t>(s), bytes);
      else
        io.receive(peer, first_step_ + static_cast<uint32_t>(s), bytes);
  }
  return run_steps(io);
}

bool program_phase::run_steps(step_io& io) {
  for (; step_ < prog_.steps.size(); ++step_) {
    const auto& xs = prog_.steps[step_].xfers;
    std::vector<int> to, from;
    for (const auto& x : xs) {
      auto& peers = x.kind == sched::xfer_kind::send ? to : from;
      if (std::find(peers.begin(), peers.end(), x.peer) == peers.end())
        peers.push_back(x.peer);
    }
    for (int peer : to) {
      // A snapshot of the blocks, in the order the program lists them: the
      // receives of this step may change them while the message travels.
      std::vector<uint8_t> message;
      for (const auto& x : xs)
        if (x.kind == sched::xfer_kind::send && x.peer == peer) {
          auto r = bytes_of(x);
          message.insert(message.end(), work_ + r.offset, work_ + r.offset + r.bytes);
        }
      io.send(peer, first_step_ + static_cast<uint32_t>(step_), std::move(message));
    }
    awaiting_ = from.size();
    if (awaiting_ > 0)
      return false;
  }
  return true;
}

bool program_phase::on_message(step_io& io, const step_message& m) {
  // The message is the peer's transfers of this step back to back; the
  // part [m.offset, m.offset + m.bytes) of it goes where it overlaps them.
  std::size_t at = 0;
  auto part_end = m.offset + m.bytes;
  for (const auto& x : prog_.steps[step_].xfers) {
    if (x.kind == sched::xfer_kind::send || x.peer != m.peer)
      continue;
    auto r = bytes_of(x);
    auto lo = std::max(at, m.offset), hi = std::min(at + r.bytes, part_end);
    if (lo < hi) {
      auto* dst = work_ + r.offset + (lo - at);
      auto* src = m.data + (lo - m.offset);
      if (x.kind == sched::xfer_kind::recv_copy)
        std::memcpy(dst, src, hi - lo);
      else
        combine_(dst, src, (hi - lo) / elem_bytes_);
    }
    at += r.bytes;
  }
  if (!m.last || --awaiting_ > 0)
    return false;
  ++step_;
  return run_steps(io);
}

std::string program_phase::where() const {
  return "step " + std::to_string(std::min(step_ + 1, prog_.steps.size())) + " of "
         + std::to_string(prog_.steps.size());
}

} // namespace mccl
