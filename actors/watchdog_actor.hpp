#pragma once
/// The watchdog: one per runtime. Collective actors register their deadline
/// when they start and unregister when they end; the watchdog ticks while
/// anything is registered and tells an op that passed its deadline
/// (timeout_atom). The op then fails naming its sequence number, step and
/// the peer it waits on, and the progress actor aborts the communicator so
/// every other rank learns of it.

#include "actors/messages.hpp"

#include <caf/event_based_actor.hpp>

#include <chrono>
#include <unordered_map>

namespace mccl::actors {

class watchdog_actor : public caf::event_based_actor {
public:
  explicit watchdog_actor(caf::actor_config& cfg);

  caf::behavior make_behavior() override;

  const char* name() const override { return "mccl.watchdog"; }

private:
  struct entry {
    caf::actor who;
    std::chrono::steady_clock::time_point deadline;
  };

  void tick();

  std::unordered_map<caf::actor_id, entry> watched_;
  bool ticking_ = false;
};

} // namespace mccl::actors
