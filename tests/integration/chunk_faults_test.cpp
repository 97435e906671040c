// Faults on chunk messages ("on": "chunk", collectives/engine/chunk_faults.hpp),
// ranks as threads, over TCP and shared memory: a delayed or reordered
// chunk still gives exact results; a duplicated one is dropped by its op
// (counted in the report and the metrics) and results stay exact; a
// dropped one fails its op at MCCL_TIMEOUT_MS on every rank, naming op,
// seq, rank, phase and the peer it waits on. Each case checks what the
// fault report says.

#include <mccl/mccl.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace {

std::atomic<uint32_t> next_comm_id{7501};

struct run_result {
  uint32_t comm_id = 0;
  std::vector<std::string> errors; ///< by rank: what its work threw, empty if nothing
};

/// Runs fn on `world` threads with the scenario as comm_options::faults.
run_result run_with_faults(mccl::runtime& rt, int world, const std::string& scenario_json,
                           const mccl::config_overrides& overrides,
                           const std::function<void(mccl::communicator&)>& fn) {
  auto scenario = std::make_shared<mccl::transport::fault_scenario>(
    mccl::transport::parse_fault_scenario(scenario_json, "chunk_faults_test"));
  auto store = std::make_shared<mccl::memory_store>();
  run_result out;
  out.comm_id = next_comm_id++;
  out.errors.resize(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      mccl::comm_options o;
      o.rank = r;
      o.world_size = world;
      o.store = store;
      o.comm_id = out.comm_id;
      o.overrides = overrides;
      o.faults = scenario;
      std::unique_ptr<mccl::communicator> comm;
      try {
        comm = std::make_unique<mccl::communicator>(rt.create_communicator(o));
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << " could not connect: " << e.what();
        return;
      }
      try {
        fn(*comm);
      } catch (const std::exception& e) {
        out.errors[static_cast<std::size_t>(r)] = e.what();
      }
      try {
        comm->finalize();
      } catch (const std::exception&) {
        // an aborted communicator finalizes too; its error is the op's
      }
    });
  for (auto& t : threads)
    t.join();
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size())
    ++n;
  return n;
}

/// The text reports of every rank (then removes the files).
std::vector<std::string> take_reports(const std::string& prefix, uint32_t id, int world) {
  std::vector<std::string> texts;
  for (int r = 0; r < world; ++r) {
    auto name = prefix + ".rank" + std::to_string(r) + ".comm" + std::to_string(id);
    texts.push_back(slurp(name + ".txt"));
    std::remove((name + ".txt").c_str());
    std::remove((name + ".json").c_str());
  }
  return texts;
}

/// Collectives of one, a few and many chunks (MCCL_CHUNK_BYTES=4K) and a
/// send/receive ring, each result checked element by element.
void exact_ops(mccl::communicator& comm) {
  const int r = comm.rank();
  const int world = comm.size();
  for (std::size_t count : {std::size_t{1}, std::size_t{4099}, std::size_t{40009}}) {
    std::vector<int64_t> v(count);
    for (std::size_t i = 0; i < count; ++i)
      v[i] = static_cast<int64_t>(i) * 3 + r;
    comm.allreduce(v.data(), count, mccl::dtype::int64, mccl::redop::sum).wait();
    for (std::size_t i = 0; i < count; ++i)
      ASSERT_EQ(v[i], static_cast<int64_t>(i) * 3 * world + world * (world - 1) / 2)
        << "allreduce count " << count << " index " << i;
    std::vector<int64_t> all(count * world);
    std::vector<int64_t> mine(count, r);
    comm.allgather(mine.data(), all.data(), count, mccl::dtype::int64).wait();
    for (std::size_t i = 0; i < all.size(); ++i)
      ASSERT_EQ(all[i], static_cast<int64_t>(i / count)) << "allgather count " << count;
    std::vector<int64_t> b(count, r == 1 ? 11 : -1);
    comm.broadcast(b.data(), count, mccl::dtype::int64, 1).wait();
    for (auto x : b)
      ASSERT_EQ(x, 11) << "broadcast count " << count;
    std::vector<int64_t> parts(count * world, r + 1), part(count, -1);
    comm.reduce_scatter(parts.data(), part.data(), count, mccl::dtype::int64).wait();
    for (auto x : part)
      ASSERT_EQ(x, world * (world + 1) / 2) << "reduce_scatter count " << count;
    std::vector<int64_t> to_all(count * world), from_all(count * world, -1);
    for (std::size_t i = 0; i < to_all.size(); ++i)
      to_all[i] = r * 1000 + static_cast<int64_t>(i / count);
    comm.alltoall(to_all.data(), from_all.data(), count, mccl::dtype::int64).wait();
    for (std::size_t i = 0; i < from_all.size(); ++i)
      ASSERT_EQ(from_all[i], static_cast<int64_t>(i / count) * 1000 + r) << "alltoall count " << count;
    std::vector<int64_t> at_root(count * world, -1);
    comm.gather(mine.data(), at_root.data(), count, mccl::dtype::int64, 0).wait();
    if (r == 0) {
      for (std::size_t i = 0; i < at_root.size(); ++i)
        ASSERT_EQ(at_root[i], static_cast<int64_t>(i / count)) << "gather count " << count;
    }
    std::vector<int64_t> got(count, -1);
    auto rx = comm.recv(got.data(), count, (r + world - 1) % world, 3);
    comm.send(mine.data(), count, (r + 1) % world, 3).wait();
    rx.wait();
    for (auto x : got)
      ASSERT_EQ(x, (r + world - 1) % world) << "send/recv count " << count;
  }
}

