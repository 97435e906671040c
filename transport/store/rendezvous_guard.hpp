#pragma once
/// Who may take part in a communicator's setup, and what every rank learns
/// when setup goes wrong, kept in the rendezvous store under the
/// communicator's prefix (e.g. "mccl/0/"):
///
///   job        rank 0's world size, job id (MCCL_JOB_ID), process and the
///              settings that must agree; every other rank compares its
///              own with them.
///   claim/<r>  the process that holds rank r (pid, host, addresses),
///              set only if absent: a second claim is refused, naming
///              both processes.
///   failed     the first setup failure of any rank, with its reason;
///              the others, waiting for peers, fail at once naming it.
///   wired/<r>  rank r has read all it needs: rank 0 keeps serving the
///              store until every rank has said so.
///
/// A store whose server is gone (rank 0 serves it) means rank 0 is gone.
///
/// Blocking: join(), wait_for() and finish() wait on the store, bounded
/// by their deadlines; check() asks the store once.

#include <mccl/error.hpp>
#include <mccl/store.hpp>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace mccl::transport {

struct rendezvous_identity {
  int rank = 0;
  int world = 1;
  std::string job_id;  ///< MCCL_JOB_ID; "" = not given
  std::string process; ///< "pid 4242 on host-a (127.0.0.1)"
  /// Settings every rank must have alike, name -> value as the log shows
  /// it; compared with rank 0's, each difference named with both values.
  std::vector<std::pair<std::string, std::string>> agreed;
  /// False where the store outlives this setup whatever happens to rank
  /// 0's process (a standby store met in by grow, reconfigure or a shrink
  /// that moved it: its server stays up with its runtime), so rank 0 need
  /// not hold on to it after a failure (keep_store_up_for_readers).
  bool store_goes_with_rank0 = true;
};

/// "pid 4242 on <hostname> (<addresses>)": how a claim names a process.
std::string describe_process(const std::string& addresses);

class rendezvous_guard {
public:
  rendezvous_guard(store& s, std::string prefix, rendezvous_identity me,
                   std::chrono::milliseconds connect_timeout);

  /// Rank 0 publishes the job; every rank claims its rank and compares its
  /// world size, job id and agreed settings with rank 0's. Throws
  /// mccl::error naming a second claim, a WORLD_SIZE, MCCL_JOB_ID or
  /// setting mismatch, or a rank 0 that never came.
  void join(std::chrono::steady_clock::time_point deadline);

  /// Throws the failure another rank recorded, or that rank 0 is gone;
  /// returns when neither. Cheap enough to call every few hundred ms.
  void check();

  /// The value of `key`, asking at growing pauses (1 ms to `max_pause`)
  /// and calling check() in between; after `deadline` throws naming
  /// `what` and the ranks that have not joined.
  std::string wait_for(const std::string& key, std::chrono::steady_clock::time_point deadline,
                       const std::string& what,
                       std::chrono::milliseconds max_pause = std::chrono::milliseconds(50));

  /// Called by every rank once its setup reads the store no more: records
  /// so (wired/<rank>), and on rank 0, whose process serves the store,
  /// waits until every rank has, bounded by `deadline`.
  void finish(std::chrono::steady_clock::time_point deadline);

  /// Ranks (other than this one) that have not claimed their rank yet;
  /// empty when the store cannot tell.
  std::vector<int> absent();

  /// The error to raise for a setup failure `e` of this rank: another
  /// rank's earlier failure when that is the cause, else `e` with the
  /// ranks that never joined, which is also recorded for the others (best
  /// effort; rank 0 then keeps its store up (bounded) so that waiting
  /// ranks read it before the store goes with rank 0's exit).
  error explain(const error& e);

private:
  std::string key(const std::string& name) const { return prefix_ + name; }
  /// On rank 0, which serves the store: wait (at most 1.5 s, or the
  /// connect timeout if shorter) until every other rank has read the
  /// recorded failure, before the store goes with this process.
  void keep_store_up_for_readers();
  /// Records that this rank has read (or made) the failure.
  void tell_read();
  std::string absent_text();

  store& store_;
  std::string prefix_;
  rendezvous_identity me_;
  std::chrono::milliseconds timeout_;
  bool joined_ = false;   ///< the store answered this rank once
  bool stranger_ = false; ///< refused as no member of this job: fails alone
  bool relayed_ = false;  ///< the error is another rank's, or rank 0's loss
  bool store_gone_ = false;
};

/// "2, 3" for {2, 3}.
std::string rank_list(const std::vector<int>& ranks);

} // namespace mccl::transport
