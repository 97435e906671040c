#include "actors/runtime_impl.hpp"
#include "transport/store/tcp_store.hpp"

#include "actors/metrics_actor.hpp"
#include "actors/watchdog_actor.hpp"
#include "collectives/extension/registry.hpp"
#include "config/log.hpp"

#include <caf/all.hpp>

#include <thread>

namespace mccl {

namespace {

std::unique_ptr<caf::actor_system_config> make_system_config(const config& cfg) {
  auto c = std::make_unique<caf::actor_system_config>();
  // Set in code: a library must not read caf-application.ini from the
  // working directory. Few workers that go to sleep quickly: an idle rank
  // should cost no CPU, and on small machines several ranks share cores.
  c->set("scheduler.max-threads", static_cast<size_t>(cfg.worker_threads));
  c->set("work-stealing.moderate-poll-attempts", static_cast<size_t>(0));
  // An idle worker sleeps on its queue's condition variable, which a job
  // queued for it signals; the timeout only lets it steal another
  // worker's jobs. CAF's default of 10 ms woke each idle worker 100 times
  // a second, and on a host whose cores all run ranks each wake-up takes
  // a core from a rank for a moment: 32 ranks on 32 cores made some 200
  // worker wake-ups a second per rank. A second bounds how long a job may
  // wait behind a busy worker while another sleeps (mccl's actors never
  // block a worker for long: the progress actor's turns are bounded).
  c->set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::seconds(1)});
  // A progress actor that drives the engine re-enqueues itself; a small
  // throughput lets other actors run in between on the same worker.
  c->set("scheduler.max-throughput", static_cast<size_t>(8));
  return c;
}

} // namespace

runtime::impl::impl(const config_overrides& o, caf::actor_system* host)
  : overrides(o), cfg(resolve_config(o)) {
  log::set_level(cfg.log_level);
  register_builtin_algorithms();
  if (host) {
    system = host;
  } else {
    system_config = make_system_config(cfg);
    owned_system = std::make_unique<caf::actor_system>(*system_config);
    system = owned_system.get();
  }
  reactor = std::make_unique<transport::reactor>();
  watchdog = actors::spawn_watchdog_actor(*system);
  metrics = actors::metrics_feed::start(*system);
}

runtime::impl::~impl() {
  status.reset(); // its handlers read this runtime's communicators
  standby.reset(); // served on the reactor, which goes below
  caf::anon_send(watchdog, actors::shutdown_atom::value);
  watchdog = nullptr;
  metrics->stop(); // folds what it holds: get_metrics() counts it after the runtime is gone
  // Give actors a bounded moment to finish; never wait without a bound.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (owned_system && system->registry().running() > 0
         && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  reactor.reset();
  if (owned_system) {
    if (system->registry().running() > 0) {
      MCCL_LOG(warn, "runtime shutdown: " << system->registry().running()
                                          << " actor(s) still running; not waiting for them");
      owned_system->await_actors_before_shutdown(false);
    }
    owned_system.reset();
  }
}

runtime::runtime(const config_overrides& overrides)
  : impl_(std::make_shared<impl>(overrides, nullptr)) {
}

runtime::runtime(caf::actor_system& host_system, const config_overrides& overrides)
  : impl_(std::make_shared<impl>(overrides, &host_system)) {
}

runtime::~runtime() {
  std::vector<std::shared_ptr<communicator::impl>> open;
  {
    std::lock_guard<std::mutex> guard{impl_->comms_mutex};
    for (auto& w : impl_->comms)
      if (auto c = w.lock())
        open.push_back(std::move(c));
    impl_->comms.clear();
  }
  for (auto& c : open)
    communicator(c).finalize();
}

const config& runtime::settings() const { return impl_->cfg; }

caf::actor_system& runtime::system() { return *impl_->system; }

communicator runtime::communicator_from_env() {
  return create_communicator(comm_options_from_env());
}

} // namespace mccl
