// Runs the "grad_norm" custom collective (grad_norm.hpp) on every rank and
// checks it against a plain allreduce and a norm computed here:
//   tools/mcclrun -n 4 -- build/examples/grad_norm_example [count...]
// Exits 1 when a rank's result differs.

#include "grad_norm.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

/// One op of `n` gradients, compared with a built-in allreduce and a norm
/// computed here.
bool check(mccl::communicator& comm, std::size_t n) {
  std::vector<float> grads(n);
  for (std::size_t i = 0; i < n; ++i) // small integers: every sum is exact
    grads[i] = static_cast<float>((i * 7 + static_cast<std::size_t>(comm.rank()) * 3) % 11) - 5.0f;

  std::vector<float> out(n + 1); // the sum, then its norm
  comm.custom("grad_norm", grads.data(), out.data(), n, mccl::dtype::float32).wait();

  std::vector<float> want = grads;
  comm.allreduce(want.data(), n).wait();
  double squares = 0;
  for (float g : want)
    squares += static_cast<double>(g) * g;
  auto norm = static_cast<float>(std::sqrt(squares));

  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    wrong += out[i] != want[i];
  bool ok = wrong == 0 && std::fabs(out[n] - norm) <= 1e-5f * norm;
  std::printf("rank %d: %zu gradients summed (%zu wrong), norm %.6g (expected %.6g): %s\n",
              comm.rank(), n, wrong, out[n], norm, ok ? "ok" : "WRONG");
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  try {
    mccl_examples::register_grad_norm();
    mccl::runtime rt;
    auto comm = rt.communicator_from_env();
    std::vector<std::size_t> counts{1000};
    if (argc > 1)
      counts.clear();
    for (int a = 1; a < argc; ++a)
      counts.push_back(std::strtoull(argv[a], nullptr, 10));
    bool ok = true;
    for (auto n : counts)
      ok = check(comm, n) && ok;
    comm.finalize();
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
