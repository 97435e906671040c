/// Algorithms where every block goes straight from its owner to the rank
/// that needs it: gather, scatter, alltoall(v) and point-to-point send and
/// receive. One state machine, block_mover, serves them all: it sends a list
/// of blocks and receives a list of blocks, each chunked, all at once.
///
/// Receives do not assume the sender's chunk size (MCCL_CHUNK_BYTES may
/// differ between ranks): chunks of a block are taken in order, so each
/// lands after the bytes before it. They leave in order on one link, but
/// may reach the op out of order (a fault scenario's delayed or reordered
/// chunk message): one that comes ahead waits, keeping its payload, until
/// the chunks before it are in. Every block is at least one frame, so an
/// empty block is still confirmed and a sender whose size differs from
/// ours is caught at its first frame.

#include "collectives/algorithms/builtin.hpp"
#include "collectives/algorithms/chunking.hpp"
#include "collectives/algorithms/scratch.hpp"

#include <cstring>
#include <map>
#include <vector>

namespace mccl::builtin {
namespace {

struct outgoing_block {
  int peer;
  const uint8_t* data;
  std::size_t bytes;
};

struct incoming_block {
  incoming_block(int peer, uint8_t* data, std::size_t bytes) : peer(peer), data(data), bytes(bytes) {}
  int peer;
  uint8_t* data;
  std::size_t bytes;      ///< expected size
  std::size_t have = 0;   ///< landed so far
  uint32_t next_chunk = 0;
  bool done = false;
  /// Chunks that came before next_chunk did, by number (see above).
  std::map<uint32_t, incoming_chunk> ahead;
};

class block_mover final : public algorithm {
public:
  /// `sized`: senders announce each block's size (send_block) and receivers
  /// check it, for ops whose per-pair sizes are not implied by the op
  /// signature (alltoallv, point-to-point).
  block_mover(collective_io& io, const collective_args& a, std::vector<outgoing_block> out,
              std::vector<incoming_block> in, bool sized, std::string name)
    : io_(io), a_(a), out_(std::move(out)), in_(std::move(in)), sized_(sized),
      name_(std::move(name)) {
    auto ce = chunk_elems_for(a) * dtype_size(a.op.type);
    chunk_bytes_ = ce == 0 ? 1 : ce;
  }

  void start() override {
    offer_landing();
    for (const auto& b : out_) {
      auto n = b.bytes == 0 ? 1 : (b.bytes + chunk_bytes_ - 1) / chunk_bytes_;
      for (std::size_t k = 0; k < n; ++k) {
        auto off = k * chunk_bytes_;
        auto len = std::min(chunk_bytes_, b.bytes - off);
        if (sized_)
          io_.send_block(b.peer, 0, static_cast<uint32_t>(k), b.data + off, len, b.bytes);
        else
          io_.send(b.peer, 0, static_cast<uint32_t>(k), b.data + off, len);
      }
    }
    maybe_finish();
  }

