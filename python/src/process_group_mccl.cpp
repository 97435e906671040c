#include "process_group_mccl.hpp"

#include <Python.h>

#include "api/process/process_runtime.hpp"
#include "store_adapter.hpp"
#include "tensor_args.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <thread>

namespace mccl::torch_backend {

namespace {

using ::c10d::OpType;

/// The TCPStore torch rendezvoused through, under its prefixes; null for
/// another store (file://).
::c10d::TCPStore* tcp_store_of(c10::intrusive_ptr<::c10d::Store> store) {
  for (int depth = 0; store && depth < 8; ++depth) {
    if (auto* tcp = dynamic_cast<::c10d::TCPStore*>(store.get()))
      return tcp;
    auto* prefixed = dynamic_cast<::c10d::PrefixStore*>(store.get());
    if (!prefixed)
      break;
    store = prefixed->getUnderlyingStore();
  }
  return nullptr;
}

/// Where the other ranks are, so mccl listens on the interface that routes
/// there: the TCPStore's host when torch rendezvoused through one, else
/// MASTER_ADDR, else loopback (MCCL_LISTEN_ADDR / MCCL_IFNAME override).
std::string master_address(const c10::intrusive_ptr<::c10d::Store>& store) {
  if (auto* tcp = tcp_store_of(store))
    return tcp->getHost();
  const char* env = std::getenv("MASTER_ADDR");
  return env && *env ? env : "127.0.0.1";
}

uint32_t comm_id_of(const std::string& group_name) {
  return static_cast<uint32_t>(std::hash<std::string>{}(group_name) & 0x7fffffff);
}

std::vector<std::size_t> counts_of(const std::vector<at::Tensor>& ts) {
  std::vector<std::size_t> out;
  for (const auto& t : ts)
    out.push_back(static_cast<std::size_t>(t.numel()));
  return out;
}

/// Every tensor of `ts` checked and of the dtype of ts[0].
void check_same_dtype(const std::vector<at::Tensor>& ts, const op_context& ctx, const char* what) {
  for (const auto& t : ts) {
    check_tensor(t, ctx, what);
    if (t.scalar_type() != ts.front().scalar_type())
      ctx.fail(errc::invalid_argument, std::string(what) + " mixes dtypes "
                                         + c10::toString(ts.front().scalar_type()) + " and "
                                         + c10::toString(t.scalar_type()));
  }
}

/// The coalesced ops' lists: as many outputs as inputs (not none), checked
/// tensors of one dtype, and each tensor of the gathered side (the outputs
/// of an allgather, `outputs_gathered`; else the inputs of a reduce-scatter)
/// holding world size x its partner's elements, of its dtype (rank order).
void check_coalesced_pairs(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
                           bool outputs_gathered, int world, const op_context& ctx) {
  if (inputs.empty())
    ctx.fail(errc::invalid_argument, "the input list is empty");
  check_count(outputs, inputs.size(), ctx, "output list (one tensor per input)");
  check_same_dtype(inputs, ctx, "input list");
  for (const auto& out : outputs)
    check_tensor(out, ctx, "an output");
  const auto& whole = outputs_gathered ? outputs : inputs;
  const auto& block = outputs_gathered ? inputs : outputs;
  const char* whole_name = outputs_gathered ? "output" : "input";
  const char* block_name = outputs_gathered ? "input" : "output";
  for (std::size_t i = 0; i < block.size(); ++i)
    if (whole[i].scalar_type() != block[i].scalar_type() || whole[i].numel() != block[i].numel() * world)
      ctx.fail(errc::invalid_argument, std::string(whole_name) + " " + std::to_string(i) + " must hold world size ("
                                         + std::to_string(world) + ") x " + std::to_string(block[i].numel())
                                         + " elements of its " + block_name + "'s dtype; it has "
                                         + std::to_string(whole[i].numel()) + " of "
                                         + c10::toString(whole[i].scalar_type()));
}

} // namespace

process_group_mccl::process_group_mccl(const c10::intrusive_ptr<::c10d::Store>& store, int rank,
                                       int size, std::chrono::milliseconds timeout,
                                       const std::string& group_name)
  : Backend(rank, size), runtime_(mccl::process::shared_runtime()) {
  comm_options o;
  o.rank = rank;
  o.world_size = size;
  o.store = std::make_shared<c10d_store_adapter>(store);
  o.master_addr = master_address(store);
  // The store's port, so MCCL_PORT_BASE is checked against it (0 for a
  // file:// store: then MASTER_PORT from the environment, if any).
  if (auto* tcp = tcp_store_of(store))
    o.master_port = static_cast<int>(tcp->getPort());
  o.comm_id = comm_id_of(group_name);
  o.overrides = mccl::process::explicit_settings();
  // The group's timeout is the op deadline unless MCCL_TIMEOUT_MS was set
  // explicitly (Python) or in the environment.
  if (!o.overrides.values().count("MCCL_TIMEOUT_MS") && !std::getenv("MCCL_TIMEOUT_MS")
      && timeout.count() > 0)
    o.overrides.set("MCCL_TIMEOUT_MS", static_cast<long long>(timeout.count()));
  comm_ = runtime_->create_communicator(o);
  op_timeout_ms_ = comm_.timeout().count();
}

process_group_mccl::process_group_mccl(made_from_parent, std::shared_ptr<runtime> rt, communicator comm)
  : Backend(comm.rank(), comm.size()), runtime_(std::move(rt)), comm_(std::move(comm)) {
  op_timeout_ms_ = comm_.timeout().count();
}

process_group_mccl::~process_group_mccl() {
  // Python drops the last reference holding the GIL. Finalizing may wait
  // (flushing to peers, joining mccl's threads), and Python's other threads
  // must not stop meanwhile, nor an mccl thread that frees something
  // Python owned and so needs the GIL.
  if (Py_IsInitialized() && PyGILState_Check()) {
    PyThreadState* unlocked = PyEval_SaveThread();
    shutdown();
    PyEval_RestoreThread(unlocked);
    return;
  }
  shutdown();
}

void process_group_mccl::shutdown() {
  if (comm_.valid())
    comm_.finalize();
}

c10::intrusive_ptr<work_mccl> process_group_mccl::make_work(OpType type, const char* op, tensors outputs,
                                                            bool counted) {
  if (counted)
    ++seq_;
  auto w = c10::make_intrusive<work_mccl>(getRank(), type,
                                          std::string(op) + " on rank " + std::to_string(getRank()),
                                          std::move(outputs), op_timeout());
  w->record_failure_in(first_error_);
  if (coalescing_)
    coalesced_.push_back(w);
  return w;
}

void process_group_mccl::startCoalescing() {
  if (coalescing_)
    throw error(errc::invalid_argument, "startCoalescing on rank " + std::to_string(getRank())
                                          + ": this group is coalescing already (endCoalescing first)");
  coalescing_ = true;
  coalesced_.clear();
}

process_group_mccl::work_ptr process_group_mccl::endCoalescing() {
  if (!coalescing_)
    throw error(errc::invalid_argument, "endCoalescing on rank " + std::to_string(getRank())
                                          + ": startCoalescing was not called");
  coalescing_ = false;
  auto children = std::move(coalesced_);
  coalesced_.clear();
  auto w = make_work(OpType::COALESCED, "coalesced ops", {}, /*counted=*/false);
  w->track_children(children);
  return w;
}

void process_group_mccl::abort() {
  if (comm_.valid())
    comm_.abort("abort_process_group called on rank " + std::to_string(getRank()));
}

::c10d::ErrorType process_group_mccl::getError() {
  return static_cast<::c10d::ErrorType>(first_error_->load());
}

c10::intrusive_ptr<::c10d::Backend> process_group_mccl::shrink(
  const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
  const c10::intrusive_ptr<Options>& opts_override) {
  const std::string where = "shrink on rank " + std::to_string(getRank());
  // torch's SHRINK_DEFAULT and SHRINK_ABORT (distributed_c10d.py).
  constexpr int shrink_abort = 0x01;
  if (shrink_flags & ~shrink_abort)
    throw error(errc::invalid_argument, where + ": unknown shrink_flags " + std::to_string(shrink_flags)
                                          + " (SHRINK_DEFAULT 0 or SHRINK_ABORT 1)");
  if (opts_override)
    throw error(errc::invalid_argument,
                where + ": mccl takes no pg_options here; the new group keeps this group's mccl "
                        "settings (set others with mccl.init before creating the parent group)");
  if (!comm_.valid())
    throw error(errc::invalid_argument, where + ": this group was shut down");
  std::vector<int> excluded;
  for (int64_t r : ranks_to_exclude) {
    if (r < 0 || r >= getSize())
      throw error(errc::invalid_argument, where + ": excluded rank " + std::to_string(r)
                                            + " is outside this group of " + std::to_string(getSize())
                                            + " ranks");
    excluded.push_back(static_cast<int>(r));
  }
  if (shrink_flags & shrink_abort)
    comm_.abort("shrink_group(SHRINK_ABORT) called on rank " + std::to_string(getRank()));
  auto sub = comm_.shrink(excluded);
  return c10::make_intrusive<process_group_mccl>(made_from_parent{}, runtime_, std::move(sub));
}

void process_group_mccl::setTimeout(std::chrono::milliseconds timeout) {
  if (!comm_.valid())
    throw error(errc::invalid_argument, "set_timeout on rank " + std::to_string(getRank())
                                          + ": this group was shut down");
  comm_.set_timeout(timeout); // checks the range, naming MCCL_TIMEOUT_MS
  op_timeout_ms_ = timeout.count();
}

c10::intrusive_ptr<::c10d::Backend::Options> process_group_mccl::getBackendOptions() {
  auto o = c10::make_intrusive<Options>("mccl", op_timeout());
  o->group_name = getGroupUid();
  o->group_desc = getGroupDesc();
  return o;
}

namespace {

/// The same 64-bit value on every rank for the same list in the same order
/// (FNV-1a over the length and the ranks).
int64_t fingerprint(const std::vector<int>& ranks) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(ranks.size());
  for (int r : ranks)
    mix(static_cast<uint64_t>(static_cast<uint32_t>(r)));
  return static_cast<int64_t>(h & 0x7fffffffffffffffull);
}

std::string list_text(const std::vector<int>& ranks) {
  std::string out = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i)
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

/// Runs `fn` without the GIL when this thread holds it: a split blocks
/// while the ranks meet and connect, and Python's other threads (and mccl
/// threads that release Python objects) must not wait on it meanwhile.
template <class F>
auto without_gil(F&& fn) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    struct relock {
      PyThreadState* state;
      ~relock() { PyEval_RestoreThread(state); }
    } guard{PyEval_SaveThread()};
    return fn();
  }
  return fn();
}

} // namespace

