// Supervision of op actors (actors/op_actor.hpp): an op actor whose
// handler throws what its op's own guard does not catch dies with an
// error; its op fails naming why, the communicator aborts on every rank,
// the supervisor hears of it, and the process goes on.

#include "rank_threads.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

using mccl_test::run_ranks;

namespace {

/// Every rank sends one chunk to every other; on rank 1 the first chunk
/// that arrives makes the algorithm throw an int (no std::exception, so
/// the op's guard lets it through to the actor).
class throwing_exchange final : public mccl::algorithm {
public:
  throwing_exchange(mccl::collective_io& io, const mccl::collective_args& args) : io_(io), args_(args) {}
  void start() override {
    for (int peer = 0; peer < args_.world; ++peer)
      if (peer != args_.rank)
        io_.send(peer, 0, 0, &byte_, 1);
    if (args_.world == 1)
      io_.finish();
  }
  void on_chunk(const mccl::incoming_chunk&) override {
    if (args_.rank == 1)
      throw 42;
    if (++arrived_ == args_.world - 1)
      io_.finish();
  }
  std::string where() const override { return "step 0"; }

private:
  mccl::collective_io& io_;
  mccl::collective_args args_;
  unsigned char byte_ = 1;
  int arrived_ = 0;
};

} // namespace

TEST(OpActorSupervision, AnOpActorThatDiesFailsItsOpAndAbortsTheCommunicatorOnEveryRank) {
  mccl::register_collective("throwing_exchange", [](mccl::collective_io& io, const mccl::collective_args& a) {
    return std::make_unique<throwing_exchange>(io, a);
  });
  mccl::runtime rt;
  mccl::config_overrides o;
  o.set("MCCL_CONNECT_TIMEOUT_MS", 10000);
  o.set("MCCL_TIMEOUT_MS", 10000);
  o.set("MCCL_TRANSPORT", "tcp");
  run_ranks(rt, 3, o, [](mccl::communicator& comm) {
    unsigned char in = 1, out = 0;
    auto start = std::chrono::steady_clock::now();
    std::string what;
    try {
      comm.custom("throwing_exchange", &in, &out, 1, mccl::dtype::uint8).wait();
    } catch (const mccl::error& e) {
      what = e.what();
    }
    if (comm.rank() == 1) {
      EXPECT_NE(what.find("its op actor failed: an exception that is not a std::exception"), std::string::npos)
        << "rank 1: " << (what.empty() ? "the op succeeded" : what);
    }
    // Another rank's op may have had all it needed before rank 1 threw.
    // Either way the communicator aborted on every rank, naming rank 1:
    // the next op fails.
    std::string next;
    float x = 1;
    try {
      comm.allreduce(&x, 1).wait();
    } catch (const mccl::error& e) {
      next = e.what();
    }
    auto took = std::chrono::steady_clock::now() - start;
    ASSERT_FALSE(next.empty()) << "rank " << comm.rank() << ": the op after the abort succeeded";
    EXPECT_NE(next.find("rank 1"), std::string::npos) << "rank " << comm.rank() << ": " << next;
    EXPECT_NE(next.find("op actor failed"), std::string::npos) << "rank " << comm.rank() << ": " << next;
    EXPECT_LT(took, std::chrono::seconds(5)) << "rank " << comm.rank() << ": " << next;
  });
}