  /// Each block's chunks may be read straight into place, assuming the
  /// sender chunks like we do (a sender with another MCCL_CHUNK_BYTES sends
  /// other lengths, which then arrive in staging memory). Only where each
  /// peer sends one block: chunk numbers name a place only then.
  void offer_landing() {
    auto* map = io_.landing();
    if (!map)
      return;
    for (std::size_t i = 0; i < in_.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (in_[i].peer == in_[j].peer)
          return;
    for (const auto& b : in_)
      for (std::size_t off = 0, k = 0; off < b.bytes; off += chunk_bytes_, ++k)
        map->add(b.peer, 0, static_cast<uint32_t>(k), b.data + off, std::min(chunk_bytes_, b.bytes - off));
  }

  void on_chunk(const incoming_chunk& c) override {
    incoming_block* b = nullptr;
    for (auto& x : in_)
      if (x.peer == c.peer && !x.done) {
        b = &x;
        break;
      }
    if (!b)
      return io_.fail(errc::protocol_error, "unexpected chunk from rank " + std::to_string(c.peer)
                                              + " (" + name_ + " expects nothing more from it)");
    // A block of n bytes comes in at most n chunks (one when empty).
    bool ahead = c.step == 0 && c.chunk > b->next_chunk && c.chunk < std::max<std::size_t>(b->bytes, 1);
    if (ahead) {
      if (!b->ahead.emplace(c.chunk, c).second)
        return io_.fail(errc::protocol_error, "duplicate chunk " + std::to_string(c.chunk)
                                                + " of step 0 from rank " + std::to_string(c.peer));
      return;
    }
    if (!take(*b, c))
      return;
    while (!b->done && !b->ahead.empty() && b->ahead.begin()->first == b->next_chunk) {
      auto next = std::move(b->ahead.begin()->second);
      b->ahead.erase(b->ahead.begin());
      if (!take(*b, next))
        return;
    }
    if (b->done && !b->ahead.empty()) // chunks beyond the block's end: the sender sends more
      return io_.fail(sized_ ? errc::invalid_argument : errc::protocol_error,
                      size_mismatch(*b, b->have + b->ahead.begin()->second.len));
    maybe_finish();
  }

  /// Lands chunk c, the next one of block b; false when it failed the op.
  bool take(incoming_block& b, const incoming_chunk& c) {
    if (sized_ && c.chunk == 0 && c.message_bytes != b.bytes) {
      io_.fail(errc::invalid_argument, size_mismatch(b, c.message_bytes));
      return false;
    }
    if (c.step != 0 || c.chunk != b.next_chunk) {
      io_.fail(errc::protocol_error, "chunk " + std::to_string(c.chunk) + " of step " + std::to_string(c.step)
                                       + " from rank " + std::to_string(c.peer) + ", expected chunk "
                                       + std::to_string(b.next_chunk) + " of step 0");
      return false;
    }
    if (c.len > b.bytes - b.have) {
      io_.fail(sized_ ? errc::invalid_argument : errc::protocol_error, size_mismatch(b, b.have + c.len));
      return false;
    }
    if (c.len > 0 && c.data != b.data + b.have) // not received in place
      std::memcpy(b.data + b.have, c.data, c.len);
    b.have += c.len;
    ++b.next_chunk;
    if (b.have == b.bytes)
      b.done = true;
    return true;
  }

  void on_sent(int, uint32_t, uint32_t) override {}

  bool receives() const override { return !in_.empty(); }

  std::string where() const override {
    std::string waiting;
    for (const auto& b : in_)
      if (!b.done)
        waiting += (waiting.empty() ? "" : ", ") + std::to_string(b.peer);
    return name_ + (waiting.empty() ? ", all blocks received, waiting for sends to complete"
                                    : ", waiting on rank(s) " + waiting);
  }

private:
  std::string size_mismatch(const incoming_block& b, std::size_t theirs) const {
    auto e = dtype_size(a_.op.type);
    return "rank " + std::to_string(b.peer) + " sends " + std::to_string(theirs) + " bytes ("
           + std::to_string(theirs / e) + " x " + to_string(a_.op.type) + ") but this rank expects "
           + std::to_string(b.bytes) + " bytes (" + std::to_string(b.bytes / e) + " x "
           + to_string(a_.op.type) + ")";
  }

  void maybe_finish() {
    for (const auto& b : in_)
      if (!b.done)
        return;
    if (!finished_) {
      finished_ = true;
      io_.finish(); // the hosting actor waits for our sends to leave
    }
  }

  collective_io& io_;
  collective_args a_;
  std::vector<outgoing_block> out_;
  std::vector<incoming_block> in_;
  bool sized_;
  std::string name_;
  std::size_t chunk_bytes_;
  bool finished_ = false;
};

const uint8_t* cbytes(const void* p) { return static_cast<const uint8_t*>(p); }
uint8_t* mbytes(void* p) { return static_cast<uint8_t*>(p); }

/// Copies our own block locally (memmove: in-place forms may overlap).
void copy_own(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0 && dst && src && dst != src)
    std::memmove(dst, src, bytes);
}

} // namespace

namespace {

/// Gather (to_root) and scatter move one block between the root and every
/// rank, in opposite directions: block r of the root's rank-ordered buffer
/// is rank r's own buffer.
std::unique_ptr<algorithm> linear_rooted(collective_io& io, const collective_args& a, bool to_root) {
  const auto& op = a.op;
  auto e = op.elem_size();
  std::vector<outgoing_block> out;
  std::vector<incoming_block> in;
  // The root's rank-ordered buffer and each rank's own block.
  auto* all = to_root ? mbytes(op.recv) : mbytes(const_cast<void*>(op.send));
  auto* own = to_root ? mbytes(const_cast<void*>(op.send)) : mbytes(op.recv);
  if (a.rank == op.root) {
    for (int r = 0; r < a.world; ++r) {
      if (r == a.rank)
        continue;
      auto block = all + op.offset_of(r) * e;
      auto bytes = op.count_of(r) * e;
      if (to_root)
        in.push_back({r, block, bytes});
      else
        out.push_back({r, block, bytes});
    }
    auto mine = all + op.offset_of(a.rank) * e;
    auto bytes = op.count_of(a.rank) * e;
    to_root ? copy_own(mine, own, bytes) : copy_own(own, mine, bytes);
  } else if (to_root) {
    out.push_back({op.root, own, op.count_of(a.rank) * e});
  } else {
    in.push_back({op.root, own, op.count_of(a.rank) * e});
  }
  return std::make_unique<block_mover>(io, a, std::move(out), std::move(in), false,
                                       std::string(to_root ? "linear gather to root "
                                                           : "linear scatter from root ")
                                         + std::to_string(op.root));
}

} // namespace

std::unique_ptr<algorithm> make_gather_linear(collective_io& io, const collective_args& a) {
  return linear_rooted(io, a, true);
}

std::unique_ptr<algorithm> make_scatter_linear(collective_io& io, const collective_args& a) {
  return linear_rooted(io, a, false);
}

namespace {

/// alltoall needs its input intact until every block has left; an in-place
/// call (send == recv) therefore sends from a copy.
class alltoall_pairwise final : public algorithm {
public:
  alltoall_pairwise(collective_io& io, const collective_args& a) {
    const auto& op = a.op;
    auto e = op.elem_size();
    auto w = static_cast<std::size_t>(a.world);
    // Send side: counts (or count) per destination; receive side:
    // recv_counts (or count) per source. Offsets are prefix sums.
    std::vector<std::size_t> scount(w), rcount(w), soff(w), roff(w);
    std::size_t stotal = 0, rtotal = 0;
    for (std::size_t r = 0; r < w; ++r) {
      scount[r] = op.is_v() ? op.counts[r] : op.count;
      rcount[r] = op.is_v() ? op.recv_counts[r] : op.count;
      soff[r] = stotal;
      roff[r] = rtotal;
      stotal += scount[r];
      rtotal += rcount[r];
    }
    const uint8_t* src = cbytes(op.send);
    if (op.send == op.recv && stotal > 0) {
      copy_ = scratch_buffer(stotal * e);
      std::memcpy(copy_.data(), src, stotal * e);
      src = copy_.data();
    }
    std::vector<outgoing_block> out;
    std::vector<incoming_block> in;
    // Pairwise order: step k talks to rank + k and rank - k, so at every
    // moment each rank sends to a different destination.
    for (int k = 1; k < a.world; ++k) {
      auto to = static_cast<std::size_t>((a.rank + k) % a.world);
      auto from = static_cast<std::size_t>((a.rank - k + a.world) % a.world);
      out.push_back({static_cast<int>(to), src + soff[to] * e, scount[to] * e});
      in.push_back({static_cast<int>(from), mbytes(op.recv) + roff[from] * e, rcount[from] * e});
    }
    auto me = static_cast<std::size_t>(a.rank);
    if (scount[me] != rcount[me])
      throw error(errc::invalid_argument, "alltoallv: this rank sends itself "
                                            + std::to_string(scount[me]) + " elements but expects "
                                            + std::to_string(rcount[me]));
    copy_own(mbytes(op.recv) + roff[me] * e, src + soff[me] * e, scount[me] * e);
    mover_ = std::make_unique<block_mover>(io, a, std::move(out), std::move(in), op.is_v(),
                                           "pairwise alltoall");
  }

