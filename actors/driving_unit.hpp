#pragma once
/// driving_unit: a CAF execution unit of mccl's own, run by whichever thread
/// drives a communicator's progress (the caller for a small op, the op
/// thread otherwise), so that a communicator's actors exchange messages
/// without a thread hop.
///
/// Why it works (CAF 0.17.6, scheduled_actor.cpp): enqueueing a message to
/// an idle actor calls `eu->exec_later(actor)` on the execution unit the
/// message was sent from (the sender's own unit when the sender is an
/// actor), and a spawned actor is launched on the unit of its actor_config.
/// So an actor spawned here (spawn()) and every actor it messages are queued
/// on this unit and run when the driving thread calls drain(); a message
/// between them costs a mailbox push and a queue push.
///
/// What leaves the unit: a message from a non-actor thread without a unit
/// (anon_send) or from CAF's clock (delayed_send, request timeouts) goes to
/// CAF's scheduler and resumes the actor on a CAF worker, whose later sends
/// carry the worker's unit. Two ways keep an actor here anyway: non-actor
/// code reaches it with deliver() instead of anon_send, or the actor is a
/// driven_actor (driven_actor.hpp), which queues every message it gets on
/// its unit whoever sends it (its owner says how the unit is then drained:
/// `wake`), until the unit is detached.
///
/// Threads: exec_later may be called from any thread; a job pushed from a
/// thread other than the one draining (a caller while the op thread drives,
/// an actor running on a CAF worker) is kept for the next drain and
/// announced through `wake`, so the driver runs a drain soon. drain() is
/// called by one thread at a time (the communicator's driver); when another
/// thread takes over, the hand-over synchronizes (the engine's leadership
/// does), since the driver's own queue takes no lock.

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_config.hpp>
#include <caf/actor_system.hpp>
#include <caf/execution_unit.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/resumable.hpp>
#include <caf/scheduled_actor.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace mccl::actors {

/// Which messages a handler run in place (driving_unit::dispatch) lets be
/// dispatched in place inside it, nested, while it runs; and, asking
/// can_dispatch(), which of these a message is. Anything else a handler
/// sends waits in its receiver's mailbox until the handler returns.
enum class nesting : unsigned char {
  /// None (a message of this kind is dispatched only when no handler runs).
  none,
  /// Messages to op actors: hosted by a link actor's turn, whose reads
  /// hand each frame to its op actor.
  op_messages,
  /// Chunk messages to link actors: hosted by an op actor's handler, whose
  /// frames go to its peers' links. (A link actor's chunk handler hosts
  /// messages to op actors: the op that handed the chunk hears there that
  /// it left its memory, which only that op hears, so nested handlers stay
  /// a few deep.)
  link_chunks,
};

/// A message of a single value, as an in-place actor's handlers match it
/// (in_place_actor.hpp): the value's type and where it is. Empty (no type)
/// for any other message.
struct one_value {
  const std::type_info* type = nullptr;
  void* value = nullptr;

  template <class T>
  T& as() const noexcept {
    return *static_cast<T*>(value);
  }
};

/// A message dispatched in place (driving_unit::dispatch()): its values,
/// which live on the dispatcher's stack, and a mailbox element made of them
/// only when the actor takes the message CAF's way (its first run, a
/// message it does not match itself).
class in_place_message {
public:
  /// Its value, when it has one: typed at compile time, so matching it
  /// takes a pointer comparison instead of the type-erased view's calls.
  virtual one_value value() noexcept = 0;
  /// The values as a mailbox element, for scheduled_actor::activate(); the
  /// values move into it, so value() is not read afterwards.
  virtual caf::mailbox_element& element() = 0;

protected:
  ~in_place_message() = default;
};

namespace detail {

template <class... Vs>
class in_place_values final : public in_place_message {
public:
  template <class... Ts>
  explicit in_place_values(Ts&&... xs) : values_(std::forward<Ts>(xs)...) {}

