// actor-hop: what a message between two actors costs, round trips of a
// ping-pong pair (a) on a driving unit drained by this thread
// (actors/driving_unit.hpp: no thread hop), (b) on CAF's workers (the
// scheduler; CAF keeps such a pair on one worker once it runs), and (c)
// between this plain thread and an actor on CAF's workers (a scoped_actor's
// request and reply: two thread hops per round trip, what the engine's
// threads pay to reach actors that run elsewhere); and (d) the op actors'
// pattern: one message from the driving thread to an idle actor of its
// unit, then a drain. Prints the median of `rounds` runs, in ns per
// message.
//
//   build/bench/actor-hop [trips=100000] [rounds=5]

#include "actors/driving_unit.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <vector>

namespace {

using ping_atom = caf::atom_constant<caf::atom("ping")>;
using clock_type = std::chrono::steady_clock;

caf::behavior echo(caf::event_based_actor*) {
  return {[](ping_atom, int n) { return caf::make_message(ping_atom::value, n); }};
}

/// Sends `trips` pings to `peer`, one at a time; quits after the last.
caf::behavior player(caf::event_based_actor* self, caf::actor peer, int trips, std::promise<void>* done) {
  return {[=](ping_atom, int n) {
    if (n == trips) {
      done->set_value();
      self->quit();
      return;
    }
    self->send(peer, ping_atom::value, n + 1);
  }};
}

double ns_per_message(clock_type::duration d, int trips) {
  return std::chrono::duration<double, std::nano>(d).count() / (2.0 * trips);
}

double on_driving_unit(caf::actor_system& sys, int trips) {
  mccl::actors::driving_unit unit{sys};
  mccl::actors::driving_unit::driver_scope driving{unit};
  std::promise<void> done;
  auto peer = unit.spawn(echo);
  auto me = unit.spawn(player, peer, trips, &done);
  unit.drain();
  auto start = clock_type::now();
  unit.deliver(me, ping_atom::value, 0);
  while (!unit.idle())
    unit.drain();
  auto took = clock_type::now() - start;
  caf::anon_send_exit(peer, caf::exit_reason::user_shutdown);
  return ns_per_message(took, trips);
}

caf::behavior sink(caf::event_based_actor*, uint64_t* seen) {
  return {[=](ping_atom, int) { ++*seen; }};
}

/// The op actors' pattern (actors/op_actor.hpp): the driving thread sends
/// one message to an idle actor of its unit and drains the unit, `trips`
/// times; ns per message.
double deliver_and_drain(caf::actor_system& sys, int trips) {
  mccl::actors::driving_unit unit{sys};
  mccl::actors::driving_unit::driver_scope driving{unit};
  uint64_t seen = 0;
  auto actor = unit.spawn(sink, &seen);
  unit.drain();
  auto start = clock_type::now();
  for (int n = 0; n < trips; ++n) {
    unit.deliver(actor, ping_atom::value, n);
    unit.drain();
  }
  auto took = clock_type::now() - start;
  if (seen != static_cast<uint64_t>(trips))
    std::abort();
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  return ns_per_message(took, trips) * 2.0; // one message per trip
}

double on_workers(caf::actor_system& sys, int trips) {
  std::promise<void> done;
  auto finished = done.get_future();
  auto peer = sys.spawn(echo);
  auto me = sys.spawn(player, peer, trips, &done);
  auto start = clock_type::now();
  caf::anon_send(me, ping_atom::value, 0);
  finished.wait();
  auto took = clock_type::now() - start;
  caf::anon_send_exit(peer, caf::exit_reason::user_shutdown);
  return ns_per_message(took, trips);
}

double thread_to_worker(caf::actor_system& sys, int trips) {
  auto peer = sys.spawn(echo);
  caf::scoped_actor self{sys};
  auto start = clock_type::now();
  for (int n = 0; n < trips; ++n)
    self->request(peer, std::chrono::seconds(10), ping_atom::value, n)
      .receive([](ping_atom, int) {}, [](caf::error&) { std::abort(); });
  auto took = clock_type::now() - start;
  caf::anon_send_exit(peer, caf::exit_reason::user_shutdown);
  return ns_per_message(took, trips);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  int trips = argc > 1 ? std::atoi(argv[1]) : 100000;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  if (trips <= 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: actor-hop [trips>0] [rounds>0]\n");
    return 2;
  }
  caf::actor_system_config cfg;
  // mccl's own scheduler settings (actors/runtime.cpp).
  cfg.set("scheduler.max-threads", static_cast<size_t>(2));
  cfg.set("work-stealing.moderate-poll-attempts", static_cast<size_t>(0));
  caf::actor_system sys{cfg};
  std::vector<double> unit, one_way, workers, crossing;
  // Thread hops are ~100x dearer: fewer of them give as steady a median.
  int hops = std::max(1, trips / 50);
  for (int r = 0; r < rounds; ++r) {
    unit.push_back(on_driving_unit(sys, trips));
    one_way.push_back(deliver_and_drain(sys, trips));
    workers.push_back(on_workers(sys, trips));
    crossing.push_back(thread_to_worker(sys, hops));
  }
  std::printf("messages: %d round trips x %d rounds, median ns per message\n", trips, rounds);
  std::printf("driving unit (one thread): %.0f\n", median(unit));
  std::printf("deliver + drain (op actor): %.0f\n", median(one_way));
  std::printf("CAF workers (scheduler):   %.0f\n", median(workers));
  std::printf("plain thread <-> worker:   %.0f (%d round trips)\n", median(crossing), hops);
  sys.await_all_actors_done();
  return 0;
}
