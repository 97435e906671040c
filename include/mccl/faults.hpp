#pragma once
/// A fault-injection scenario: which faults to inject where and when, read
/// from a JSON file (MCCL_FAULTS=path) or built in C++. The format, with one
/// example per fault kind, is in examples/faults/ and docs/fault-injection.md.
///
///   {"seed": 7, "faults": [
///     {"kind": "corrupt", "link": "1->0", "seq": 3, "chunk": 0, "bits": 2},
///     {"kind": "crash", "rank": 2, "after_ms": 500}]}
///
/// Link faults act on the data frames rank a sends to rank b ("a->b"; "*"
/// for any rank on either side); a frame matches when it has the given op
/// sequence number, step and chunk (each optional), at least after_ms have
/// passed since the communicator started, the fault has fired fewer than
/// `count` times (0: no limit), and a draw from the seeded generator falls
/// below `probability`. Rank faults act on the process of `rank`: at the
/// first frame it sends of op `seq`, or after_ms, or, with `during`, inside
/// a membership change (shrink, grow, reconfigure) at the point named in
/// membership_change below.
///
/// With "on": "chunk", drop, delay, duplicate and reorder act one layer
/// up, on the chunk messages rank b's ops receive from rank a (where a
/// frame that arrived becomes a chunk for its op's actor), with the same
/// triggers plus `op` (the op kind the sender issued).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mccl::transport {

enum class fault_kind : uint8_t {
  drop,      ///< the frame never leaves
  delay,     ///< the frame (and what follows it) leaves `ms` later
  duplicate, ///< the frame leaves twice
  reorder,   ///< the frame leaves after the next one
  corrupt,   ///< `bits` bit flips or `bytes` random bytes in the payload
  close,     ///< the connection is closed
  stall,     ///< the link sends nothing for `ms` (0: until it closes)
  crash,     ///< the rank exits at once with `exit_code`
  freeze,    ///< the rank stops (SIGSTOP) and answers nothing
};

/// "drop", "delay", ...
const char* to_string(fault_kind kind) noexcept;

/// Whether the fault acts on a link (true) or on a rank (crash, freeze).
bool is_link_fault(fault_kind kind) noexcept;

constexpr int any_rank = -1;

/// The membership change inside which a rank fault with "during" fires.
/// It fires on the process once it is connected to every other member of
/// the communicator the change builds, before it confirms the change (the
/// closing barrier of shrink and grow, the "ready" of reconfigure): the
/// other members are then mid-change and must notice the loss. `rank` is
/// the rank the process was launched as (its rank in the communicator it
/// created, kept through split, shrink, grow and reconfigure, so a retry
/// after a shrink names the same process); a newcomer (runtime::join,
/// runtime::reconfigure) is named by the rank it takes in the communicator
/// it joins (for join: the old size and up; for reconfigure: its place in
/// the list of handles). Each fires at most once per process.
enum class membership_change : uint8_t { none, shrink, grow, reconfigure };

/// "shrink", "grow", "reconfigure" ("" for none).
const char* to_string(membership_change change) noexcept;

/// Where a link fault acts: on the frames a link sends (the connection
/// decorator, below the link actor), or on the chunk messages an op
/// receives (between the link actor and the op actor).
enum class fault_layer : uint8_t { link, chunk };

/// "link", "chunk"
const char* to_string(fault_layer layer) noexcept;

struct fault_spec {
  fault_kind kind = fault_kind::drop;
  fault_layer on = fault_layer::link; ///< link faults only
  int from = any_rank; ///< link faults: the sending rank
  int to = any_rank;   ///< link faults: the receiving rank
  int rank = any_rank; ///< rank faults
  std::optional<uint64_t> seq;
  std::optional<uint32_t> step;
  std::optional<uint32_t> chunk;
  std::optional<std::string> op; ///< chunk faults: the op kind ("allreduce", "send", ...)
  uint64_t after_ms = 0;
  double probability = 1.0;
  uint64_t count = 1; ///< times it fires at most; 0: no limit
  uint64_t ms = 0;    ///< delay, stall
  uint32_t bits = 0;  ///< corrupt: bit flips (when bytes is 0; default 1)
  uint32_t bytes = 0; ///< corrupt: bytes overwritten with random values
  int exit_code = 99; ///< crash
  /// Rank faults: fire inside this change instead of at `seq` / after_ms.
  membership_change during = membership_change::none;
};

struct fault_scenario {
  uint64_t seed = 1;
  std::vector<fault_spec> faults;
  std::string source; ///< the file it came from, or "(C++ API)"
};

/// Parses a scenario. Throws mccl::error(errc::invalid_config) naming
/// `origin`, the fault's position and kind, the key and what is allowed
/// (bad JSON: the parser's message with the byte offset).
fault_scenario parse_fault_scenario(const std::string& json_text, const std::string& origin);

/// Reads and parses the file; a missing or unreadable file names the path
/// and MCCL_FAULTS.
fault_scenario load_fault_scenario(const std::string& path);

/// Checks that every rank named is below `world` (ranks outside the job are
/// a mistake, not a fault that never fires). Faults `during` a membership
/// change are not checked: a grow's newcomers have ranks past `world`.
void check_fault_ranks(const fault_scenario& s, int world);

} // namespace mccl::transport