c10::intrusive_ptr<::c10d::Backend> process_group_mccl::split(const c10::intrusive_ptr<::c10d::Store>&,
                                                              const std::vector<int>& ranks,
                                                              const c10::intrusive_ptr<Options>& opts) {
  const std::string where = "split on rank " + std::to_string(getRank());
  if (!comm_.valid())
    throw error(errc::invalid_argument, where + ": this group was shut down");
  if (opts && opts->backend != "mccl")
    throw error(errc::invalid_argument, where + ": the options are " + opts->backend
                                          + "'s; mccl takes its own (the parent's options, or none)");
  // A malformed list is this rank's mistake, but the split is collective:
  // the rank still takes part (as a member of no group), so the others do
  // not wait for it until their deadline, then raises.
  std::string bad;
  std::vector<bool> seen(static_cast<std::size_t>(getSize()), false);
  if (ranks.empty())
    bad = "the list of ranks is empty";
  for (int r : ranks) {
    if (!bad.empty())
      break;
    if (r < 0 || r >= getSize())
      bad = "rank " + std::to_string(r) + " is outside this group of " + std::to_string(getSize()) + " ranks";
    else if (seen[static_cast<std::size_t>(r)])
      bad = "rank " + std::to_string(r) + " is listed twice";
    else
      seen[static_cast<std::size_t>(r)] = true;
  }
  auto mine = std::find(ranks.begin(), ranks.end(), getRank());
  bool member = bad.empty() && mine != ranks.end();
  // Groups do not overlap, so each group's smallest rank names it; the
  // position in the list orders the new group (torch's group ranks, as
  // gloo's split orders them).
  int color = member ? *std::min_element(ranks.begin(), ranks.end()) : -1;
  int key = member ? static_cast<int>(mine - ranks.begin()) : 0;
  auto sub = without_gil([&] { return comm_.split(color, key); });
  if (!bad.empty())
    throw error(errc::invalid_argument, where + ": " + bad + " (ranks " + list_text(ranks) + ")");
  if (!member)
    return nullptr;
  // Each member learns every member's rank here and list: all of them see
  // the same answer, so they all fail or all succeed.
  std::vector<int64_t> me{getRank(), fingerprint(ranks)};
  std::vector<int64_t> all(2 * static_cast<std::size_t>(sub.size()));
  std::string mismatch;
  try {
    without_gil([&] { sub.allgather(me.data(), all.data(), 2, dtype::int64).wait(); });
  } catch (...) {
    sub.finalize();
    throw;
  }
  std::vector<int> joined;
  for (int i = 0; i < sub.size(); ++i)
    joined.push_back(static_cast<int>(all[2 * i]));
  for (int i = 0; i < sub.size() && mismatch.empty(); ++i)
    if (all[2 * i + 1] != all[1])
      mismatch = "rank " + std::to_string(joined[i]) + " passed another list of ranks than rank "
                 + std::to_string(joined[0]) + " (every member passes the same list)";
  if (mismatch.empty() && joined != ranks) {
    std::string missing;
    for (int r : ranks)
      if (std::find(joined.begin(), joined.end(), r) == joined.end())
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    mismatch = "the new group " + list_text(ranks) + " was joined by ranks " + list_text(joined)
               + (missing.empty() ? "" : "; rank(s) " + missing + " did not join it")
               + " (every rank of the group calls split, each listed rank with this list)";
  }
  if (!mismatch.empty()) {
    sub.finalize();
    throw error(errc::invalid_argument, where + ": " + mismatch);
  }
  // The group's timeout is the new group's op deadline unless
  // MCCL_TIMEOUT_MS was set, as for a group torch creates.
  if (opts && opts->timeout.count() > 0 && !mccl::process::explicit_settings().values().count("MCCL_TIMEOUT_MS")
      && !std::getenv("MCCL_TIMEOUT_MS"))
    sub.set_timeout(std::chrono::duration_cast<std::chrono::milliseconds>(opts->timeout));
  return c10::make_intrusive<process_group_mccl>(made_from_parent{}, runtime_, std::move(sub));
}

