// A training server written with CAF actors that sums gradients through
// mccl by messages (include/mccl/comm_actor.hpp), never a blocking call.
//
//   tools/mcclrun -n 3 -- build/examples/actor_trainer [steps] [step_ms]
//
// Each rank fits y = w . x (8 weights) on data of its own by SGD: its
// trainer actor computes the local gradient, asks the communicator's actor
// to allreduce it, and steps when the answer arrives. Every rank ends with
// the same weights. The trainer monitors the communicator's actor: when a
// peer dies the actor exits with the abort as its reason, and the trainer
// learns of it from that down message (or from the error answering its
// pending request), prints why, and ends the program with status 3.
//
// Prints "step S loss L" every 10 steps and "done: w = ..." at the end.

#include <mccl/comm_actor.hpp>
#include <mccl/communicator.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/all.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr int dims = 8;
constexpr int samples = 64;

struct trainer_state {
  std::vector<float> w = std::vector<float>(dims, 0.0f);
  std::vector<float> x, y; ///< this rank's samples (x: samples x dims)
  std::vector<float> grad = std::vector<float>(dims, 0.0f);
  int step = 0;
  int rank = 0;
  int world = 1;
  /// How the run ended: 0 done, 3 the communicator failed.
  int* status = nullptr;
  static inline const char* name = "trainer";
};

/// Data of rank `rank`: y = true_w . x plus nothing, x pseudo-random.
void make_data(trainer_state& s) {
  unsigned seed = 12345u + static_cast<unsigned>(s.rank) * 7919u;
  auto next = [&] {
    seed = seed * 1103515245u + 12345u;
    return static_cast<float>((seed >> 8) % 2000) / 1000.0f - 1.0f;
  };
  for (int i = 0; i < samples; ++i) {
    float target = 0;
    for (int d = 0; d < dims; ++d) {
      float v = next();
      s.x.push_back(v);
      target += v * static_cast<float>(d + 1) / dims; // the true weights
    }
    s.y.push_back(target);
  }
}

/// Fills s.grad with this rank's mean-squared-error gradient; returns the loss.
float local_gradient(trainer_state& s) {
  std::fill(s.grad.begin(), s.grad.end(), 0.0f);
  float loss = 0;
  for (int i = 0; i < samples; ++i) {
    float pred = 0;
    for (int d = 0; d < dims; ++d)
      pred += s.w[d] * s.x[i * dims + d];
    float err = pred - s.y[i];
    loss += err * err / samples;
    for (int d = 0; d < dims; ++d)
      s.grad[d] += 2 * err * s.x[i * dims + d] / samples;
  }
  return loss;
}

using step_atom = caf::atom_constant<caf::atom("step")>;

caf::behavior trainer(caf::stateful_actor<trainer_state>* self, mccl::comm_actor comm, int rank,
                      int world, int steps, int step_ms, int* status) {
  auto& s = self->state;
  s.rank = rank;
  s.world = world;
  s.status = status;
  make_data(s);
  // The communicator's actor exits when the communicator aborts: that
  // down message is how this actor hears of a lost peer between requests.
  self->monitor(comm);
  self->set_down_handler([self](caf::down_msg& down) {
    std::printf("rank %d: the communicator ended at step %d: %s\n", self->state.rank, self->state.step,
                mccl::describe(down.reason).c_str());
    std::fflush(stdout);
    *self->state.status = 3;
    self->quit(down.reason);
  });
  self->send(self, step_atom::value);
  return {
    [=](step_atom) {
      auto& st = self->state;
      float loss = local_gradient(st);
      if (st.step % 10 == 0) {
        std::printf("rank %d: step %d loss %.6f\n", st.rank, st.step, static_cast<double>(loss));
        std::fflush(stdout);
      }
      mccl::buffer_view view{st.grad.data(), st.grad.size(), mccl::dtype::float32};
      self->request(comm, std::chrono::seconds(60), mccl::allreduce_atom::value, view, mccl::redop::avg)
        .then(
          [=](const mccl::op_metrics&) {
            auto& st2 = self->state;
            for (int d = 0; d < dims; ++d)
              st2.w[d] -= 0.1f * st2.grad[d];
            if (++st2.step == steps) {
              std::printf("rank %d: done: w =", st2.rank);
              for (float v : st2.w)
                std::printf(" %.6f", static_cast<double>(v));
              std::printf("\n");
              std::fflush(stdout);
              *st2.status = 0;
              self->quit();
              return;
            }
            if (step_ms > 0)
              self->delayed_send(self, std::chrono::milliseconds(step_ms), step_atom::value);
            else
              self->send(self, step_atom::value);
          },
          [=](caf::error& e) {
            std::printf("rank %d: step %d failed: %s\n", self->state.rank, self->state.step,
                        mccl::describe(e).c_str());
            std::fflush(stdout);
            *self->state.status = 3;
            self->quit(e);
          });
    },
  };
}

} // namespace

int main(int argc, char** argv) {
  int steps = argc > 1 ? std::atoi(argv[1]) : 50;
  int step_ms = argc > 2 ? std::atoi(argv[2]) : 0;
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<size_t>(2));
  caf::actor_system system{cfg};
  int status = 1;
  {
    mccl::runtime rt{system}; // mccl's actors live in this program's system
    auto comm = rt.communicator_from_env();
    auto comm_actor = mccl::spawn_comm_actor(system, comm);
    auto t = system.spawn(trainer, comm_actor, comm.rank(), comm.size(), steps, step_ms, &status);
    {
      caf::scoped_actor waiter{system};
      waiter->monitor(t);
      waiter->receive([](caf::down_msg&) {});
    }
    caf::anon_send_exit(comm_actor, caf::exit_reason::user_shutdown);
    comm.finalize();
  }
  system.await_all_actors_done();
  return status;
}
