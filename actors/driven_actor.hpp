#pragma once
/// driven_actor<Base>: a CAF actor that runs on its driving unit
/// (driving_unit.hpp) whoever sends it a message.
///
/// A plain actor spawned on a driving unit runs there only while its
/// messages come from the unit's own actors or from deliver(): a message
/// from CAF's clock (delayed_send, a request's timeout), from an actor on a
/// CAF worker, or from anon_send on some other thread resumes it on a CAF
/// worker (CAF 0.17.6, scheduled_actor::enqueue: an idle receiver goes to
/// the sender's execution unit, or to CAF's scheduler when there is none).
/// A communicator's supervisor and link actors get such messages (their
/// supervisor's, a linked actor's exit, the resumer's answer), so they
/// override enqueue() to name their own unit as the one that runs them: the
/// message is queued there, and the unit's owner drains it on the thread
/// that drives the communicator (comm_core: the engine's leader).
///
/// Spawned with driving_unit::spawn() (function-based: a stateful_actor
/// over this) or spawn_class(); the unit must be owned by a shared_ptr,
/// which the actor shares, so that a message arriving after its owner
/// detached it (driving_unit::detach) still finds it.

#include "actors/driving_unit.hpp"

#include <caf/actor_config.hpp>
#include <caf/mailbox_element.hpp>

#include <memory>
#include <stdexcept>
#include <utility>

namespace mccl::actors {

template <class Base>
class driven_actor : public Base {
public:
  template <class... Ts>
  explicit driven_actor(caf::actor_config& cfg, Ts&&... xs)
    : Base(cfg, std::forward<Ts>(xs)...), unit_(unit_of(cfg)) {}

  void enqueue(caf::mailbox_element_ptr ptr, caf::execution_unit*) override {
    Base::enqueue(std::move(ptr), unit_.get());
  }

private:
  static std::shared_ptr<driving_unit> unit_of(const caf::actor_config& cfg) {
    auto* unit = dynamic_cast<driving_unit*>(cfg.host);
    if (unit == nullptr)
      throw std::logic_error("a driven actor must be spawned on a driving unit (driving_unit::spawn)");
    return unit->shared_from_this(); // throws bad_weak_ptr when no shared_ptr owns it
  }

  std::shared_ptr<driving_unit> unit_;
};

} // namespace mccl::actors