  one_value value() noexcept override {
    if constexpr (sizeof...(Vs) == 1)
      return {&typeid(std::tuple_element_t<0, std::tuple<Vs...>>), &std::get<0>(values_)};
    else
      return {};
  }
  caf::mailbox_element& element() override {
    if (!element_)
      make_element(std::index_sequence_for<Vs...>{});
    return *element_;
  }

private:
  template <std::size_t... Is>
  void make_element(std::index_sequence<Is...>) {
    element_.emplace(nullptr, caf::make_message_id(), caf::mailbox_element::forwarding_stack{},
                     std::move(std::get<Is>(values_))...);
  }

  std::tuple<Vs...> values_;
  std::optional<caf::mailbox_element_vals<Vs...>> element_;
};

} // namespace detail

/// An actor that handles a message dispatched to it (driving_unit::
/// dispatch()) itself, with what it needs of CAF's activation around its
/// handler: in_place_actor.hpp says what it skips, and why that is safe.
class in_place_handler {
public:
  /// Handles `x` on the calling thread as scheduled_actor::activate(unit,
  /// x.element()) would.
  virtual void handle_in_place(caf::execution_unit* unit, in_place_message& x) = 0;

  /// True while one of its handlers runs in place: a message to it then
  /// waits (its mailbox stays blocked meanwhile, so can_dispatch() asks
  /// this too: a handler is never entered twice).
  bool running_in_place() const noexcept { return running_in_place_; }

protected:
  ~in_place_handler() = default;

private:
  friend class driving_unit;
  bool running_in_place_ = false;
};

/// An actor that may be dispatched to: the actor (its handle keeps it) and
/// its in-place handler, the same object.
struct in_place_target {
  caf::scheduled_actor* self = nullptr;
  in_place_handler* handler = nullptr;
};

class driving_unit final : public caf::execution_unit, public std::enable_shared_from_this<driving_unit> {
public:
  /// `wake` runs (on the pushing thread, outside any lock) when a job is
  /// queued from a thread that is not draining: the driver's cue to drain.
  explicit driving_unit(caf::actor_system& sys, std::function<void()> wake = {});

  /// Hands jobs still queued to CAF's scheduler (their actors go on, on CAF
  /// workers). A communicator drains until idle() first.
  ~driving_unit() override;

  /// Sets `wake` (see the constructor) before the first job is queued from
  /// another thread: for an owner that can only say how to reach itself
  /// once it is built.
  void set_wake(std::function<void()> wake) { wake_ = std::move(wake); }

  /// The owner is going: jobs still queued, and every job queued from now
  /// on, go to CAF's scheduler (their actors go on, on CAF workers), and
  /// `wake` is never called again. Driven actors may outlive their
  /// communicator by a little (a finalize that did not wait for them), and
  /// their messages must then still run somewhere. Not while a drain runs.
  void detach();

  driving_unit(const driving_unit&) = delete;
  driving_unit& operator=(const driving_unit&) = delete;

  /// Marks the calling thread as the unit's driver while it lives (the
  /// engine's leader for one pass, and drain() itself): jobs it queues are
  /// local pushes, run by its next drain without a wake-up.
  class driver_scope {
  public:
    // Relaxed, and no read-modify-write: one thread drives at a time (the
    // engine's leadership), and another thread reading driver_ only asks
    // whether it is itself, which it can only be after its own store.
    // (A seq_cst exchange and store were two locked instructions a message.)
    explicit driver_scope(driving_unit& unit)
      : unit_(unit), before_(unit.driver_.load(std::memory_order_relaxed)) {
      unit_.driver_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    }
    ~driver_scope() { unit_.driver_.store(before_, std::memory_order_relaxed); }
    driver_scope(const driver_scope&) = delete;
    driver_scope& operator=(const driver_scope&) = delete;

  private:
    driving_unit& unit_;
    std::thread::id before_;
  };

  /// CAF's hook: `job` (an actor with a new message, or a new actor) is
  /// queued to run at the next drain. Non-blocking; any thread.
  void exec_later(caf::resumable* job) override;

