#pragma once
/// From torch arguments to mccl's: dtypes, reductions, and contiguous
/// buffers. Every check throws mccl::error naming the op and the rank, so a
/// Python caller sees which call was wrong and why.

#include <mccl/communicator.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <functional>
#include <string>
#include <vector>

namespace mccl::torch_backend {

/// Who is calling, for error messages: "allreduce on rank 1".
struct op_context {
  const char* op;
  int rank;
  std::string prefix() const { return std::string(op) + " on rank " + std::to_string(rank) + ": "; }
  [[noreturn]] void fail(errc code, const std::string& why) const;
};

/// The mccl dtype of a torch dtype; throws unsupported listing the ones mccl has.
dtype to_mccl(at::ScalarType t, const op_context& ctx);

/// The mccl reduction of a torch ReduceOp (AVG included; PREMUL_SUM is
/// refused as unsupported).
redop to_mccl(const ::c10d::ReduceOp& op, const op_context& ctx);

/// A dense CPU tensor, or an error saying what it is instead (CUDA, sparse).
void check_tensor(const at::Tensor& t, const op_context& ctx, const char* what = "tensor");

/// Exactly `n` tensors in the list.
void check_count(const std::vector<at::Tensor>& ts, std::size_t n, const op_context& ctx,
                 const char* what = "tensor list");

/// Same dtype and element count as `ref` (for the blocks of gather lists).
void check_like(const at::Tensor& t, const at::Tensor& ref, const op_context& ctx, const char* what);

/// A contiguous buffer standing for a user tensor. When the tensor is
/// already contiguous the buffer is the tensor itself; otherwise it is a
/// contiguous copy (`is_copy`), which write_back() copies into the tensor
/// once the op is done.
struct staged {
  at::Tensor user;
  at::Tensor buffer;
  bool is_copy = false;
  void* data() const { return buffer.data_ptr(); }
  std::size_t count() const { return static_cast<std::size_t>(buffer.numel()); }
  void write_back() const {
    if (is_copy)
      user.copy_(buffer);
  }
};

/// For a tensor the op reads (and, in place, writes).
staged stage(const at::Tensor& t);

/// The tensors of `ts`, flattened and concatenated into one contiguous 1-D
/// buffer (in list order).
at::Tensor flatten(const std::vector<at::Tensor>& ts);

/// Copies consecutive blocks of the 1-D buffer `flat` into `outs` (each
/// block as many elements as its output tensor).
void unflatten_into(const at::Tensor& flat, const std::vector<at::Tensor>& outs);

} // namespace mccl::torch_backend
