#pragma once
/// in_place_actor<Derived, Base>: a CAF actor (Base: a typed actor's base)
/// whose frequent messages, those of types of its own that the engine
/// sends on every op or pass (an op actor's start and chunk, a link
/// actor's turn), it matches itself, by type, from its mailbox and when
/// dispatched in place (driving_unit::dispatch), skipping what CAF's
/// general consume() and activate() add that these never need.
///
/// Derived provides:
///   bool handled(const one_value& m): runs the handler of `m` when it is
///     one of those messages; false when it is not (it then goes CAF's
///     way: an exit, a down, a request);
///   caf::error failed_with(const std::exception_ptr& x): what escaped a
///     handler; the actor ends with the error returned (its exception
///     handler's error, for a message from the mailbox);
/// and calls started() in make_behavior().
///
/// Why skipping is safe (CAF 0.17.6): CAF's consume() routes responses,
/// system messages and the behaviour's match through its result visitor;
/// these messages are never requests, so none of that applies. CAF's
/// activate(unit, x) sets the actor's unit, initializes it on its first
/// run, runs consume(), then cleans up its behaviour stack, sees whether
/// the actor ended (finalize()) and sets its receive timeout, and catches
/// what a handler throws. An actor that is dispatched to has run already
/// (dispatch needs an idle mailbox, which only a resume leaves), and these
/// handlers never quit, pop a behaviour or set a timeout. So what is left
/// is the unit, the handler and the exception path: 143 instructions fewer
/// around an op's start, 79 around a chunk (callgrind, rank 0 of a 2-rank
/// 4 B allreduce over TCP: 464 to 321 and 275 to 196, the runner's send
/// included). Before its first run, or for any other message, the actor
/// goes through activate().

#include "actors/driving_unit.hpp"

#include <caf/execution_unit.hpp>
#include <caf/invoke_message_result.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/type_erased_tuple.hpp>

#include <exception>
#include <string>

namespace mccl::actors {

/// What escaped a handler, in words.
inline std::string what_escaped(const std::exception_ptr& x) {
  try {
    std::rethrow_exception(x);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

/// A mailbox element's content as one value of a type of mccl's (CAF's
/// built-in types, atoms among them, are left to CAF), or empty.
inline one_value one_value_of(caf::type_erased_tuple& m) {
  if (m.size() != 1)
    return {};
  auto type = m.type(0);
  if (type.first != 0 || type.second == nullptr)
    return {};
  return {type.second, m.get_mutable(0)};
}

template <class Derived, class Base>
class in_place_actor : public Base, public in_place_handler {
public:
  using Base::Base;

  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    if (!self().handled(one_value_of(x.content())))
      return Base::consume(x);
    return caf::invoke_message_result::consumed;
  }

  void handle_in_place(caf::execution_unit* unit, in_place_message& x) override {
    if (!started_) {
      this->activate(unit, x.element());
      return;
    }
    this->context(unit);
    try {
      if (self().handled(x.value()))
        return;
    } catch (...) {
      // As CAF's reactivate(): the exception handler's error ends the actor.
      auto what = std::current_exception();
      this->quit(self().failed_with(what));
      this->finalize();
      return;
    }
    this->activate(unit, x.element());
  }

protected:
  /// From make_behavior(): CAF has initialized the actor.
  void started() noexcept { started_ = true; }

private:
  Derived& self() { return static_cast<Derived&>(*this); }

  bool started_ = false;
};

} // namespace mccl::actors
