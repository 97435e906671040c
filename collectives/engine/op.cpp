#include "collectives/engine/op.hpp"
#include "reducers/topk.hpp"

namespace mccl {

namespace {

constexpr op_kind all_kinds[] = {
  op_kind::allreduce, op_kind::broadcast, op_kind::reduce,  op_kind::allgather,
  op_kind::reduce_scatter, op_kind::gather, op_kind::scatter, op_kind::alltoall,
  op_kind::barrier,   op_kind::send,      op_kind::recv,    op_kind::custom,
};

/// FNV-1a over 64-bit words, folded to 32 bits: cheap, and any difference in
/// per-rank counts changes it with overwhelming probability.
uint32_t hash_words(const std::vector<std::size_t>& v) noexcept {
  uint64_t h = 1469598103934665603ull;
  for (auto x : v)
    for (int i = 0; i < 8; ++i) {
      h ^= (static_cast<uint64_t>(x) >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  return static_cast<uint32_t>(h ^ (h >> 32));
}

uint32_t hash_text(const std::string& s) noexcept {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return static_cast<uint32_t>(h ^ (h >> 32));
}

} // namespace

const char* to_string(op_kind kind) noexcept {
  switch (kind) {
    case op_kind::allreduce: return "allreduce";
    case op_kind::broadcast: return "broadcast";
    case op_kind::reduce: return "reduce";
    case op_kind::allgather: return "allgather";
    case op_kind::reduce_scatter: return "reduce_scatter";
    case op_kind::gather: return "gather";
    case op_kind::scatter: return "scatter";
    case op_kind::alltoall: return "alltoall";
    case op_kind::barrier: return "barrier";
    case op_kind::send: return "send";
    case op_kind::recv: return "recv";
    case op_kind::custom: return "custom";
  }
  return "unknown";
}

bool op_kind_from_string(const std::string& name, op_kind& out) noexcept {
  for (auto k : all_kinds)
    if (name == to_string(k)) {
      out = k;
      return true;
    }
  return false;
}

std::size_t op_request::total_count(int world) const noexcept {
  if (counts.empty())
    return count * static_cast<std::size_t>(world);
  std::size_t t = 0;
  for (auto c : counts)
    t += c;
  return t;
}

std::size_t op_request::offset_of(int r) const noexcept {
  if (counts.empty())
    return count * static_cast<std::size_t>(r);
  std::size_t t = 0;
  for (int i = 0; i < r; ++i)
    t += counts[static_cast<std::size_t>(i)];
  return t;
}

std::size_t op_request::selection_bytes(int world) const noexcept {
  switch (kind) {
    case op_kind::allgather:
    case op_kind::reduce_scatter:
    case op_kind::gather:
    case op_kind::scatter:
    case op_kind::alltoall:
      return total_count(world) * elem_size();
    default:
      return bytes();
  }
}

op_signature op_request::signature(int world) const noexcept {
  op_signature s;
  s.kind = kind;
  s.type = type;
  s.op = is_reduction(kind) || kind == op_kind::custom ? op : redop::sum;
  s.count = count;
  s.codec = compression;
  if (compression == compression_kind::topk) // ranks must agree on k
    s.arg = static_cast<uint32_t>(topk_count(count, topk_ratio));
  if (is_rooted(kind))
    s.arg = static_cast<uint32_t>(root);
  switch (kind) {
    case op_kind::allgather:
    case op_kind::reduce_scatter:
      if (!counts.empty()) {
        s.count = total_count(world);
        s.arg = hash_words(counts);
      }
      break;
    case op_kind::alltoall:
      // Per-rank counts legitimately differ between ranks for alltoallv;
      // receivers check each block's size instead.
      if (!counts.empty()) {
        s.count = 0;
        s.arg = 1;
      }
      break;
    case op_kind::barrier:
      s.type = dtype::uint8;
      s.count = 0;
      break;
    case op_kind::custom:
      s.arg = hash_text(name);
      break;
    default:
      break;
  }
  return s;
}

std::string describe(const op_signature& s) {
  std::string out = std::string(to_string(s.kind)) + "(";
  if (s.kind == op_kind::barrier)
    return out + ")";
  bool v = (s.kind == op_kind::allgather || s.kind == op_kind::reduce_scatter
            || s.kind == op_kind::alltoall)
           && s.arg != 0;
  if (s.kind == op_kind::alltoall && v)
    out += "per-rank counts";
  else
    out += std::string(v ? "total count " : "count ") + std::to_string(s.count);
  out += std::string(", ") + to_string(s.type);
  if (is_reduction(s.kind))
    out += std::string(", ") + to_string(s.op);
  if (is_rooted(s.kind))
    out += ", root " + std::to_string(s.arg);
  if (v && s.kind != op_kind::alltoall)
    out += ", per-rank counts #" + std::to_string(s.arg);
  if (s.kind == op_kind::custom)
    out += ", name #" + std::to_string(s.arg);
  if (s.codec == compression_kind::topk)
    out += ", top " + std::to_string(s.arg) + " on the wire";
  else if (s.codec != compression_kind::none)
    out += std::string(", ") + to_string(s.codec) + " on the wire";
  return out + ")";
}

std::string describe(const op_request& op) {
  if (op.kind == op_kind::send || op.kind == op_kind::recv)
    return std::string(to_string(op.kind)) + "(count " + std::to_string(op.count) + ", "
           + to_string(op.type) + (op.kind == op_kind::send ? ", to rank " : ", from rank ")
           + std::to_string(op.root) + ", tag " + std::to_string(op.tag) + ")";
  std::string out = std::string(op.kind == op_kind::custom ? "custom \"" + op.name + "\"" : to_string(op.kind)) + "(";
  if (op.kind == op_kind::barrier)
    return out + ")";
  if (op.is_v()) {
    out += "counts [";
    for (std::size_t i = 0; i < op.counts.size() && i < 8; ++i)
      out += (i ? " " : "") + std::to_string(op.counts[i]);
    out += op.counts.size() > 8 ? " ...]" : "]";
  } else {
    out += "count " + std::to_string(op.count);
  }
  out += std::string(", ") + to_string(op.type);
  if (is_reduction(op.kind) || op.kind == op_kind::custom)
    out += std::string(", ") + to_string(op.op);
  if (is_rooted(op.kind))
    out += ", root " + std::to_string(op.root);
  if (op.compression != compression_kind::none)
    out += std::string(", ") + to_string(op.compression) + " on the wire";
  return out + ")";
}

const char* to_string(driver_kind who) noexcept {
  switch (who) {
    case driver_kind::caller: return "caller";
    case driver_kind::op_thread: return "op thread";
    case driver_kind::actor: return "actor";
  }
  return "unknown";
}

} // namespace mccl
