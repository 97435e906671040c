#pragma once
/// The memory two ranks of one host share: an anonymous memfd (never a
/// name in /dev/shm, so nothing is left behind by a crash) that the lower
/// rank creates and the higher rank opens through /proc/<pid>/fd/<fd>, the
/// way UCX's posix transport attaches. Opening works only for a process of
/// the same user on the same host and in the same PID namespace; a random
/// nonce in the header proves that the mapping is the creator's segment
/// (containers sharing a boot id but not /proc fail here, and fall back).
///
/// Layout: a header page, then `bytes` for the user: a pair's two rings
/// (pair_rings()) or a host's board (shm_board.hpp).

#include "transport/shm/shm_ring.hpp"

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace mccl::transport {

/// /proc/sys/kernel/random/boot_id: equal on two ranks iff they run on one
/// booted kernel (one host, or containers of one host). "" when unreadable.
std::string boot_id();

class shm_segment {
public:
  /// A new segment with `bytes` of zeroed memory after its header; throws
  /// mccl::error with the system's reason when it cannot.
  static shm_segment create(std::size_t bytes);
  /// Maps the segment of process `pid` (its descriptor `fd`); "" and the
  /// mapped segment on success, else why not.
  static std::string open(pid_t pid, int fd, std::size_t bytes, uint64_t nonce, shm_segment& out);

  shm_segment() = default;
  shm_segment(shm_segment&& other) noexcept;
  shm_segment& operator=(shm_segment&& other) noexcept;
  shm_segment(const shm_segment&) = delete;
  shm_segment& operator=(const shm_segment&) = delete;
  ~shm_segment();

  /// The creator's descriptor (-1 on the opener, or once dropped).
  int fd() const noexcept { return fd_; }
  uint64_t nonce() const noexcept;
  /// The user's bytes (page aligned) and their size.
  uint8_t* data() const noexcept;
  std::size_t bytes() const noexcept { return bytes_; }
  /// Closes the creator's descriptor once the peer has mapped the segment:
  /// the memory lives until every mapping is gone.
  void drop_fd() noexcept;

private:
  int fd_ = -1;
  uint8_t* base_ = nullptr;
  std::size_t bytes_ = 0; ///< after the header page
};

/// A pair's segment: per direction a ring control block and the ring's
/// data; direction 0 carries creator -> opener.
std::size_t pair_segment_bytes(std::size_t ring_bytes) noexcept;
shm_ring pair_ring(const shm_segment& s, std::size_t ring_bytes, int direction) noexcept;

} // namespace mccl::transport
