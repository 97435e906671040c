#pragma once
/// ProcessGroupMCCL: torch.distributed's view of one mccl communicator, a
/// c10d::Backend (torch 2.x) that torch's ProcessGroup dispatches CPU
/// tensors to. Each call checks its tensors, stages non-contiguous ones
/// through contiguous buffers, issues mccl ops and returns a work_mccl.

#include <mccl/communicator.hpp>
#include "work_mccl.hpp"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

namespace mccl::torch_backend {

class process_group_mccl : public ::c10d::Backend {
public:
  /// Connects to the other `size` ranks through `store` (blocks until all
  /// are connected, bounded by MCCL_CONNECT_TIMEOUT_MS). `timeout` is the
  /// process group's and becomes the op deadline unless MCCL_TIMEOUT_MS is
  /// set (from Python or the environment). `group_name` tells communicators
  /// apart in logs and frames.
  process_group_mccl(const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout, const std::string& group_name);
  ~process_group_mccl() override;

  const std::string getBackendName() const override { return "mccl"; }

  /// The op deadline this group's ops issued now run under.
  std::chrono::milliseconds op_timeout() const { return std::chrono::milliseconds(op_timeout_ms_.load()); }

  /// ProcessGroup.set_timeout: the op deadline of this rank's ops issued
  /// from now on (mccl's communicator::set_timeout; ops in flight keep
  /// theirs). It beats MCCL_TIMEOUT_MS, which only chose the deadline the
  /// group started with. 1 ms to 24 h, else mccl.InvalidArgumentError.
  void setTimeout(std::chrono::milliseconds timeout) override;

  /// Backend.options: "mccl", this group's current op deadline and torch's
  /// group name; ProcessGroup.split_group clones it for the new group when
  /// given no options.
  c10::intrusive_ptr<Options> getBackendOptions() override;

  /// Closes this group's communicator; later ops fail with "finalized".
  void shutdown() override;

  using tensors = std::vector<at::Tensor>;
  using work_ptr = c10::intrusive_ptr<::c10d::Work>;