  /// Runs queued jobs on the calling thread until none is left or
  /// `max_jobs` resumes ran; jobs queued meanwhile by the running actors
  /// run in the same call. Returns the number of resumes. Never blocks.
  /// Called from inside a handler it runs, it returns 0 at once: the
  /// running drain takes what was queued once the handler returns.
  std::size_t drain(std::size_t max_jobs = std::numeric_limits<std::size_t>::max()) {
    // Inline, as every pass of the engine asks: nothing queued (an op
    // actor's message was handled in place, and sent nothing on), or a
    // drain runs already.
    if ((local_next_ == local_jobs_.size() && !foreign_waiting_.load(std::memory_order_acquire))
        || draining_.load(std::memory_order_relaxed))
      return 0;
    return run_queued(max_jobs);
  }

  /// True when no job is queued. The driving thread's question (the
  /// driver's own queue is not locked).
  bool idle() const;

  /// True when a job queued from another thread waits for a drain. Any
  /// thread's question: a leader that lets go of the engine asks it (after
  /// a sequentially consistent fence) so that a job queued while it was
  /// letting go is not left waiting for the next leader.
  bool foreign_jobs_waiting() const { return foreign_waiting_.load(std::memory_order_seq_cst); }

  /// Actor resumes drain() has run so far (stats().resumes, read alone):
  /// the driving thread's question whether a drain ran in a stretch of
  /// its own code.
  uint64_t resumes() const { return resumes_.load(std::memory_order_relaxed); }

  /// What the unit did, for the "no thread hop on the op path" audit.
  struct counters {
    uint64_t local_pushes = 0;   ///< jobs queued by the draining thread itself
    uint64_t foreign_pushes = 0; ///< jobs queued from another thread (each one a wake-up)
    uint64_t resumes = 0;        ///< actor resumes run by drain()
    uint64_t dispatches = 0;     ///< messages handled in place by dispatch()
  };
  counters stats() const;

  /// Spawns a function-based actor launched on this unit: its first run and
  /// every message that actors of this unit send it run at drain().
  template <class F, class... Ts>
  auto spawn(F fun, Ts&&... xs) {
    caf::actor_config cfg{this};
    using has_init = std::integral_constant<bool, true>;
    return system().spawn_functor(has_init{}, cfg, fun, std::forward<Ts>(xs)...);
  }
  /// The same for an actor class `C`, constructed from (its config, xs...).
  template <class C, class... Ts>
  auto spawn_class(Ts&&... xs) {
    caf::actor_config cfg{this};
    return system().spawn_class<C, caf::no_spawn_options>(cfg, std::forward<Ts>(xs)...);
  }

  /// Sends `xs...` to `dest` as if from an actor of this unit (no sender):
  /// `dest`, if idle, runs at the next drain instead of on a CAF worker.
  template <class Handle, class... Ts>
  void deliver(const Handle& dest, Ts&&... xs) {
    auto* receiver = caf::actor_cast<caf::abstract_actor*>(dest);
    if (receiver == nullptr)
      return;
    receiver->enqueue(caf::make_mailbox_element(nullptr, caf::make_message_id(), {},
                                                std::forward<Ts>(xs)...),
                      this);
  }