// ---- collectives on one tensor -------------------------------------------

process_group_mccl::work_ptr process_group_mccl::broadcast(tensors& ts, const ::c10d::BroadcastOptions& opts) {
  op_context ctx{"broadcast", getRank()};
  check_count(ts, 1, ctx);
  check_tensor(ts[0], ctx);
  auto buf = stage(ts[0]);
  auto w = make_work(OpType::BROADCAST, ctx.op, ts);
  auto part = comm_.broadcast(buf.data(), buf.count(), to_mccl(ts[0].scalar_type(), ctx),
                              static_cast<int>(opts.rootRank));
  w->track({part}, [buf] { buf.write_back(); });
  return w;
}

process_group_mccl::work_ptr process_group_mccl::allreduce(tensors& ts, const ::c10d::AllreduceOptions& opts) {
  op_context ctx{"allreduce", getRank()};
  check_count(ts, 1, ctx);
  if (ts[0].defined() && ts[0].layout() == at::kSparse)
    return allreduce_sparse_coo(ts[0], opts);
  check_tensor(ts[0], ctx);
  auto buf = stage(ts[0]);
  auto op = to_mccl(opts.reduceOp, ctx);
  auto w = make_work(OpType::ALLREDUCE, ctx.op, ts);
  auto part = comm_.allreduce(buf.data(), buf.count(), to_mccl(ts[0].scalar_type(), ctx), op);
  w->track({part}, [buf] { buf.write_back(); });
  return w;
}

