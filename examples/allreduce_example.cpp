// The smallest useful mccl program: every rank contributes its rank number,
// and after the allreduce every rank holds 0 + 1 + ... + (world - 1).
//
//   tools/mcclrun -n 4 -- build/examples/allreduce_example

#include <mccl/mccl.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    mccl::runtime rt;                          // owns the actor system and I/O thread
    auto comm = rt.communicator_from_env();   // RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT

    std::vector<float> grads(1000, static_cast<float>(comm.rank()));
    auto work = comm.allreduce(grads.data(), grads.size(), mccl::redop::sum);
    work.wait();                               // throws mccl::error if any rank failed

    float expected = comm.size() * (comm.size() - 1) / 2.0f;
    std::printf("rank %d of %d: grads[0] = %g (expected %g)\n", comm.rank(), comm.size(),
                grads[0], expected);
    comm.finalize();
    return grads[0] == expected ? 0 : 1;
  } catch (const mccl::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
