#include "api/communicator/communicator_impl.hpp"

#include "api/communicator/op_checks.hpp"
#include "config/log.hpp"

namespace mccl {

work communicator::impl::submit(op_ptr req, const op_options& opts) {
  auto& op = *req;
  if (finalized.load())
    throw error(errc::finalized,
                describe(op) + " on rank " + std::to_string(rank) + ": the communicator was finalized");
  if (core->revoked()) // described only then: describe() costs some 1,100 instructions an op
    refuse_if_revoked(describe(op));
  detail::check_op(op, rank, world);
  detail::resolve_compression(op, opts, cfg, rank, world);
  if (op.compression == compression_kind::topk && opts.error_feedback)
    op.residual = residual_for(opts.topk_key != 0 ? opts.topk_key
                                                  : reinterpret_cast<std::uintptr_t>(op.recv));
  op.timeout = op_timeout();
  auto state = std::make_shared<work_state>(op.timeout, op.kind == op_kind::custom ? op.name : to_string(op.kind),
                                            rt->metrics, core->idle_unit());
  work w(state);
  if (fault_report) {
    // The op's outcome goes to the fault report once it is done.
    std::weak_ptr<work_state> weak = state;
    state->add_callback([weak, report = fault_report, crc = cfg.transport_crc] {
      auto s = weak.lock();
      if (!s)
        return;
      auto m = s->metrics();
      auto failure = s->failure();
      report->op(m.op, m.algorithm, m.seq, !failure, failure ? failure->message() : "", crc,
                 std::chrono::duration<double, std::milli>(m.duration).count());
    });
  }
  core->submit(std::move(req), state);
  return w;
}

void communicator::impl::refuse_if_revoked(const std::string& what) const {
  if (core->revoked())
    throw error(errc::revoked, what + " on rank " + std::to_string(rank) + ": the communicator is "
                                 + core->why_revoked() + "; only shrink, split and finalize are accepted on a "
                                   "revoked communicator");
}

config_overrides communicator::impl::inherited_overrides() const {
  auto o = overrides;
  if (timeout_ms.load() > 0)
    o.set("MCCL_TIMEOUT_MS", static_cast<long long>(timeout_ms.load()));
  return o;
}

std::shared_ptr<std::vector<float>> communicator::impl::residual_for(uint64_t key) {
  std::lock_guard<std::mutex> guard{residual_mutex};
  auto& r = residuals[key];
  if (!r)
    r = std::make_shared<std::vector<float>>();
  return r;
}

void communicator::impl::finalize() {
  std::lock_guard<std::mutex> guard{finalize_mutex};
  if (finalized.exchange(true))
    return;
  if (core)
    core->finalize();
  store_server.reset();
  if (fault_report) {
    fault_report->write();
    MCCL_LOG(info, "rank " << rank << ": fault report written to " << fault_report->prefix()
                           << ".txt and .json");
  }
}

communicator::impl& communicator::checked() const {
  if (!impl_)
    throw error(errc::invalid_argument, "use of an empty communicator handle");
  return *impl_;
}

int communicator::rank() const { return checked().rank; }
int communicator::size() const { return checked().world; }
const config& communicator::settings() const { return checked().cfg; }
std::chrono::milliseconds communicator::timeout() const { return checked().op_timeout(); }

void communicator::set_timeout(std::chrono::milliseconds timeout) {
  auto& p = checked();
  // MCCL_TIMEOUT_MS's own range (config.cpp), so a deadline set here is
  // one the variable could have given.
  if (timeout.count() < 1 || timeout.count() > 86400000)
    throw error(errc::invalid_argument, "set_timeout on rank " + std::to_string(p.rank) + ": " + std::to_string(timeout.count())
                                          + " ms is outside MCCL_TIMEOUT_MS's range (1 to 86400000 ms)");
  p.timeout_ms.store(timeout.count());
  MCCL_LOG(info, "rank " << p.rank << " of communicator " << p.comm_id << ": op deadline set to "
                         << timeout.count() << " ms for the ops issued from now on");
}

namespace {

op_ptr request(op_kind kind, const void* send, void* recv, std::size_t count, dtype type,
               redop op = redop::sum, int root = 0) {
  auto r = std::make_shared<issued_op>();
  r->kind = kind;
  r->send = send;
  r->recv = recv;
  r->count = count;
  r->type = type;
  r->op = op;
  r->root = root;
  return r;
}

} // namespace

work communicator::allreduce(const void* send, void* recv, std::size_t count, dtype type, redop op,
                             const op_options& opts) {
  return checked().submit(request(op_kind::allreduce, send, recv, count, type, op), opts);
}

work communicator::broadcast(const void* send, void* recv, std::size_t count, dtype type, int root,
                             const op_options& opts) {
  return checked().submit(request(op_kind::broadcast, send, recv, count, type, redop::sum, root),
                          opts);
}

work communicator::reduce(const void* send, void* recv, std::size_t count, dtype type, redop op,
                          int root, const op_options& opts) {
  return checked().submit(request(op_kind::reduce, send, recv, count, type, op, root), opts);
}

work communicator::allgather(const void* send, void* recv, std::size_t count, dtype type,
                             const op_options& opts) {
  return checked().submit(request(op_kind::allgather, send, recv, count, type), opts);
}

work communicator::allgatherv(const void* send, void* recv, const std::vector<std::size_t>& counts,
                              dtype type, const op_options& opts) {
  auto r = request(op_kind::allgather, send, recv, 0, type);
  r->counts = counts;
  return checked().submit(std::move(r), opts);
}

work communicator::reduce_scatter(const void* send, void* recv, std::size_t count, dtype type,
                                  redop op, const op_options& opts) {
  return checked().submit(request(op_kind::reduce_scatter, send, recv, count, type, op), opts);
}

work communicator::reduce_scatterv(const void* send, void* recv,
                                   const std::vector<std::size_t>& counts, dtype type, redop op,
                                   const op_options& opts) {
  auto r = request(op_kind::reduce_scatter, send, recv, 0, type, op);
  r->counts = counts;
  return checked().submit(std::move(r), opts);
}

work communicator::gather(const void* send, void* recv, std::size_t count, dtype type, int root) {
  return checked().submit(request(op_kind::gather, send, recv, count, type, redop::sum, root));
}

work communicator::scatter(const void* send, void* recv, std::size_t count, dtype type, int root) {
  return checked().submit(request(op_kind::scatter, send, recv, count, type, redop::sum, root));
}

work communicator::alltoall(const void* send, void* recv, std::size_t count, dtype type) {
  return checked().submit(request(op_kind::alltoall, send, recv, count, type));
}

work communicator::alltoallv(const void* send, const std::vector<std::size_t>& send_counts,
                             void* recv, const std::vector<std::size_t>& recv_counts, dtype type) {
  auto r = request(op_kind::alltoall, send, recv, 0, type);
  r->counts = send_counts;
  r->recv_counts = recv_counts;
  return checked().submit(std::move(r));
}

work communicator::barrier() {
  return checked().submit(request(op_kind::barrier, nullptr, nullptr, 0, dtype::uint8));
}

work communicator::custom(const std::string& name, const void* send, void* recv, std::size_t count,
                          dtype type, redop op, int root) {
  auto r = request(op_kind::custom, send, recv, count, type, op, root);
  r->name = name;
  return checked().submit(std::move(r));
}

work communicator::send(const void* data, std::size_t count, dtype type, int peer, uint32_t tag) {
  auto r = request(op_kind::send, data, nullptr, count, type, redop::sum, peer);
  r->tag = tag;
  return checked().submit(std::move(r));
}

work communicator::recv(void* data, std::size_t count, dtype type, int peer, uint32_t tag) {
  auto r = request(op_kind::recv, nullptr, data, count, type, redop::sum, peer);
  r->tag = tag;
  return checked().submit(std::move(r));
}

std::vector<int> communicator::probe(uint32_t tag) {
  auto& p = checked();
  if (p.finalized.load())
    throw error(errc::finalized, "probe on rank " + std::to_string(p.rank)
                                   + ": the communicator was finalized");
  p.refuse_if_revoked("probe");
  return p.core->probe(tag);
}

void communicator::abort(const std::string& reason) {
  auto& p = checked();
  if (!p.finalized.load())
    p.core->abort(reason);
}

void communicator::revoke(const std::string& reason) {
  auto& p = checked();
  if (!p.finalized.load())
    p.core->revoke(reason);
}

bool communicator::revoked() const {
  auto& p = checked();
  return p.core && p.core->revoked();
}

void communicator::on_abort(std::function<void(const error&)> cb) {
  checked().core->on_abort(std::move(cb));
}

void communicator::finalize() {
  if (impl_)
    impl_->finalize();
}

} // namespace mccl
