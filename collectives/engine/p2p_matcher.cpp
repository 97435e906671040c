#include "collectives/engine/p2p_matcher.hpp"

#include <algorithm>

namespace mccl {

std::vector<p2p_matcher::match> p2p_matcher::post(uint32_t tag, uint64_t receiver) {
  posted_.push_back(posted_recv{tag, receiver});
  return match_posted();
}

std::vector<p2p_matcher::match> p2p_matcher::match_posted() {
  // Oldest receive first; each takes the lowest-numbered unexpected message
  // with its tag among those below seen_prefix_ (no earlier message with
  // that tag can still be on its way).
  std::vector<match> out;
  for (auto p = posted_.begin(); p != posted_.end();) {
    auto m = unexpected_.begin();
    while (m != unexpected_.end() && m->first < seen_prefix_ && m->second.tag != p->tag)
      ++m;
    if (m == unexpected_.end() || m->first >= seen_prefix_) {
      ++p;
      continue;
    }
    for (const auto& f : m->second.frames)
      kept_bytes_ -= f.header.payload_len;
    routes_[m->first] = p->receiver;
    out.push_back(match{p->receiver, std::move(m->second.frames)});
    unexpected_.erase(m);
    p = posted_.erase(p);
  }
  return out;
}

void p2p_matcher::forget(uint64_t receiver) {
  posted_.erase(std::remove_if(posted_.begin(), posted_.end(),
                               [&](const posted_recv& p) { return p.receiver == receiver; }),
                posted_.end());
  for (auto i = routes_.begin(); i != routes_.end();)
    i = i->second == receiver ? routes_.erase(i) : std::next(i);
}

uint64_t p2p_matcher::on_frame(transport::received_frame& f, std::vector<match>* matched) {
  auto msg = f.header.seq;
  auto r = routes_.find(msg);
  if (r != routes_.end())
    return r->second;
  bool first = unexpected_.find(msg) == unexpected_.end();
  auto& slot = unexpected_[msg];
  slot.tag = f.header.aux;
  kept_bytes_ += f.header.payload_len;
  slot.frames.push_back(std::move(f));
  if (first && msg >= seen_prefix_) {
    seen_ahead_.insert(msg);
    while (!seen_ahead_.empty() && *seen_ahead_.begin() == seen_prefix_) {
      seen_ahead_.erase(seen_ahead_.begin());
      ++seen_prefix_;
    }
    *matched = match_posted();
  }
  return 0;
}

bool p2p_matcher::has_unclaimed(uint32_t tag) const {
  for (const auto& [msg, m] : unexpected_)
    if (m.tag == tag)
      return true;
  return false;
}

std::vector<uint64_t> p2p_matcher::waiting_receivers() const {
  std::vector<uint64_t> out;
  for (const auto& p : posted_)
    out.push_back(p.receiver);
  return out;
}

} // namespace mccl