process_group_mccl::work_ptr process_group_mccl::allreduce_sparse_coo(const at::Tensor& t,
                                                                      const ::c10d::AllreduceOptions& opts) {
  op_context ctx{"allreduce", getRank()};
  if (!t.device().is_cpu())
    ctx.fail(errc::unsupported, "the sparse tensor is on " + t.device().str() + "; mccl handles CPU tensors only");
  if (opts.reduceOp != ::c10d::ReduceOp::SUM)
    ctx.fail(errc::unsupported, "a sparse tensor is reduced with SUM only (its missing elements are zeros)");
  auto input = t.coalesce();
  auto values = input._values().contiguous();          // [nnz, dense sizes...]
  auto index_rows = input._indices().t().contiguous(); // [nnz, sparse_dim]
  auto value_type = to_mccl(values.scalar_type(), ctx);
  auto world = static_cast<std::size_t>(getSize());

  // Every rank's nnz and shape, in the call: the gathers below need the
  // counts. A rank whose tensor has another rank count fails here as a
  // count mismatch; one with other sizes is named below.
  std::vector<int64_t> mine{input._nnz(), input.sparse_dim(), input.dense_dim()};
  for (auto size : t.sizes())
    mine.push_back(size);
  std::vector<int64_t> all(mine.size() * world);
  comm_.allgather(mine.data(), all.data(), mine.size(), dtype::int64).wait();
  auto describe = [](const int64_t* shape, std::size_t n) {
    std::string s = "sparse_dim " + std::to_string(shape[1]) + ", dense_dim " + std::to_string(shape[2])
                    + ", sizes [";
    for (std::size_t i = 3; i < n; ++i)
      s += (i > 3 ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  };
  int64_t total = 0;
  std::vector<int64_t> nnz(world);
  for (std::size_t r = 0; r < world; ++r) {
    const int64_t* theirs = all.data() + r * mine.size();
    if (!std::equal(mine.begin() + 1, mine.end(), theirs + 1))
      ctx.fail(errc::invalid_argument, "rank " + std::to_string(r) + "'s sparse tensor has "
                                         + describe(theirs, mine.size()) + "; this rank's has "
                                         + describe(mine.data(), mine.size()));
    nnz[r] = theirs[0];
    total += theirs[0];
  }
  int64_t sparse_dim = input.sparse_dim();
  int64_t row = 1; // elements per value: the dense dimensions
  for (auto size : values.sizes().slice(1))
    row *= size;
  std::vector<std::size_t> index_counts(world), value_counts(world);
  for (std::size_t r = 0; r < world; ++r) {
    index_counts[r] = static_cast<std::size_t>(nnz[r] * sparse_dim);
    value_counts[r] = static_cast<std::size_t>(nnz[r] * row);
  }
  auto gathered_rows = at::empty({total, sparse_dim}, index_rows.options());
  auto value_shape = values.sizes().vec();
  value_shape[0] = total;
  auto gathered_values = at::empty(value_shape, values.options());
  auto w = make_work(OpType::ALLREDUCE, ctx.op, {t});
  auto indices_part = comm_.allgatherv(index_rows.data_ptr(), gathered_rows.data_ptr(), index_counts, dtype::int64);
  auto values_part = comm_.allgatherv(values.data_ptr(), gathered_values.data_ptr(), value_counts, value_type);
  w->track({indices_part, values_part}, [t, index_rows, values, gathered_rows, gathered_values] {
    // Coalescing sums the values of equal indices: the reduction.
    auto sum = at::sparse_coo_tensor(gathered_rows.t(), gathered_values, t.sizes()).coalesce();
    t.copy_(sum);
  });
  return w;
}

process_group_mccl::work_ptr process_group_mccl::allreduce_compressed(
  tensors& ts, const std::string& compression, const std::string& op_name, double topk_ratio,
  bool error_feedback, uint64_t topk_key) {
  op_context ctx{"allreduce", getRank()};
  check_count(ts, 1, ctx);
  check_tensor(ts[0], ctx);
  mccl::op_options options;
  if (compression == "fp16")
    options.compression = compression_kind::fp16;
  else if (compression == "bf16")
    options.compression = compression_kind::bf16;
  else if (compression == "topk")
    options.compression = compression_kind::topk;
  else if (compression == "none")
    options.compression = compression_kind::none;
  else
    ctx.fail(errc::invalid_argument, "compression \"" + compression
                                       + "\": expected fp16, bf16, topk or none");
  if (topk_ratio != 0)
    options.topk_ratio = topk_ratio;
  options.error_feedback = error_feedback;
  options.topk_key = topk_key;
  redop op = redop::sum;
  if (op_name == "avg")
    op = redop::avg;
  else if (op_name != "sum")
    ctx.fail(errc::invalid_argument, "op \"" + op_name + "\": expected sum or avg");
  auto buf = stage(ts[0]);
  auto w = make_work(OpType::ALLREDUCE, ctx.op, ts);
  auto part = comm_.allreduce(buf.data(), buf.data(), buf.count(), to_mccl(ts[0].scalar_type(), ctx),
                              op, options);
  w->track({part}, [buf] { buf.write_back(); });
  return w;
}

process_group_mccl::work_ptr process_group_mccl::allreduce_coalesced(
  tensors& ts, const ::c10d::AllreduceCoalescedOptions& opts) {
  op_context ctx{"allreduce_coalesced", getRank()};
  if (ts.empty())
    ctx.fail(errc::invalid_argument, "the tensor list is empty");
  check_same_dtype(ts, ctx, "tensor list");
  auto op = to_mccl(opts.reduceOp, ctx);
  // One op over the concatenation: one round of latency instead of one per tensor.
  auto flat = flatten(ts);
  auto w = make_work(OpType::ALLREDUCE_COALESCED, ctx.op, ts);
  auto part = comm_.allreduce(flat.data_ptr(), static_cast<std::size_t>(flat.numel()),
                              to_mccl(flat.scalar_type(), ctx), op);
  w->track({part}, [flat, outs = ts] { unflatten_into(flat, outs); });
  return w;
}

process_group_mccl::work_ptr process_group_mccl::reduce(tensors& ts, const ::c10d::ReduceOptions& opts) {
  op_context ctx{"reduce", getRank()};
  check_count(ts, 1, ctx);
  check_tensor(ts[0], ctx);
  auto buf = stage(ts[0]);
  auto op = to_mccl(opts.reduceOp, ctx);
  int root = static_cast<int>(opts.rootRank);
  auto w = make_work(OpType::REDUCE, ctx.op, ts);
  auto part = comm_.reduce(buf.data(), buf.data(), buf.count(), to_mccl(ts[0].scalar_type(), ctx), op, root);
  w->track({part}, [buf] { buf.write_back(); });
  return w;
}

// ---- gathers and scatters ---------------------------------------------------

process_group_mccl::work_ptr process_group_mccl::allgather(std::vector<tensors>& outs, tensors& ins,
                                                           const ::c10d::AllgatherOptions&) {
  op_context ctx{"allgather", getRank()};
  check_count(ins, 1, ctx, "input list");
  check_tensor(ins[0], ctx, "input");
  if (outs.size() != 1)
    ctx.fail(errc::invalid_argument, "expected one output list, got " + std::to_string(outs.size()));
  check_count(outs[0], static_cast<std::size_t>(getSize()), ctx, "output list");
  for (const auto& o : outs[0])
    check_like(o, ins[0], ctx, "an output tensor");
  auto in = ins[0].contiguous();
  auto flat = at::empty({in.numel() * getSize()}, in.options());
  auto w = make_work(OpType::ALLGATHER, ctx.op, outs[0]);
  auto part = comm_.allgather(in.data_ptr(), flat.data_ptr(), static_cast<std::size_t>(in.numel()),
                              to_mccl(in.scalar_type(), ctx));
  w->track({part}, [in, flat, o = outs[0]] { unflatten_into(flat, o); });
  return w;
}

process_group_mccl::work_ptr process_group_mccl::_allgather_base(at::Tensor& out, at::Tensor& in,
                                                                 const ::c10d::AllgatherOptions&) {
  op_context ctx{"_allgather_base", getRank()};
  check_tensor(in, ctx, "input");
  check_tensor(out, ctx, "output");
  if (out.scalar_type() != in.scalar_type() || out.numel() != in.numel() * getSize())
    ctx.fail(errc::invalid_argument, "the output must hold world size (" + std::to_string(getSize())
                                       + ") x " + std::to_string(in.numel()) + " elements of the input's dtype; it has "
                                       + std::to_string(out.numel()) + " of " + c10::toString(out.scalar_type()));
  auto src = in.contiguous();
  auto buf = stage(out);
  auto w = make_work(OpType::_ALLGATHER_BASE, ctx.op, {out});
  auto part = comm_.allgather(src.data_ptr(), buf.data(), static_cast<std::size_t>(src.numel()),
                              to_mccl(src.scalar_type(), ctx));
  w->track({part}, [src, buf] { buf.write_back(); });
  return w;
}

process_group_mccl::work_ptr process_group_mccl::allgather_coalesced(std::vector<tensors>& outs, tensors& ins,
                                                                     const ::c10d::AllgatherOptions&) {
  // torch's layout: outs[r][i] receives rank r's ins[i].
  op_context ctx{"allgather_coalesced", getRank()};
  if (ins.empty())
    ctx.fail(errc::invalid_argument, "the input list is empty");
  check_same_dtype(ins, ctx, "input list");
  if (outs.size() != static_cast<std::size_t>(getSize()))
    ctx.fail(errc::invalid_argument, "output_tensor_lists has " + std::to_string(outs.size())
                                       + " lists; it needs one per rank (" + std::to_string(getSize())
                                       + "), each with one tensor per input");
  for (auto& list : outs) {
    check_count(list, ins.size(), ctx, "an output list (one tensor per input)");
    for (std::size_t i = 0; i < ins.size(); ++i) {
      check_tensor(ins[i], ctx, "an input");
      check_like(list[i], ins[i], ctx, "an output tensor");
    }
  }
  // One allgather of the concatenated inputs: one round of latency
  // instead of one per tensor.
  auto flat = flatten(ins);
  auto gathered = at::empty({flat.numel() * getSize()}, flat.options());
  auto w_outs = std::vector<at::Tensor>{};
  for (auto& list : outs)
    w_outs.insert(w_outs.end(), list.begin(), list.end());
  auto w = make_work(OpType::ALLGATHER_COALESCED, ctx.op, w_outs);
  auto part = comm_.allgather(flat.data_ptr(), gathered.data_ptr(), static_cast<std::size_t>(flat.numel()),
                              to_mccl(flat.scalar_type(), ctx));
  w->track({part}, [flat, gathered, o = outs] {
    auto per_rank = flat.numel();
    for (std::size_t r = 0; r < o.size(); ++r)
      unflatten_into(gathered.narrow(0, static_cast<int64_t>(r) * per_rank, per_rank), o[r]);
  });
  return w;
}

process_group_mccl::work_ptr process_group_mccl::gather(std::vector<tensors>& outs, tensors& ins,
                                                        const ::c10d::GatherOptions& opts) {
  op_context ctx{"gather", getRank()};
  int root = static_cast<int>(opts.rootRank);
  check_count(ins, 1, ctx, "input list");
  check_tensor(ins[0], ctx, "input");
  bool is_root = root == getRank();
  if (is_root) {
    if (outs.size() != 1)
      ctx.fail(errc::invalid_argument, "the root needs one output list, got " + std::to_string(outs.size()));
    check_count(outs[0], static_cast<std::size_t>(getSize()), ctx, "output list");
    for (const auto& o : outs[0])
      check_like(o, ins[0], ctx, "an output tensor");
  } else if (!outs.empty()) {
    ctx.fail(errc::invalid_argument, "only the root (rank " + std::to_string(root) + ") takes output tensors");
  }
  auto in = ins[0].contiguous();
  at::Tensor flat = is_root ? at::empty({in.numel() * getSize()}, in.options()) : at::Tensor();
  auto w = make_work(OpType::GATHER, ctx.op, is_root ? outs[0] : tensors{});
  auto part = comm_.gather(in.data_ptr(), is_root ? flat.data_ptr() : nullptr,
                           static_cast<std::size_t>(in.numel()), to_mccl(in.scalar_type(), ctx), root);
  tensors targets = is_root ? outs[0] : tensors{};
  w->track({part}, [in, flat, targets] {
    if (flat.defined())
      unflatten_into(flat, targets);
  });
  return w;
}

process_group_mccl::work_ptr process_group_mccl::scatter(tensors& outs, std::vector<tensors>& ins,
                                                         const ::c10d::ScatterOptions& opts) {
  op_context ctx{"scatter", getRank()};
  int root = static_cast<int>(opts.rootRank);
  check_count(outs, 1, ctx, "output list");
  check_tensor(outs[0], ctx, "output");
  bool is_root = root == getRank();
  at::Tensor flat;
  if (is_root) {
    if (ins.size() != 1)
      ctx.fail(errc::invalid_argument, "the root needs one input list, got " + std::to_string(ins.size()));
    check_count(ins[0], static_cast<std::size_t>(getSize()), ctx, "input list");
    for (const auto& t : ins[0])
      check_like(t, outs[0], ctx, "an input tensor");
    flat = flatten(ins[0]);
  } else if (!ins.empty()) {
    ctx.fail(errc::invalid_argument, "only the root (rank " + std::to_string(root) + ") takes input tensors");
  }
  auto buf = stage(outs[0]);
  auto w = make_work(OpType::SCATTER, ctx.op, outs);
  auto part = comm_.scatter(is_root ? flat.data_ptr() : nullptr, buf.data(), buf.count(),
                            to_mccl(outs[0].scalar_type(), ctx), root);
  w->track({part}, [flat, buf] { buf.write_back(); });
  return w;
}

process_group_mccl::work_ptr process_group_mccl::reduce_scatter(tensors& outs, std::vector<tensors>& ins,
                                                                const ::c10d::ReduceScatterOptions& opts) {
  op_context ctx{"reduce_scatter", getRank()};
  check_count(outs, 1, ctx, "output list");
  check_tensor(outs[0], ctx, "output");
  if (ins.size() != 1)
    ctx.fail(errc::invalid_argument, "expected one input list, got " + std::to_string(ins.size()));
  check_count(ins[0], static_cast<std::size_t>(getSize()), ctx, "input list");
  for (const auto& t : ins[0])
    check_like(t, outs[0], ctx, "an input tensor");
  auto op = to_mccl(opts.reduceOp, ctx);
  auto flat = flatten(ins[0]);
  auto buf = stage(outs[0]);
  auto w = make_work(OpType::REDUCE_SCATTER, ctx.op, outs);
  auto part = comm_.reduce_scatter(flat.data_ptr(), buf.data(), buf.count(),
                                   to_mccl(outs[0].scalar_type(), ctx), op);
  w->track({part}, [flat, buf] { buf.write_back(); });
  return w;
}

process_group_mccl::work_ptr process_group_mccl::_reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                                                                      const ::c10d::ReduceScatterOptions& opts) {
  op_context ctx{"_reduce_scatter_base", getRank()};
  check_tensor(in, ctx, "input");
  check_tensor(out, ctx, "output");
  if (out.scalar_type() != in.scalar_type() || in.numel() != out.numel() * getSize())
    ctx.fail(errc::invalid_argument, "the input must hold world size (" + std::to_string(getSize())
                                       + ") x " + std::to_string(out.numel()) + " elements of the output's dtype; it has "
                                       + std::to_string(in.numel()) + " of " + c10::toString(in.scalar_type()));
  auto op = to_mccl(opts.reduceOp, ctx);
  auto src = in.contiguous();
  auto buf = stage(out);
  auto w = make_work(OpType::_REDUCE_SCATTER_BASE, ctx.op, {out});
  auto part = comm_.reduce_scatter(src.data_ptr(), buf.data(), buf.count(), to_mccl(out.scalar_type(), ctx), op);
  w->track({part}, [src, buf] { buf.write_back(); });
  return w;
}

