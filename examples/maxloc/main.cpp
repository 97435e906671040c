// Runs the "maxloc" custom collective (maxloc.hpp) on every rank:
//   tools/mcclrun -n 4 -- build/examples/maxloc_example
// Rank r contributes values that peak on a different rank per element; every
// rank prints which rank held each maximum.

#include "maxloc.hpp"

#include <cstdio>

int main() {
  try {
    mccl_examples::register_maxloc();
    mccl::runtime rt;
    auto comm = rt.communicator_from_env();
    const std::size_t n = 4;
    std::vector<float> values(n);
    for (std::size_t i = 0; i < n; ++i) // element i peaks on rank i % size
      values[i] = static_cast<float>((comm.rank() + comm.size() - static_cast<int>(i) % comm.size())
                                     % comm.size());
    std::vector<mccl_examples::value_and_rank> out(n);
    auto w = comm.custom("maxloc", values.data(), out.data(), n, mccl::dtype::float32);
    w.wait();
    for (std::size_t i = 0; i < n; ++i)
      std::printf("element %zu: max %.0f held by rank %d\n", i, out[i].value, out[i].rank);
    std::printf("algorithm %s, %zu bytes\n", w.metrics().algorithm.c_str(), w.metrics().bytes);
    comm.finalize();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
