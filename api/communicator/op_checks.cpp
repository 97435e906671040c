#include "api/communicator/op_checks.hpp"

#include "collectives/extension/registry.hpp"

namespace mccl::detail {

namespace {

struct checker {
  op_request& op;
  int rank;
  int world;

  [[noreturn]] void reject(errc code, const std::string& why) const {
    throw error(code, describe(op) + " on rank " + std::to_string(rank) + ": " + why);
  }

  void need(const void* p, std::size_t elems, const char* which) const {
    if (elems > 0 && !p)
      reject(errc::invalid_argument,
             std::string("null ") + which + " buffer for " + std::to_string(elems) + " elements");
  }

  void rank_arg(int r, const char* what) const {
    if (r < 0 || r >= world)
      reject(errc::invalid_argument, std::string(what) + " " + std::to_string(r)
                                       + " is outside the communicator of " + std::to_string(world) + " ranks");
  }

  void counts(const std::vector<std::size_t>& v, const char* what) const {
    if (v.size() != static_cast<std::size_t>(world))
      reject(errc::invalid_argument, std::string(what) + " has " + std::to_string(v.size())
                                       + " entries; it needs one per rank (" + std::to_string(world) + ")");
  }

  void alltoallv() const {
    counts(op.counts, "send_counts");
    counts(op.recv_counts, "recv_counts");
    if (op.counts[rank] != op.recv_counts[rank])
      reject(errc::invalid_argument,
             "send_counts[" + std::to_string(rank) + "] = " + std::to_string(op.counts[rank])
               + " differs from recv_counts[" + std::to_string(rank) + "] = "
               + std::to_string(op.recv_counts[rank]) + " (the block a rank keeps)");
    std::size_t rtotal = 0;
    for (auto c : op.recv_counts)
      rtotal += c;
    need(op.send, op.total_count(world), "send");
    need(op.recv, rtotal, "recv");
  }

  void custom() const {
    if (find_algorithm(op_kind::custom, op.name))
      return;
    std::string known;
    for (const auto& n : algorithm_names(op_kind::custom))
      known += (known.empty() ? "" : ", ") + n;
    reject(errc::invalid_argument, "no collective named \"" + op.name + "\" is registered"
                                     + (known.empty() ? std::string(" (none are)") : " (registered: " + known + ")"));
  }

  void run() {
    if (dtype_size(op.type) == 0)
      reject(errc::invalid_argument, "unknown dtype " + std::to_string(static_cast<int>(op.type)));
    if (is_reduction(op.kind)) {
      auto why = check_reduction(op.op, op.type);
      if (!why.empty())
        reject(errc::unsupported, why);
    }
    if (is_rooted(op.kind))
      rank_arg(op.root, "root");
    bool root = op.root == rank;
    switch (op.kind) {
      case op_kind::allreduce:
        need(op.send, op.count, "send");
        need(op.recv, op.count, "recv");
        break;
      case op_kind::broadcast:
        if (root && !op.send)
          op.send = op.recv;
        need(op.recv, op.count, "recv");
        break;
      case op_kind::reduce:
        need(op.send, op.count, "send");
        if (root)
          need(op.recv, op.count, "recv");
        break;
      case op_kind::allgather:
      case op_kind::reduce_scatter: {
        if (op.is_v())
          counts(op.counts, "counts");
        bool gather = op.kind == op_kind::allgather;
        need(op.send, gather ? op.count_of(rank) : op.total_count(world), "send");
        need(op.recv, gather ? op.total_count(world) : op.count_of(rank), "recv");
        break;
      }
      case op_kind::gather:
        need(op.send, op.count, "send");
        if (root)
          need(op.recv, op.count * world, "recv");
        break;
      case op_kind::scatter:
        if (root)
          need(op.send, op.count * world, "send");
        need(op.recv, op.count, "recv");
        break;
      case op_kind::alltoall:
        if (op.is_v()) {
          alltoallv();
        } else {
          need(op.send, op.count * world, "send");
          need(op.recv, op.count * world, "recv");
        }
        break;
      case op_kind::send:
      case op_kind::recv:
        rank_arg(op.root, "peer");
        if (op.root == rank)
          reject(errc::invalid_argument, "the peer is this rank itself (copy the buffer instead)");
        need(op.kind == op_kind::send ? op.send : op.recv, op.count,
             op.kind == op_kind::send ? "send" : "recv");
        break;
      case op_kind::custom:
        custom();
        break;
      case op_kind::barrier:
        break;
    }
  }
};

} // namespace

void check_op(op_request& op, int rank, int world) {
  checker{op, rank, world}.run();
}

bool compression_applies(const op_request& op, compression_kind kind) {
  if (op.type != dtype::float32)
    return false;
  if (kind == compression_kind::topk)
    return op.kind == op_kind::allreduce && (op.op == redop::sum || op.op == redop::avg);
  switch (op.kind) {
    case op_kind::allreduce:
    case op_kind::reduce:
    case op_kind::reduce_scatter:
    case op_kind::allgather:
    case op_kind::broadcast:
      return true;
    default:
      return false;
  }
}

void resolve_compression(op_request& op, const op_options& asked, const config& cfg, int rank,
                         int world) {
  auto kind = asked.compression.value_or(cfg.compression);
  op.compression = compression_kind::none;
  if (kind == compression_kind::none)
    return;
  auto reject = [&](const std::string& why) {
    throw error(errc::invalid_argument, describe(op) + " on rank " + std::to_string(rank)
                                          + ": compression " + to_string(kind) + " " + why);
  };
  if (!compression_applies(op, kind)) {
    // The communicator's setting covers the ops it can; asking for it on
    // one op that it cannot carry is a mistake worth hearing about.
    if (asked.compression)
      reject(kind == compression_kind::topk
               ? "applies to float32 allreduce with sum or avg only"
               : "applies to float32 allreduce, reduce, reduce_scatter, allgather and broadcast "
                 "only");
    return;
  }
  double ratio = asked.topk_ratio.value_or(cfg.topk_ratio);
  if (kind == compression_kind::topk && !(ratio > 0.0 && ratio <= 1.0))
    reject("ratio " + std::to_string(ratio) + ": expected a fraction in (0, 1]");
  // Small ops are latency-bound: halving their bytes saves nothing and the
  // conversions would only add work. Every rank sees the same size, so all
  // agree.
  if (op.selection_bytes(world) <= cfg.small_msg_threshold)
    return;
  op.compression = kind;
  op.topk_ratio = kind == compression_kind::topk ? ratio : 0.0;
}

} // namespace mccl::detail