process_group_mccl::work_ptr process_group_mccl::allgather_into_tensor_coalesced(
  tensors& outputs, tensors& inputs, const ::c10d::AllgatherOptions&) {
  op_context ctx{"allgather_into_tensor_coalesced", getRank()};
  check_coalesced_pairs(inputs, outputs, /*outputs_gathered=*/true, getSize(), ctx);
  // One allgather of the concatenated inputs; rank r's block of the result
  // holds every input of rank r, in list order.
  auto flat = flatten(inputs);
  auto per_rank = flat.numel();
  auto gathered = at::empty({per_rank * getSize()}, flat.options());
  auto w = make_work(OpType::COALESCED, ctx.op, outputs);
  auto part = comm_.allgather(flat.data_ptr(), gathered.data_ptr(), static_cast<std::size_t>(per_rank),
                              to_mccl(flat.scalar_type(), ctx));
  w->track({part}, [flat, gathered, outs = outputs, world = getSize()] {
    int64_t offset = 0;
    for (const auto& out : outs) {
      auto n = out.numel() / world;
      auto blocks = gathered.view({world, -1}).narrow(1, offset, n);
      out.view({world, n}).copy_(blocks);
      offset += n;
    }
  });
  return w;
}

process_group_mccl::work_ptr process_group_mccl::reduce_scatter_tensor_coalesced(
  tensors& outputs, tensors& inputs, const ::c10d::ReduceScatterOptions& opts) {
  op_context ctx{"reduce_scatter_tensor_coalesced", getRank()};
  check_coalesced_pairs(inputs, outputs, /*outputs_gathered=*/false, getSize(), ctx);
  auto op = to_mccl(opts.reduceOp, ctx);
  // Regroup by destination rank: block r of the send buffer holds block r
  // of every input, in list order, so one reduce_scatter serves them all.
  int64_t per_rank = 0;
  for (const auto& out : outputs)
    per_rank += out.numel();
  auto world = getSize();
  auto send = at::empty({world, per_rank}, inputs[0].options());
  int64_t offset = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    auto n = outputs[i].numel();
    send.narrow(1, offset, n).copy_(inputs[i].reshape({world, n}));
    offset += n;
  }
  auto recv = at::empty({per_rank}, inputs[0].options());
  auto w = make_work(OpType::COALESCED, ctx.op, outputs);
  auto part = comm_.reduce_scatter(send.data_ptr(), recv.data_ptr(), static_cast<std::size_t>(per_rank),
                                   to_mccl(recv.scalar_type(), ctx), op);
  w->track({part}, [send, recv, outs = outputs] { unflatten_into(recv, outs); });
  return w;
}