  void start() override { mover_->start(); }
  void on_chunk(const incoming_chunk& c) override { mover_->on_chunk(c); }
  void on_sent(int p, uint32_t s, uint32_t c) override { mover_->on_sent(p, s, c); }
  std::string where() const override { return mover_->where(); }

private:
  scratch_buffer copy_; ///< the input of an in-place alltoall
  std::unique_ptr<block_mover> mover_;
};

} // namespace

std::unique_ptr<algorithm> make_alltoall_pairwise(collective_io& io, const collective_args& a) {
  return std::make_unique<alltoall_pairwise>(io, a);
}

std::unique_ptr<algorithm> make_p2p_send(collective_io& io, const collective_args& a) {
  const auto& op = a.op;
  std::vector<outgoing_block> out{{op.root, cbytes(op.send), op.bytes()}};
  return std::make_unique<block_mover>(io, a, std::move(out), std::vector<incoming_block>{}, true,
                                       "send to rank " + std::to_string(op.root) + " tag "
                                         + std::to_string(op.tag));
}

std::unique_ptr<algorithm> make_p2p_recv(collective_io& io, const collective_args& a) {
  const auto& op = a.op;
  std::vector<incoming_block> in{{op.root, mbytes(op.recv), op.bytes()}};
  return std::make_unique<block_mover>(io, a, std::vector<outgoing_block>{}, std::move(in), true,
                                       "recv from rank " + std::to_string(op.root) + " tag "
                                         + std::to_string(op.tag));
}

} // namespace mccl::builtin
