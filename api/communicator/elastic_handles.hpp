#pragma once
/// The printable handles of grow and reconfigure, so a coordinator can
/// pass them through a file, an environment variable or its own RPC:
///
///   mccl-grow/1 store=<ip:port> comm=<id> epoch=<hex> old=<n> new=<m>
///   mccl-member/1 store=<ip:port> id=<hex>
///
/// store: a standby store (api/communicator/standby_store.hpp) where the members
/// meet. Parsing errors are invalid_argument naming the caller (`who`),
/// the field and the expected form.

#include <cstdint>
#include <string>

namespace mccl::detail {

/// `digits` random hex digits.
std::string random_hex(int digits);

/// What a grow handle says (communicator::grow_handle()).
struct grow_ticket {
  std::string store; ///< the old rank 0's standby store
  uint32_t comm = 0; ///< the communicator that grows
  uint64_t epoch = 0;
  int old_size = 0;
  int new_size = 0;

  /// Every member derives the grown communicator's id alike from the handle.
  uint32_t grown_id() const;
};

std::string format_grow(const grow_ticket& t);
grow_ticket parse_grow(const std::string& text, const std::string& who);

/// What a reconfigure handle says (get_reconfigure_handle()).
struct member_ticket {
  std::string store; ///< the member's standby store
  std::string id;    ///< unique to the member
};

/// A new member's handle with a fresh id.
std::string member_handle(const std::string& store);
member_ticket parse_member(const std::string& text, const std::string& who);

} // namespace mccl::detail