// ---- all to all -------------------------------------------------------------

process_group_mccl::work_ptr process_group_mccl::alltoall_base(at::Tensor& out, at::Tensor& in,
                                                               std::vector<int64_t>& out_splits,
                                                               std::vector<int64_t>& in_splits,
                                                               const ::c10d::AllToAllOptions&) {
  op_context ctx{"alltoall_base", getRank()};
  check_tensor(in, ctx, "input");
  check_tensor(out, ctx, "output");
  if (out.scalar_type() != in.scalar_type())
    ctx.fail(errc::invalid_argument, "input and output dtypes differ");
  auto world = static_cast<std::size_t>(getSize());
  auto src = in.contiguous();
  auto buf = stage(out);
  auto dt = to_mccl(in.scalar_type(), ctx);
  auto w = make_work(OpType::ALLTOALL_BASE, ctx.op, {out});
  // Splits count rows of dim 0; mccl counts elements.
  auto split_counts = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* which) {
    std::vector<std::size_t> counts(world);
    int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    int64_t row = rows == 0 ? 0 : t.numel() / rows;
    if (splits.empty()) {
      if (rows % getSize() != 0)
        ctx.fail(errc::invalid_argument, std::string(which) + " dim 0 (" + std::to_string(rows)
                                           + ") is not divisible by the world size (" + std::to_string(getSize())
                                           + "); pass split sizes");
      std::fill(counts.begin(), counts.end(), static_cast<std::size_t>(rows / getSize() * row));
      return counts;
    }
    if (splits.size() != world)
      ctx.fail(errc::invalid_argument, std::string(which) + " split sizes have " + std::to_string(splits.size())
                                         + " entries; expected one per rank (" + std::to_string(world) + ")");
    int64_t total = 0;
    for (std::size_t i = 0; i < world; ++i) {
      if (splits[i] < 0)
        ctx.fail(errc::invalid_argument, std::string(which) + " split size " + std::to_string(i) + " is negative");
      total += splits[i];
      counts[i] = static_cast<std::size_t>(splits[i] * row);
    }
    if (total != rows)
      ctx.fail(errc::invalid_argument, std::string(which) + " split sizes add up to " + std::to_string(total)
                                         + " but dim 0 has " + std::to_string(rows) + " rows");
    return counts;
  };
  auto send_counts = split_counts(src, in_splits, "input");
  auto recv_counts = split_counts(buf.buffer, out_splits, "output");
  auto part = comm_.alltoallv(src.data_ptr(), send_counts, buf.data(), recv_counts, dt);
  w->track({part}, [src, buf] { buf.write_back(); });
  return w;
}

