#pragma once
/// The c10d Work of one torch.distributed call: one or more mccl ops (a
/// coalesced call issues several), plus what to do once they are done
/// (copy results into non-contiguous or list outputs). Its future is a real
/// c10::ivalue::Future, completed from mccl's completion callback, so DDP
/// communication hooks can chain on it.

#include <mccl/communicator.hpp>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace mccl::torch_backend {

class work_mccl : public ::c10d::Work {
public:
  /// `outputs` are what result() and the future's value hold.
  work_mccl(int rank, ::c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
            std::chrono::milliseconds op_timeout);

  /// Starts watching `parts`; once all are done, runs `after` (copy-outs;
  /// only when every part succeeded), then completes this Work and its
  /// future. `source` is what sourceRank() reports (recv from any source).
  void track(std::vector<work> parts, std::function<void()> after = {}, int source = -1);

  /// Where a failure of this Work is recorded, as c10d::ErrorType, unless
  /// an earlier one was (the process group's getError()).
  void record_failure_in(std::shared_ptr<std::atomic<int>> slot) { error_slot_ = std::move(slot); }

  /// Completes once every work of `children` has, with the first failure
  /// among them (the Work endCoalescing returns: the ops issued between
  /// startCoalescing and endCoalescing). result() holds their outputs.
  void track_children(const std::vector<c10::intrusive_ptr<work_mccl>>& children);

  /// Blocks until done; kNoTimeout still returns or throws within the op's
  /// deadline plus a grace period, so a caller never hangs.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  int sourceRank() const override;

  /// Completes with this failure (used when an op fails before any mccl op
  /// could be issued for it, e.g. recv from any source timing out).
  void fail_now(std::exception_ptr e);

private:
  void on_part_done();
  void complete(std::exception_ptr failure);

  std::string what_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds wait_bound_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::vector<work> parts_;
  std::function<void()> after_;
  std::atomic<std::size_t> remaining_{0};
  std::atomic<int> source_{-1};
  std::shared_ptr<std::atomic<int>> error_slot_;
  std::mutex child_failure_mutex_;
  std::exception_ptr child_failure_;
};

} // namespace mccl::torch_backend