  /// Handles `xs...` as a message to the actor `to` on the calling
  /// thread, now: the element lives on the caller's stack and the actor
  /// runs it as CAF's one-shot activation would (scheduled_actor::activate(
  /// unit, element): the behaviour, the exception handler and the exit), the
  /// way CAF's I/O brokers run the messages their multiplexer hands them,
  /// without what a resume adds around one message (the mailbox's queues,
  /// the scheduling of the actor) nor what the actor knows it does not
  /// need (in_place_handler). A message then costs some 200-320
  /// instructions around its handler (a chunk, a start: callgrind, rank 0
  /// of a 4 B allreduce over TCP on 2 ranks, the runner's send included)
  /// instead of 2,100 through the mailbox.
  ///
  /// Only when that changes nothing an actor can see: `to` is idle (its
  /// mailbox blocked: no message of its own waits that this one would
  /// pass) and none of its handlers runs in place, and either no handler
  /// of this unit runs (one run by a drain's resume sends into mailboxes,
  /// as CAF would), or the one running in place hosts messages of kind
  /// `kind` (nesting: a link actor's handlers host messages to op actors,
  /// an op actor's handlers chunk messages to link actors). can_dispatch()
  /// says whether it may;
  /// otherwise the caller sends the message (deliver(), then drain()).
  /// Jobs the handler queues run at the caller's next drain(). `hosts`:
  /// the kind of messages that may be dispatched inside this one. The
  /// driving thread's calls only.
  bool can_dispatch(const in_place_target& to, nesting kind) const {
    return to.self != nullptr && !to.handler->running_in_place_
           && (!draining_.load(std::memory_order_relaxed) || (in_place_ != nullptr && kind != nesting::none && hosts_ == kind))
           && to.self->mailbox().blocked();
  }
  template <class... Ts>
  void dispatch(const in_place_target& to, nesting hosts, Ts&&... xs) {
    // The values live on this stack: a dispatched message is handled here
    // and now and never queued, so it needs no heap copy (CAF's
    // make_mailbox_element allocates one and frees it after the handler:
    // about 170 instructions a message), nor, when the actor matches it
    // itself, a mailbox element at all (about 80 more: in_place_message).
    detail::in_place_values<typename caf::detail::strip_and_convert<Ts>::type...> message{std::forward<Ts>(xs)...};
    // A drain() from the handler leaves what it queued to ours (or to the
    // caller's, for a nested dispatch); the host is put back after.
    bool outer_draining = draining_.load(std::memory_order_relaxed);
    in_place_handler* outer = std::exchange(in_place_, to.handler);
    nesting outer_hosts = std::exchange(hosts_, hosts);
    draining_.store(true, std::memory_order_relaxed);
    to.handler->running_in_place_ = true;
    {
      driver_scope driving{*this};
      to.handler->handle_in_place(this, message);
    }
    to.handler->running_in_place_ = false;
    draining_.store(outer_draining, std::memory_order_relaxed);
    hosts_ = outer_hosts;
    in_place_ = outer;
    bump(dispatches_);
  }

private:
  /// One more on a counter only the driving thread writes (others read it):
  /// a plain load and store, not a locked read-modify-write.
  static void bump(std::atomic<uint64_t>& counter, uint64_t n = 1) {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  bool on_driver_thread() const {
    return driver_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }

  /// Messages an actor handles per resume before the next queued actor's
  /// turn, so one busy actor cannot starve the others of a drain.
  static constexpr std::size_t max_throughput = 64;

  /// The next job to run (the driver's own first), or null.
  caf::resumable* next_job();
  /// drain() once it found jobs queued.
  std::size_t run_queued(std::size_t max_jobs);

  std::function<void()> wake_;
  /// Jobs queued by the driving thread: touched by that thread only, so
  /// the op path takes no lock. Each holds one reference (CAF's).
  std::vector<caf::resumable*> local_jobs_;
  std::size_t local_next_ = 0; ///< the first of local_jobs_ not run yet
  /// Jobs queued from other threads (each announced through wake_).
  mutable std::mutex mutex_;
  std::deque<caf::resumable*> jobs_;
  std::atomic<bool> foreign_waiting_{false}; ///< jobs_ is not empty
  bool detached_ = false;                     ///< under mutex_: detach() was called
  std::atomic<std::thread::id> driver_{};
  std::atomic<bool> draining_{false}; ///< a drain() or a dispatch() runs (on the one driving thread)
  in_place_handler* in_place_ = nullptr; ///< whose handler dispatch() runs now; the driving thread's
  nesting hosts_ = nesting::none;        ///< what in_place_'s handler hosts
  std::atomic<uint64_t> local_pushes_{0};   ///< the driving thread's (bump())
  std::atomic<uint64_t> foreign_pushes_{0}; ///< any thread's
  std::atomic<uint64_t> resumes_{0};        ///< the driving thread's (bump())
  std::atomic<uint64_t> dispatches_{0};     ///< the driving thread's (bump())
};

} // namespace mccl::actors