process_group_mccl::work_ptr process_group_mccl::alltoall(tensors& outs, tensors& ins,
                                                          const ::c10d::AllToAllOptions&) {
  op_context ctx{"alltoall", getRank()};
  auto world = static_cast<std::size_t>(getSize());
  check_count(ins, world, ctx, "input list");
  check_count(outs, world, ctx, "output list");
  check_same_dtype(ins, ctx, "input list");
  check_same_dtype(outs, ctx, "output list");
  if (ins[0].scalar_type() != outs[0].scalar_type())
    ctx.fail(errc::invalid_argument, "input and output dtypes differ");
  auto send = flatten(ins);
  auto recv_counts = counts_of(outs);
  auto total = std::accumulate(recv_counts.begin(), recv_counts.end(), std::size_t{0});
  auto recv = at::empty({static_cast<int64_t>(total)}, outs[0].options());
  auto w = make_work(OpType::ALLTOALL, ctx.op, outs);
  auto part = comm_.alltoallv(send.data_ptr(), counts_of(ins), recv.data_ptr(), recv_counts,
                              to_mccl(send.scalar_type(), ctx));
  w->track({part}, [send, recv, outs] { unflatten_into(recv, outs); });
  return w;
}

// ---- point to point and barrier ---------------------------------------------

process_group_mccl::work_ptr process_group_mccl::send(tensors& ts, int dst, int tag) {
  op_context ctx{"send", getRank()};
  check_count(ts, 1, ctx);
  check_tensor(ts[0], ctx);
  if (tag < 0)
    ctx.fail(errc::invalid_argument, "tag " + std::to_string(tag) + " is negative");
  auto src = ts[0].contiguous();
  auto w = make_work(OpType::SEND, ctx.op, ts);
  auto part = comm_.send(src.data_ptr(), static_cast<std::size_t>(src.numel()),
                         to_mccl(src.scalar_type(), ctx), dst, static_cast<uint32_t>(tag));
  w->track({part}, [src] {});
  return w;
}

process_group_mccl::work_ptr process_group_mccl::recv(tensors& ts, int src_rank, int tag) {
  op_context ctx{"recv", getRank()};
  check_count(ts, 1, ctx);
  check_tensor(ts[0], ctx);
  if (tag < 0)
    ctx.fail(errc::invalid_argument, "tag " + std::to_string(tag) + " is negative");
  auto buf = stage(ts[0]);
  auto w = make_work(OpType::RECV, ctx.op, ts);
  auto part = comm_.recv(buf.data(), buf.count(), to_mccl(ts[0].scalar_type(), ctx), src_rank,
                         static_cast<uint32_t>(tag));
  w->track({part}, [buf] { buf.write_back(); }, src_rank);
  return w;
}

