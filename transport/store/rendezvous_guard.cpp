#include "transport/store/rendezvous_guard.hpp"

#include <map>
#include <sstream>
#include <thread>

#include <unistd.h>

namespace mccl::transport {

using clock = std::chrono::steady_clock;

namespace {

std::string encode_job(const rendezvous_identity& me) {
  auto out = "world=" + std::to_string(me.world) + "\njob=" + me.job_id + "\nprocess=" + me.process;
  for (const auto& [name, value] : me.agreed)
    out += "\nsetting." + name + "=" + value;
  return out;
}

std::map<std::string, std::string> decode_job(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos)
      out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

std::string shown(const std::string& job_id) {
  return job_id.empty() ? std::string("none") : quoted(job_id);
}

} // namespace

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks)
    out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

std::string describe_process(const std::string& addresses) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0)
    host[0] = '\0';
  return "pid " + std::to_string(::getpid()) + " on " + (host[0] ? host : "an unnamed host")
         + (addresses.empty() ? "" : " (" + addresses + ")");
}

rendezvous_guard::rendezvous_guard(store& s, std::string prefix, rendezvous_identity me,
                                   std::chrono::milliseconds connect_timeout)
  : store_(s), prefix_(std::move(prefix)), me_(std::move(me)), timeout_(connect_timeout) {}

void rendezvous_guard::join(clock::time_point deadline) {
  auto me = "rank " + std::to_string(me_.rank);
  if (me_.rank == 0) {
    auto held = store_.set_if_absent(key("job"), encode_job(me_));
    joined_ = true;
    if (held != encode_job(me_)) {
      stranger_ = true;
      throw error(errc::rendezvous_failed,
                  "rank 0 is claimed twice: " + decode_job(held)["process"] + " published the job first; "
                    "this process (" + me_.process + ") is a second RANK=0 on the same rendezvous store");
    }
  } else {
    auto job = decode_job(wait_for(key("job"), deadline, "rank 0 to publish the job"));
    joined_ = true;
    auto world = job["world"];
    if (job["job"] != me_.job_id) {
      stranger_ = true;
      throw error(errc::rendezvous_failed,
                  me + " (" + me_.process + ", MCCL_JOB_ID=" + shown(me_.job_id)
                    + ") reached the rendezvous store of another job (MCCL_JOB_ID=" + shown(job["job"])
                    + ", rank 0 is " + job["process"] + "): two jobs share MASTER_ADDR:MASTER_PORT; "
                      "give each job its own MASTER_PORT");
    }
    if (world != std::to_string(me_.world)) {
      // Outside rank 0's world this process is a stranger to the job: it
      // fails alone. Inside it, the job cannot run: everyone hears why.
      stranger_ = me_.rank >= std::atoi(world.c_str());
      throw error(errc::invalid_config,
                  "WORLD_SIZE mismatch: " + me + " (" + me_.process + ") has WORLD_SIZE="
                    + std::to_string(me_.world) + ", rank 0 (" + job["process"] + ") has WORLD_SIZE="
                    + world + ": start every rank with the same WORLD_SIZE");
    }
    std::string differ;
    for (const auto& [name, value] : me_.agreed) {
      auto i = job.find("setting." + name);
      if (i == job.end() || i->second == value)
        continue; // an older rank 0 that does not publish it: the handshake decides
      differ += (differ.empty() ? "" : "; ") + name + "=" + value + " on " + me + ", " + name + "="
                + i->second + " on rank 0";
    }
    if (!differ.empty())
      throw error(errc::invalid_config,
                  "settings that must agree differ: " + differ + " (" + me + " is " + me_.process
                    + "): set them the same on every rank");
  }
  auto held = store_.set_if_absent(key("claim/" + std::to_string(me_.rank)), me_.process);
  if (held != me_.process) {
    stranger_ = true;
    throw error(errc::rendezvous_failed,
                me + " is claimed twice: " + held + " holds it; this process (" + me_.process
                  + ") is a second RANK=" + std::to_string(me_.rank)
                  + " (a rank started twice, or a rank of another job on the same MASTER_PORT; "
                    "set MCCL_JOB_ID per job, as mcclrun does, to tell jobs apart)");
  }
}

void rendezvous_guard::check() {
  std::optional<std::string> failed;
  try {
    failed = store_.try_get(key("failed"));
  } catch (const error&) {
    relayed_ = true; // the store's text says that rank 0, its server, is gone
    store_gone_ = true;
    throw;
  }
  if (failed) {
    relayed_ = true;
    tell_read();
    throw error(errc::connect_failed, "rank " + std::to_string(me_.rank) + " gives up setting up: " + *failed);
  }
}