  work_ptr broadcast(tensors& ts, const ::c10d::BroadcastOptions& opts) override;
  /// A sparse (COO) CPU tensor, which torch hands this call as it does
  /// gloo's, is summed too: each rank's shape (nnz, dims, sizes) is
  /// exchanged in the call, then every rank's indices and values are
  /// gathered and the sum is coalesced into the tensor (SUM only).
  work_ptr allreduce(tensors& ts, const ::c10d::AllreduceOptions& opts) override;
  /// allreduce of one tensor whose float32 payload travels as `compression`
  /// ("fp16", "bf16", "topk" or "none"; mccl::op_options), with redop `op`
  /// ("sum" or "avg"); topk_ratio 0 means MCCL_TOPK_RATIO. What mccl's DDP
  /// communication hooks call (python/mccl/hooks.py).
  work_ptr allreduce_compressed(tensors& ts, const std::string& compression, const std::string& op,
                                double topk_ratio, bool error_feedback, uint64_t topk_key);
  work_ptr allreduce_coalesced(tensors& ts, const ::c10d::AllreduceCoalescedOptions& opts) override;
  work_ptr reduce(tensors& ts, const ::c10d::ReduceOptions& opts) override;
  work_ptr allgather(std::vector<tensors>& outs, tensors& ins,
                     const ::c10d::AllgatherOptions& opts) override;
  work_ptr _allgather_base(at::Tensor& out, at::Tensor& in,
                           const ::c10d::AllgatherOptions& opts) override;
  work_ptr allgather_coalesced(std::vector<tensors>& outs, tensors& ins,
                               const ::c10d::AllgatherOptions& opts) override;
  work_ptr gather(std::vector<tensors>& outs, tensors& ins, const ::c10d::GatherOptions& opts) override;
  work_ptr scatter(tensors& outs, std::vector<tensors>& ins, const ::c10d::ScatterOptions& opts) override;
  work_ptr reduce_scatter(tensors& outs, std::vector<tensors>& ins,
                          const ::c10d::ReduceScatterOptions& opts) override;
  work_ptr _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                                const ::c10d::ReduceScatterOptions& opts) override;
  work_ptr alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_splits,
                         std::vector<int64_t>& in_splits, const ::c10d::AllToAllOptions& opts) override;
  work_ptr alltoall(tensors& outs, tensors& ins, const ::c10d::AllToAllOptions& opts) override;
  work_ptr send(tensors& ts, int dst, int tag) override;
  work_ptr recv(tensors& ts, int src, int tag) override;
  work_ptr recvAnysource(tensors& ts, int tag) override;
  work_ptr barrier(const ::c10d::BarrierOptions& opts) override;

  /// outputs[i] receives every rank's inputs[i], in rank order: one mccl
  /// allgather of the concatenated inputs.
  work_ptr allgather_into_tensor_coalesced(tensors& outputs, tensors& inputs,
                                           const ::c10d::AllgatherOptions& opts) override;
  /// outputs[i] receives this rank's block of the reduction of inputs[i]:
  /// one mccl reduce_scatter over the inputs' blocks regrouped by rank.
  work_ptr reduce_scatter_tensor_coalesced(tensors& outputs, tensors& inputs,
                                           const ::c10d::ReduceScatterOptions& opts) override;

  /// Rank 0 waits up to opts.timeout for every other rank, then answers
  /// each; a rank that did not arrive is named in rank 0's error (all of
  /// them with `wait_all_ranks`, else the first). Other ranks fail when
  /// rank 0 does not answer in time.
  void monitoredBarrier(const ::c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  /// Ops issued between startCoalescing and endCoalescing run as they are
  /// issued (mccl pipelines them); endCoalescing's Work completes when all
  /// have. How batch_isend_irecv and _coalescing_manager use a backend.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  work_ptr endCoalescing() override;

  /// The number of ops issued on this group so far (each collective and
  /// point-to-point call counts one), equal on every rank that issued the
  /// same ops. torch's debug wrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL)
  /// compares it across ranks before each collective. It starts at 0, as
  /// gloo's does, so setting it is a no-op.
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }
  void setSequenceNumberForGroup() override {}

  /// Fails every op in flight and later ones, on every rank, naming this
  /// rank (torch's abort_process_group).
  void abort() override;

  /// TIMEOUT, REMOTE_ERROR (a peer was lost or aborted) or COMM_ERROR for
  /// the first op of this group that failed; SUCCESS while none has.
  ::c10d::ErrorType getError() override;

  /// dist.shrink_group: a new group of this group's ranks without
  /// `ranks_to_exclude` (ranks of this group), over mccl's communicator
  /// shrink. Only the survivors call it; they meet in this group's store
  /// (torch's: with tcp:// or env:// it is served by global rank 0's
  /// process, so that rank must survive; a file:// store outlives any
  /// rank). Blocks until every survivor has connected, bounded by
  /// MCCL_CONNECT_TIMEOUT_MS. SHRINK_ABORT (flag 1) first aborts this
  /// group's ops in flight. The new group keeps this one's settings; torch
  /// options (opts_override) are refused.
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<::c10d::Backend> shrink(const std::vector<int64_t>& ranks_to_exclude,
                                             int shrink_flags,
                                             const c10::intrusive_ptr<Options>& opts_override) override;

  /// ProcessGroup.split_group (the call torch 2.13's dist.split_group
  /// makes): the ranks of this group in `ranks` (group ranks, in the new
  /// group's order) form a new group over mccl's communicator split; a
  /// rank not in `ranks` gets null. Collective over this group: every rank
  /// calls it, each with the ranks of its own new group (a rank in none
  /// passes any list without itself), and the lists of different groups
  /// do not overlap. Before returning, the members of each new group
  /// compare their lists: a rank whose list differs, or a listed rank that
  /// did not join, fails every member with an error naming it. A rank with
  /// a malformed list (empty, out of range, duplicates) still takes part,
  /// as a rank in no group, then raises naming its list. The new group
  /// keeps this one's mccl settings; its op deadline is opts->timeout
  /// unless MCCL_TIMEOUT_MS is set (as for a group torch creates). `store`
  /// is not used: the groups meet in this group's rendezvous store.
  /// Bounded by MCCL_TIMEOUT_MS (the exchange of colors) and
  /// MCCL_CONNECT_TIMEOUT_MS (connecting the new group).
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<::c10d::Backend> split(const c10::intrusive_ptr<::c10d::Store>& store,
                                            const std::vector<int>& ranks,
                                            const c10::intrusive_ptr<Options>& opts) override;

private:
  struct made_from_parent {};

public:
  /// A group over a communicator made from another (only shrink and split
  /// can call it: the key type is private).
  process_group_mccl(made_from_parent, std::shared_ptr<runtime> rt, communicator comm);

private:
  /// A Work for one call; `counted`: the call is an op of its own (the
  /// Work endCoalescing returns is not), so the sequence number moves.
  c10::intrusive_ptr<work_mccl> make_work(::c10d::OpType type, const char* op, tensors outputs,
                                          bool counted = true);
  work_ptr allreduce_sparse_coo(const at::Tensor& t, const ::c10d::AllreduceOptions& opts);

  std::shared_ptr<runtime> runtime_;
  communicator comm_;
  /// comm_.timeout(), kept here so a Work can be made without asking the
  /// communicator (which throws once it is shut down); set_timeout changes
  /// both, from any thread.
  std::atomic<int64_t> op_timeout_ms_{0};
  /// The first failed op's ErrorType (an int; SUCCESS while none failed),
  /// shared with the Works that report it.
  std::shared_ptr<std::atomic<int>> first_error_ = std::make_shared<std::atomic<int>>(0);
  std::atomic<uint64_t> seq_{0};
  /// The Works issued since startCoalescing; calls into one process group
  /// come from the thread that issues its ops, so no lock.
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<work_mccl>> coalesced_;
};

} // namespace mccl::torch_backend
