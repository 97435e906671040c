// libFuzzer target: the acceptor's handshake check (transport/wire/handshake.hpp)
// on arbitrary bytes, as a stray connection would send them to rank 1 of a
// world of 4 whose rank 3 is already connected. Anything accepted must be a
// hello from rank 2 (the only rank that may still dial) with the job token.
#include "transport/wire/handshake.hpp"

#include <cstdlib>

using namespace mccl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  transport::handshake_expectations expect{1, 4, 7, "fuzz-job-token"};
  std::vector<bool> connected{true, false, false, true};
  wire::hello out;
  auto why = transport::vet_handshake_bytes(expect, data, size, connected, out);
  if (why.empty()) {
    if (out.from_rank != 2 || out.to_rank != 1 || out.world_size != 4
        || out.token != expect.token)
      std::abort();
  }
  return 0;
}