class ChunkFaults : public ::testing::TestWithParam<const char*> {
protected:
  mccl::config_overrides settings(int timeout_ms = 20000) {
    mccl::config_overrides ov;
    ov.set("MCCL_TRANSPORT", GetParam())
      .set("MCCL_FAULTS_REPORT", prefix_)
      .set("MCCL_TIMEOUT_MS", timeout_ms)
      .set("MCCL_CHUNK_BYTES", "4K");
    return ov;
  }
  mccl::runtime rt_;
  std::string prefix_ = "/tmp/mccl-chunk-faults-test-" + std::to_string(::getpid());
};

TEST_P(ChunkFaults, DelayedChunksGiveExactResults) {
  const int world = 3;
  auto run = run_with_faults(rt_, world, R"({"seed": 3, "faults": [
      {"kind": "delay", "on": "chunk", "link": "*->*", "ms": 20, "probability": 0.05, "count": 4}]})",
                             settings(), exact_ops);
  for (const auto& e : run.errors)
    EXPECT_EQ(e, "");
  std::size_t delays = 0;
  for (const auto& text : take_reports(prefix_, run.comm_id, world)) {
    delays += count_of(text, "  chunk_delay  peer");
    EXPECT_EQ(text.find("FAILED"), std::string::npos) << text;
  }
  EXPECT_GT(delays, 3u); // up to 4 per rank
}

TEST_P(ChunkFaults, ReorderedChunksGiveExactResults) {
  const int world = 3;
  auto run = run_with_faults(rt_, world, R"({"seed": 7, "faults": [
      {"kind": "reorder", "on": "chunk", "link": "*->*", "probability": 0.2, "count": 0}]})",
                             settings(), exact_ops);
  for (const auto& e : run.errors)
    EXPECT_EQ(e, "");
  std::size_t reorders = 0;
  for (const auto& text : take_reports(prefix_, run.comm_id, world)) {
    reorders += count_of(text, "  chunk_reorder  peer");
    EXPECT_EQ(text.find("FAILED"), std::string::npos) << text;
  }
  EXPECT_GT(reorders, 20u);
}

TEST_P(ChunkFaults, DuplicatedChunksAreDroppedByTheirOp) {
  const int world = 3;
  auto dropped_before = mccl::get_metrics().duplicate_chunks_dropped;
  auto run = run_with_faults(rt_, world, R"({"seed": 5, "faults": [
      {"kind": "duplicate", "on": "chunk", "link": "*->*", "probability": 0.2, "count": 0}]})",
                             settings(), exact_ops);
  for (const auto& e : run.errors)
    EXPECT_EQ(e, "");
  std::size_t copies = 0;
  for (const auto& text : take_reports(prefix_, run.comm_id, world)) {
    auto injected = count_of(text, "  chunk_duplicate  peer");
    // Every copy reaches an op that already has the chunk (ops end only
    // once every chunk is in, and the copy follows its original at once).
    EXPECT_EQ(count_of(text, "  duplicate_dropped  peer"), injected) << text;
    EXPECT_EQ(text.find("FAILED"), std::string::npos) << text;
    copies += injected;
  }
  EXPECT_GT(copies, 20u);
  EXPECT_EQ(mccl::get_metrics().duplicate_chunks_dropped - dropped_before, copies);
}

TEST_P(ChunkFaults, ADroppedChunkFailsItsOpAtTheTimeoutOnEveryRank) {
  const int world = 2;
  auto began = std::chrono::steady_clock::now();
  int64_t value = 0;
  auto run = run_with_faults(rt_, world, R"({"faults": [
      {"kind": "drop", "on": "chunk", "link": "1->0", "seq": 1, "op": "allreduce"}]})",
                             settings(600), [&](mccl::communicator& comm) {
    for (int i = 0; i < 3; ++i) {
      int64_t v = comm.rank() + 1;
      comm.allreduce(&v, 1, mccl::dtype::int64, mccl::redop::sum).wait();
      if (comm.rank() == 0)
        value = v;
    }
  });
  auto took = std::chrono::steady_clock::now() - began;
  EXPECT_EQ(value, 3); // seq 0 completed
  // Rank 0 never got rank 1's chunk of seq 1: it times out, naming the op,
  // where it stood and whom it waited on.
  const auto& e0 = run.errors[0];
  for (const char* w : {"allreduce seq 1 on rank 0", "waiting on rank", "1",
                        "timed out after MCCL_TIMEOUT_MS=600 ms"})
    EXPECT_NE(e0.find(w), std::string::npos) << e0 << "\nmissing: " << w;
  // Rank 1 fails too: by its own timeout, or by rank 0's abort, which
  // names the same op.
  const auto& e1 = run.errors[1];
  EXPECT_NE(e1.find("seq 1"), std::string::npos) << e1;
  EXPECT_TRUE(e1.find("timed out after MCCL_TIMEOUT_MS=600 ms") != std::string::npos
              || e1.find("rank 0 aborted the communicator") != std::string::npos)
    << e1;
  EXPECT_LT(took, std::chrono::seconds(8));
  auto reports = take_reports(prefix_, run.comm_id, world);
  EXPECT_EQ(count_of(reports[0], "  chunk_drop  peer 1  seq 1"), 1u) << reports[0];
  EXPECT_NE(reports[0].find("FAILED: allreduce seq 1 on rank 0"), std::string::npos) << reports[0];
  EXPECT_EQ(count_of(reports[1], "  chunk_"), 0u) << reports[1];
}

INSTANTIATE_TEST_SUITE_P(Transports, ChunkFaults, ::testing::Values("tcp", "shm"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

} // namespace
