#pragma once
/// What a caller asked for: one collective op with its buffers. Shared by the
/// public API, the progress actor and the collective actors.

#include "actors/work.hpp"
#include "reducers/reduce.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace mccl {

enum class op_kind : uint8_t { allreduce, broadcast, barrier };

/// "allreduce", "broadcast", "barrier".
const char* to_string(op_kind kind) noexcept;

struct op_request {
  op_kind kind = op_kind::allreduce;
  const void* send = nullptr; ///< input; equals recv for in-place ops
  void* recv = nullptr;       ///< output (the data buffer for broadcast)
  std::size_t count = 0;      ///< elements
  dtype type = dtype::float32;
  redop op = redop::sum;
  int root = 0;
  uint64_t seq = 0; ///< assigned by the progress actor
  std::shared_ptr<work_state> work;

  std::size_t bytes() const noexcept { return count * dtype_size(type); }
  bool in_place() const noexcept { return send == recv; }
};

using op_ptr = std::shared_ptr<op_request>;

} // namespace mccl
