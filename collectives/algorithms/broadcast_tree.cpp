#include "collectives/algorithms/builtin.hpp"
#include "collectives/algorithms/chunking.hpp"

#include <cstring>
#include <vector>

namespace mccl::builtin {
namespace {

/// Broadcast along a tree given by its parent and children: the binomial
/// tree (few hops, for small messages) or a chain (each rank forwards to one
/// other, so every link carries the data once: bandwidth-optimal for large
/// ones). Both forward chunk k as soon as it arrives, which pipelines.
class broadcast_tree final : public algorithm {
public:
  broadcast_tree(collective_io& io, const collective_args& a, int parent, std::vector<int> children,
                 const char* shape)
    : io_(io), a_(a), parent_(parent), children_(std::move(children)), shape_(shape),
      elem_(dtype_size(a.op.type)), chunk_elems_(pipelined_chunk_elems(a, a.op.count)),
      chunks_(sched::chunk_count(a.op.count, chunk_elems_)), got_(chunks_, false) {}

  void start() override {
    if (parent_ >= 0 && chunks_ > 0) {
      // Nothing touches the caller's buffer before a chunk arrives: links
      // may read each straight into place.
      if (auto* map = io_.landing())
        for (std::size_t k = 0; k < chunks_; ++k)
          map->add(parent_, 0, static_cast<uint32_t>(k), destination(k), range_of(k).count * elem_);
      return; // wait for the parent's chunks
    }
    if (a_.op.send && a_.op.send != a_.op.recv) // out-of-place root
      std::memcpy(a_.op.recv, a_.op.send, a_.op.bytes());
    for (std::size_t k = 0; k < chunks_; ++k)
      forward(k);
    io_.finish();
  }

  void on_chunk(const incoming_chunk& c) override {
    auto want = c.chunk < chunks_ ? range_of(c.chunk).count * elem_ : 0;
    auto bad = check_chunk(c, parent_, 0, chunks_, want);
    if (bad.empty() && got_[c.chunk])
      bad = "duplicate chunk " + std::to_string(c.chunk);
    if (!bad.empty())
      return io_.fail(errc::protocol_error, bad);
    got_[c.chunk] = true;
    if (c.data != destination(c.chunk)) // not received in place
      std::memcpy(destination(c.chunk), c.data, c.len);
    forward(c.chunk);
    if (++received_ == chunks_)
      io_.finish();
  }

  bool receives() const override { return parent_ >= 0; }

  // Only the parent sends to us: with many peers the engine reads that
  // link alone instead of polling every socket on every pass.
  bool next_senders(std::vector<int>& peers) const override {
    if (parent_ >= 0 && received_ < chunks_)
      peers.push_back(parent_);
    return true;
  }

  std::string where() const override {
    return std::string(shape_) + " broadcast from root " + std::to_string(a_.op.root) + ", "
           + std::to_string(received_) + " of " + std::to_string(chunks_) + " chunks in"
           + (parent_ >= 0 ? ", waiting on rank " + std::to_string(parent_) : std::string());
  }

private:
  sched::range range_of(std::size_t k) const {
    return sched::chunk_range({0, a_.op.count}, chunk_elems_, k);
  }

  uint8_t* destination(std::size_t k) const {
    return static_cast<uint8_t*>(a_.op.recv) + range_of(k).begin * elem_;
  }

  void forward(std::size_t k) {
    auto r = range_of(k);
    auto base = static_cast<const uint8_t*>(a_.op.recv) + r.begin * elem_;
    for (int child : children_)
      io_.send(child, 0, static_cast<uint32_t>(k), base, r.count * elem_);
  }

  collective_io& io_;
  collective_args a_;
  int parent_;
  std::vector<int> children_;
  const char* shape_;
  std::size_t elem_;
  std::size_t chunk_elems_;
  std::size_t chunks_;
  std::vector<bool> got_;
  std::size_t received_ = 0;
};

} // namespace

std::unique_ptr<algorithm> make_broadcast_tree(collective_io& io, const collective_args& a) {
  auto node = sched::binomial_tree(a.rank, a.world, a.op.root);
  return std::make_unique<broadcast_tree>(io, a, node.parent, node.children, "binomial-tree");
}

std::unique_ptr<algorithm> make_broadcast_chain(collective_io& io, const collective_args& a) {
  auto node = sched::broadcast_chain(a.rank, a.world, a.op.root);
  std::vector<int> children;
  if (node.next >= 0)
    children.push_back(node.next);
  return std::make_unique<broadcast_tree>(io, a, node.prev, children, "chain");
}

} // namespace mccl::builtin