process_group_mccl::work_ptr process_group_mccl::recvAnysource(tensors& ts, int tag) {
  op_context ctx{"recvAnysource", getRank()};
  check_count(ts, 1, ctx);
  check_tensor(ts[0], ctx);
  if (tag < 0)
    ctx.fail(errc::invalid_argument, "tag " + std::to_string(tag) + " is negative");
  auto buf = stage(ts[0]);
  auto type = to_mccl(ts[0].scalar_type(), ctx);
  auto w = make_work(OpType::RECVANYSOURCE, ctx.op, ts);
  // mccl receives from a named peer: probe until some peer has a message
  // of this tag, then receive from it. A thread per such receive keeps the
  // call asynchronous; it gives up at the op deadline like any op.
  std::thread([w, buf, type, tag, comm = comm_, deadline = std::chrono::steady_clock::now() + op_timeout(),
               what = ctx.prefix()]() mutable {
    try {
      auto pause = std::chrono::microseconds(20);
      for (;;) {
        auto ready = comm.probe(static_cast<uint32_t>(tag));
        if (!ready.empty()) {
          int src = ready.front();
          auto part = comm.recv(buf.data(), buf.count(), type, src, static_cast<uint32_t>(tag));
          w->track({part}, [buf] { buf.write_back(); }, src);
          return;
        }
        if (std::chrono::steady_clock::now() >= deadline)
          throw error(errc::timeout, what + "no rank sent a message with tag " + std::to_string(tag)
                                       + " before the op deadline (MCCL_TIMEOUT_MS)");
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(2000));
      }
    } catch (...) {
      w->fail_now(std::current_exception());
    }
  }).detach();
  return w;
}

process_group_mccl::work_ptr process_group_mccl::barrier(const ::c10d::BarrierOptions&) {
  auto w = make_work(OpType::BARRIER, "barrier", {});
  w->track({comm_.barrier()});
  return w;
}

namespace {
/// The tag of monitoredBarrier's messages: above INT32_MAX, so no tag that
/// torch's send/recv can pass (an int) collides with it.
constexpr uint32_t monitored_barrier_tag = 0x80000001u;
} // namespace

void process_group_mccl::monitoredBarrier(const ::c10d::BarrierOptions& opts, bool wait_all_ranks) {
  op_context ctx{"monitoredBarrier", getRank()};
  auto timeout = opts.timeout == ::c10d::kUnsetTimeout
                   ? op_timeout()
                   : std::chrono::duration_cast<std::chrono::milliseconds>(opts.timeout);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                    deadline - std::chrono::steady_clock::now()));
  };
  const std::string in_time = " in " + std::to_string(timeout.count()) + " ms";
  // The tokens outlive this call: a receive still posted when it gives up
  // lands later, into memory its completion callback keeps.
  auto tokens = std::make_shared<std::vector<uint8_t>>(static_cast<std::size_t>(getSize()) + 1);
  auto keep = [&tokens](const work& w) {
    w.on_complete([tokens] {});
    return w;
  };
  auto u8 = dtype::uint8;
  uint8_t* answer = tokens->data() + getSize(); // where a rank takes rank 0's answer
  if (getRank() != 0) {
    auto arrival = keep(comm_.send(tokens->data(), 1, u8, 0, monitored_barrier_tag));
    auto reply = keep(comm_.recv(answer, 1, u8, 0, monitored_barrier_tag));
    std::string cause = "rank 0 did not answer" + in_time;
    try {
      arrival.wait();
      if (reply.wait_for(left()))
        return;
    } catch (const error& e) {
      cause = e.what();
    }
    // The words torch's monitored_barrier users know from gloo.
    ctx.fail(errc::timeout, "Rank " + std::to_string(getRank())
                              + " successfully reached monitoredBarrier, but received errors while waiting for "
                                "send/recv from rank 0: "
                              + cause + " (rank 0 names the ranks that did not arrive)");
  }
  // Rank 0: every other rank's arrival, in rank order, within the timeout.
  // Without wait_all_ranks the first rank missing is the error; with it,
  // every rank that has not arrived by the deadline is named.
  std::vector<work> arrivals;
  for (int peer = 1; peer < getSize(); ++peer)
    arrivals.push_back(keep(comm_.recv(tokens->data() + peer, 1, u8, peer, monitored_barrier_tag)));
  std::vector<int> missing;
  std::string arrived;
  for (int peer = 1; peer < getSize(); ++peer) {
    auto& arrival = arrivals[peer - 1];
    if (!wait_all_ranks && !arrival.test() && left().count() == 0)
      ctx.fail(errc::timeout, "Rank 0 timed out in monitoredBarrier after " + std::to_string(timeout.count())
                                + " ms, before rank " + std::to_string(peer) + " arrived (ranks arrived: "
                                + (arrived.empty() ? "none" : arrived) + ")");
    bool on_time = false;
    std::string cause;
    try {
      on_time = arrival.wait_for(left());
    } catch (const error& e) {
      cause = std::string(": ") + e.what(); // lost or aborted: it did not arrive
    }
    if (on_time) {
      arrived += (arrived.empty() ? "" : ", ") + std::to_string(peer);
      continue;
    }
    if (!wait_all_ranks)
      ctx.fail(errc::timeout, "Rank " + std::to_string(peer) + " failed to pass monitoredBarrier" + in_time + cause);
    missing.push_back(peer);
  }
  if (!missing.empty()) {
    std::string names;
    for (int r : missing)
      names += (names.empty() ? "" : ", ") + std::to_string(r);
    ctx.fail(errc::timeout, std::string(missing.size() == 1 ? "Rank " : "Ranks ") + names
                              + " failed to pass monitoredBarrier" + in_time);
  }
  std::vector<work> answers;
  for (int peer = 1; peer < getSize(); ++peer)
    answers.push_back(keep(comm_.send(tokens->data(), 1, u8, peer, monitored_barrier_tag)));
  for (auto& a : answers)
    a.wait();
}

} // namespace mccl::torch_backend
