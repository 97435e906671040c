#include "tensor_args.hpp"

#include <c10/util/Exception.h>

namespace mccl::torch_backend {

void op_context::fail(errc code, const std::string& why) const {
  throw error(code, prefix() + why);
}

dtype to_mccl(at::ScalarType t, const op_context& ctx) {
  switch (t) {
    case at::kFloat: return dtype::float32;
    case at::kDouble: return dtype::float64;
    case at::kHalf: return dtype::float16;
    case at::kBFloat16: return dtype::bfloat16;
    case at::kChar: return dtype::int8;
    case at::kByte: return dtype::uint8;
    case at::kInt: return dtype::int32;
    case at::kLong: return dtype::int64;
    case at::kBool: return dtype::boolean;
    case at::kShort: return dtype::int16;
    case at::kUInt16: return dtype::uint16;
    case at::kUInt32: return dtype::uint32;
    case at::kUInt64: return dtype::uint64;
    default: break;
  }
  ctx.fail(errc::unsupported, std::string("dtype ") + c10::toString(t)
                                + " is not supported (mccl has float32, float64, float16, "
                                  "bfloat16, int8, uint8, int16, uint16, int32, uint32, int64, "
                                  "uint64 and bool)");
}

redop to_mccl(const ::c10d::ReduceOp& op, const op_context& ctx) {
  switch (op.op_) {
    case ::c10d::ReduceOp::SUM: return redop::sum;
    case ::c10d::ReduceOp::AVG: return redop::avg;
    case ::c10d::ReduceOp::PRODUCT: return redop::prod;
    case ::c10d::ReduceOp::MIN: return redop::min;
    case ::c10d::ReduceOp::MAX: return redop::max;
    case ::c10d::ReduceOp::BAND: return redop::band;
    case ::c10d::ReduceOp::BOR: return redop::bor;
    case ::c10d::ReduceOp::BXOR: return redop::bxor;
    default: break;
  }
  ctx.fail(errc::unsupported, "ReduceOp " + std::to_string(static_cast<int>(op.op_))
                                + " (PREMUL_SUM or unknown) is not supported; mccl has SUM, AVG, "
                                  "PRODUCT, MIN, MAX, BAND, BOR and BXOR");
}

void check_tensor(const at::Tensor& t, const op_context& ctx, const char* what) {
  if (!t.defined())
    ctx.fail(errc::invalid_argument, std::string(what) + " is undefined");
  if (!t.device().is_cpu())
    ctx.fail(errc::unsupported, std::string(what) + " is on " + t.device().str()
                                  + "; mccl handles CPU tensors only (move it with .cpu(), or use "
                                    "the nccl backend for GPU tensors)");
  if (t.layout() != at::kStrided)
    ctx.fail(errc::unsupported, std::string(what) + " has layout " + c10::str(t.layout())
                                  + "; mccl handles dense (strided) tensors only");
  to_mccl(t.scalar_type(), ctx);
}

void check_count(const std::vector<at::Tensor>& ts, std::size_t n, const op_context& ctx,
                 const char* what) {
  if (ts.size() != n)
    ctx.fail(errc::invalid_argument, std::string(what) + " has " + std::to_string(ts.size())
                                       + " tensor(s); expected " + std::to_string(n));
}

void check_like(const at::Tensor& t, const at::Tensor& ref, const op_context& ctx, const char* what) {
  check_tensor(t, ctx, what);
  if (t.scalar_type() != ref.scalar_type())
    ctx.fail(errc::invalid_argument, std::string(what) + " has dtype " + c10::toString(t.scalar_type())
                                       + " but the input has " + c10::toString(ref.scalar_type()));
  if (t.numel() != ref.numel())
    ctx.fail(errc::invalid_argument, std::string(what) + " has " + std::to_string(t.numel())
                                       + " elements but the input has " + std::to_string(ref.numel()));
}

staged stage(const at::Tensor& t) {
  if (t.is_contiguous())
    return staged{t, t, false};
  return staged{t, t.contiguous(), true};
}

at::Tensor flatten(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  flat.reserve(ts.size());
  for (const auto& t : ts)
    flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

void unflatten_into(const at::Tensor& flat, const std::vector<at::Tensor>& outs) {
  int64_t offset = 0;
  for (const auto& o : outs) {
    o.copy_(flat.narrow(0, offset, o.numel()).view(o.sizes()));
    offset += o.numel();
  }
}

} // namespace mccl::torch_backend