std::string rendezvous_guard::wait_for(const std::string& k, clock::time_point deadline,
                                       const std::string& what, std::chrono::milliseconds max_pause) {
  // Short pauses first: most values come within a few ms of asking.
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    if (auto v = store_.try_get(k))
      return *v;
    check();
    auto now = clock::now();
    if (now >= deadline)
      throw error(errc::rendezvous_failed,
                  "rank " + std::to_string(me_.rank) + " timed out after MCCL_CONNECT_TIMEOUT_MS="
                    + std::to_string(timeout_.count()) + " waiting for " + what + absent_text());
    std::this_thread::sleep_for(std::min<clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, max_pause);
  }
}

void rendezvous_guard::finish(clock::time_point deadline) {
  store_.set(key("wired/" + std::to_string(me_.rank)), "1");
  if (me_.rank != 0 || me_.world <= 1 || !me_.store_goes_with_rank0)
    return;
  // Rank 0's store goes when its process exits, which may come soon after
  // this setup (its first op fails, say): a rank still reading its last
  // values would then blame rank 0's exit instead of learning what really
  // happened from its links. The others are at their last reads: ask
  // often, so that rank 0 is not the last to leave setup by a long pause.
  for (int r = 1; r < me_.world; ++r)
    wait_for(key("wired/" + std::to_string(r)), deadline, "rank " + std::to_string(r) + " to finish setting up",
             std::chrono::milliseconds(2));
}

std::vector<int> rendezvous_guard::absent() {
  std::vector<int> out;
  try {
    for (int r = 0; r < me_.world; ++r)
      if (r != me_.rank && !store_.try_get(key("claim/" + std::to_string(r))))
        out.push_back(r);
  } catch (const error&) {
    return {};
  }
  return out;
}

std::string rendezvous_guard::absent_text() {
  auto missing = absent();
  if (missing.empty())
    return {};
  return "; rank(s) " + rank_list(missing) + " of WORLD_SIZE=" + std::to_string(me_.world)
         + " never joined the rendezvous (not started, crashed before it, or given another "
           "MASTER_ADDR/MASTER_PORT)";
}

void rendezvous_guard::tell_read() {
  try {
    store_.set(key("told/" + std::to_string(me_.rank)), "1");
  } catch (const error&) {
    // The store is gone: rank 0 stops waiting for this rank at its bound.
  }
}

void rendezvous_guard::keep_store_up_for_readers() {
  // Rank 0's store goes when it exits: keep it up until every other rank
  // has read why setup failed (each says so: told/<rank>), so none blames
  // rank 0's exit instead; a rank that started late gets until the bound
  // to join and read it, a rank that never starts costs the whole bound.
  if (me_.rank != 0 || me_.world <= 1 || !me_.store_goes_with_rank0)
    return;
  auto until = clock::now() + std::min<clock::duration>(timeout_, std::chrono::milliseconds(1500));
  for (;;) {
    bool all_told = true;
    try {
      for (int r = 1; r < me_.world && all_told; ++r)
        all_told = store_.try_get(key("told/" + std::to_string(r))).has_value();
    } catch (const error&) {
      return;
    }
    if (all_told || clock::now() >= until)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

error rendezvous_guard::explain(const error& e) {
  if (!joined_)
    return e;
  if (relayed_) {
    // Another rank's recorded failure, relayed: rank 0 still serves it to
    // the ranks not yet told.
    keep_store_up_for_readers();
    return e;
  }
  if (!stranger_) {
    try {
      check();
    } catch (const error& cause) {
      if (!store_gone_) {
        // Another rank failed first: that is the cause. Rank 0 still
        // serves the store that says so to the ranks not yet told.
        keep_store_up_for_readers();
        return cause;
      }
      if (cause.message() == e.message())
        return e; // the same loss, seen by another read
      return error(e.code(), e.message() + "; meanwhile " + cause.message());
    }
  }
  auto text = e.message();
  // Ranks that never came explain a wait that ran out, not a bad setting.
  bool waited = e.code() == errc::connect_failed || e.code() == errc::rendezvous_failed;
  if (!stranger_ && waited && text.find("never joined the rendezvous") == std::string::npos)
    text += absent_text();
  if (!stranger_) {
    try {
      store_.set_if_absent(key("failed"), "rank " + std::to_string(me_.rank) + " (" + me_.process
                                            + ") failed: " + text);
      tell_read(); // this rank knows why: rank 0 need not wait for it
      keep_store_up_for_readers();
    } catch (const error&) {
      // The store is gone too; this rank's own error says enough.
    }
  }
  return error(e.code(), text);
}

} // namespace mccl::transport
