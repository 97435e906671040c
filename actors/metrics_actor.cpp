#include "actors/metrics_actor.hpp"

#include <caf/all.hpp>

namespace mccl::actors {

namespace {

struct metrics_state {
  static inline const char* name = "mccl.metrics";
};

metrics_handle::behavior_type metrics_actor(metrics_handle::stateful_pointer<metrics_state> self) {
  return {
    [](finished_atom, const finished_batch_ptr& batch) { metrics_registry::fold(*batch); },
    [self](shutdown_atom) { self->quit(); },
  };
}

finished_batch_ptr new_batch() {
  auto b = std::make_shared<metrics_registry::finished_batch>();
  b->ops.reserve(metrics_feed::batch_ops);
  return b;
}

} // namespace

std::shared_ptr<metrics_feed> metrics_feed::start(caf::actor_system& sys) {
  std::shared_ptr<metrics_feed> feed(new metrics_feed(sys.spawn(metrics_actor)));
  metrics_registry::watch_pending(feed);
  return feed;
}

metrics_feed::metrics_feed(metrics_handle actor) : filling_(new_batch()), actor_(std::move(actor)) {}

metrics_feed::~metrics_feed() { stop(); }

void metrics_feed::add(const op_metrics& metrics, bool failed, driving_unit* unit) {
  finished_batch_ptr full;
  finished_batch_ptr overdue; // the oldest batch left unfolded too long
  metrics_handle actor; // stop() may take actor_ away once the lock is released
  {
    std::lock_guard<std::mutex> guard{mutex_};
    filling_->ops.push_back({metrics, failed});
    if (filling_->ops.size() < batch_ops || !actor_)
      return;
    full = std::exchange(filling_, new_batch());
    // Folded batches leave from the front (the actor takes them in order).
    while (!sent_.empty() && sent_.front()->folded.load(std::memory_order_acquire))
      sent_.pop_front();
    if (sent_.size() >= max_waiting_batches) {
      overdue = std::move(sent_.front());
      sent_.pop_front();
    }
    sent_.push_back(full);
    actor = actor_;
  }
  if (overdue) // before the newer ones: the actor folds in order, and skips it then
    metrics_registry::fold(*overdue);
  if (unit != nullptr)
    unit->deliver(actor, finished_atom::value, std::move(full));
  else
    caf::anon_send(actor, finished_atom::value, std::move(full));
}

void metrics_feed::fold_pending() {
  std::deque<finished_batch_ptr> sent;
  finished_batch_ptr filling;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    sent.swap(sent_);
    if (!filling_->ops.empty())
      filling = std::exchange(filling_, new_batch());
  }
  // Oldest first, as the ops finished; a batch the actor folded already is
  // skipped by fold().
  for (auto& b : sent)
    metrics_registry::fold(*b);
  if (filling)
    metrics_registry::fold(*filling);
}

std::size_t metrics_feed::held() const {
  std::lock_guard<std::mutex> guard{mutex_};
  auto n = filling_->ops.size();
  for (const auto& b : sent_)
    if (!b->folded.load(std::memory_order_acquire))
      n += b->ops.size();
  return n;
}

bool metrics_feed::actor_idle() const {
  std::lock_guard<std::mutex> guard{mutex_};
  auto* self = static_cast<caf::scheduled_actor*>(caf::actor_cast<caf::abstract_actor*>(actor_));
  return self != nullptr && self->mailbox().blocked();
}

void metrics_feed::stop() {
  fold_pending();
  metrics_handle actor;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    actor = std::exchange(actor_, metrics_handle{}); // later ops wait for a reader's fold
  }
  if (actor)
    caf::anon_send(actor, shutdown_atom::value);
}

} // namespace mccl::actors
