#pragma once
/// mccl's vocabulary: element types, reduction operators and who drove an
/// op. The numeric values of dtype and redop travel on the wire and in the
/// rendezvous store, so they never change once released.

#include <cstddef>
#include <cstdint>
#include <string>

namespace mccl {

/// Element type of a buffer. `boolean` is stored as one byte holding 0 or 1.
enum class dtype : uint8_t {
  float32,
  float64,
  float16,
  bfloat16,
  int8,
  uint8,
  int32,
  int64,
  boolean,
  // Appended after boolean: the values above are already on the wire.
  int16,
  uint16,
  uint32,
  uint64,
};

/// Bytes per element; 0 for a value outside the enum (e.g. decoded from a
/// corrupt message).
inline std::size_t dtype_size(dtype t) noexcept {
  switch (t) {
    case dtype::float32: return 4;
    case dtype::float64: return 8;
    case dtype::float16: return 2;
    case dtype::bfloat16: return 2;
    case dtype::int8: return 1;
    case dtype::uint8: return 1;
    case dtype::int32: return 4;
    case dtype::int64: return 8;
    case dtype::boolean: return 1;
    case dtype::int16: return 2;
    case dtype::uint16: return 2;
    case dtype::uint32: return 4;
    case dtype::uint64: return 8;
  }
  return 0;
}

/// Stable lower-case name ("float32", ..., "bool"); "unknown" outside the enum.
inline const char* to_string(dtype t) noexcept {
  switch (t) {
    case dtype::float32: return "float32";
    case dtype::float64: return "float64";
    case dtype::float16: return "float16";
    case dtype::bfloat16: return "bfloat16";
    case dtype::int8: return "int8";
    case dtype::uint8: return "uint8";
    case dtype::int32: return "int32";
    case dtype::int64: return "int64";
    case dtype::boolean: return "bool";
    case dtype::int16: return "int16";
    case dtype::uint16: return "uint16";
    case dtype::uint32: return "uint32";
    case dtype::uint64: return "uint64";
  }
  return "unknown";
}

/// Reduction operator. The numeric values travel on the wire.
enum class redop : uint8_t { sum, prod, min, max, avg, band, bor, bxor };

/// Stable lower-case name ("sum", ...); "unknown" outside the enum.
const char* to_string(redop op) noexcept;

/// Empty when (op, t) is supported by this version, else a message naming
/// both, e.g. "reduction band is not defined for dtype float32 (bitwise ops
/// need an integer or bool dtype)".
std::string check_reduction(redop op, dtype t);

/// Compression of float32 payloads on the wire (MCCL_COMPRESSION, or per
/// op). The numeric values travel on the wire (op signatures).
enum class compression_kind : uint8_t { none, fp16, bf16, topk };

/// "none", "fp16", "bf16" or "topk".
const char* to_string(compression_kind kind) noexcept;

/// Which thread moved an op's bytes when it completed: the thread that
/// issued or waited for it, the communicator's op thread, or the progress
/// actor on a CAF worker (whoever led the communicator's engine then).
enum class driver_kind : uint8_t { caller, op_thread, actor };

/// "caller", "op thread", "actor".
const char* to_string(driver_kind who) noexcept;

} // namespace mccl
