#pragma once
/// Open files a communicator's links may need, checked before it connects:
/// a rank that runs out of file descriptors half-way through setting up
/// fails with "Connection reset by peer" on its peers, or "never joined",
/// far from the cause. So the need is worked out up front, the soft
/// RLIMIT_NOFILE is raised toward the hard one when it is short, and a
/// hard limit below the need fails every rank at once, naming the limit,
/// the need and how to raise it.
///
/// The need is what the links hold once set up (a full mesh: every rank
/// connects to every other while the communicator is made). Measured on 16
/// ranks of one host: one socket per peer and TCP stream, two more files per
/// peer over shared memory (its doorbells), and on rank 0, which serves the
/// rendezvous store, one socket per other rank.

#include <cstddef>

namespace mccl::transport {

struct open_files_need {
  int world = 1;
  int rank = 0;
  int sockets_per_peer = 1;   ///< TCP streams to each peer
  bool shared_memory = false; ///< ranks of one host may pair over shared memory
  bool serves_store = false;  ///< this rank hosts the rendezvous store
};

/// Files the links may hold open at most, plus a margin for what the
/// process opens beside them.
std::size_t files_needed(const open_files_need& n);

/// Makes sure `needed` more files can be opened than are open now: raises
/// the soft limit (never above the hard one) when it is short. Throws
/// mccl::error(errc::invalid_config) naming the rank, the limit, the need
/// and `ulimit -n` when even the hard limit is too low.
void ensure_open_files(std::size_t needed, const open_files_need& n);

} // namespace mccl::transport
