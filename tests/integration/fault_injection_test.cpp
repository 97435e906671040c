// Fault injection through the C++ API (comm_options::faults), ranks as
// threads over loopback TCP: with MCCL_TRANSPORT_CRC every corrupted chunk is
// retransmitted and every result is bit-exact, across several ops; the
// report lands where MCCL_FAULTS_REPORT says; a scenario naming a rank
// outside the job is refused.

#include <mccl/mccl.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace {

std::atomic<uint32_t> next_comm_id{7001};

/// Runs fn on `world` threads with the scenario as comm_options::faults;
/// returns the communicator id (reports are named after it).
uint32_t run_with_faults(mccl::runtime& rt, int world, const std::string& scenario_json,
                     const mccl::config_overrides& overrides,
                     const std::function<void(mccl::communicator&)>& fn) {
  auto scenario = std::make_shared<mccl::transport::fault_scenario>(
    mccl::transport::parse_fault_scenario(scenario_json, "fault_injection_test"));
  auto store = std::make_shared<mccl::memory_store>();
  uint32_t id = next_comm_id++;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        mccl::comm_options o;
        o.rank = r;
        o.world_size = world;
        o.store = store;
        o.comm_id = id;
        o.overrides = overrides;
        o.faults = scenario;
        auto comm = rt.create_communicator(o);
        fn(comm);
        comm.finalize();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  for (auto& t : threads)
    t.join();
  return id;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

TEST(FaultInjection, CorruptedChunksAreRecoveredBitExact) {
  mccl::runtime rt;
  std::string prefix = "/tmp/mccl-fault-injection-test-" + std::to_string(::getpid());
  mccl::config_overrides ov;
  ov.set("MCCL_TRANSPORT_CRC", true).set("MCCL_FAULTS_REPORT", prefix).set("MCCL_TIMEOUT_MS", 20000);
  const int world = 3;
  auto id = run_with_faults(rt, world,
                  R"({"seed": 4, "faults": [{"kind": "corrupt", "link": "*->*", "probability": 0.25,
                       "count": 0, "bits": 2}]})",
                  ov, [&](mccl::communicator& comm) {
    const int r = comm.rank();
    for (std::size_t count : {std::size_t{1}, std::size_t{4099}, std::size_t{300007}}) {
      std::vector<int64_t> v(count);
      for (std::size_t i = 0; i < count; ++i)
        v[i] = static_cast<int64_t>(i) * 3 + r;
      comm.allreduce(v.data(), count, mccl::dtype::int64, mccl::redop::sum).wait();
      for (std::size_t i = 0; i < count; ++i)
        ASSERT_EQ(v[i], static_cast<int64_t>(i) * 9 + 3) << "allreduce count " << count << " index " << i;
      std::vector<int64_t> all(count * world);
      std::vector<int64_t> mine(count, r);
      comm.allgather(mine.data(), all.data(), count, mccl::dtype::int64).wait();
      for (std::size_t i = 0; i < all.size(); ++i)
        ASSERT_EQ(all[i], static_cast<int64_t>(i / count)) << "allgather count " << count;
      std::vector<int64_t> got(count, -1);
      auto rx = comm.recv(got.data(), count, (r + world - 1) % world, 3);
      comm.send(mine.data(), count, (r + 1) % world, 3).wait();
      rx.wait();
      for (auto x : got)
        ASSERT_EQ(x, (r + world - 1) % world) << "send/recv count " << count;
    }
  });
  std::size_t faults = 0, retransmits = 0;
  for (int r = 0; r < world; ++r) {
    auto name = prefix + ".rank" + std::to_string(r) + ".comm" + std::to_string(id);
    auto text = slurp(name + ".txt");
    auto json = slurp(name + ".json");
    EXPECT_NE(json.find("\"rank\": " + std::to_string(r)), std::string::npos) << json.substr(0, 200);
    for (std::size_t at = 0; (at = text.find("  corrupt  peer", at)) != std::string::npos; ++at)
      ++faults;
    for (std::size_t at = 0; (at = text.find("  retransmit  peer", at)) != std::string::npos; ++at)
      ++retransmits;
    EXPECT_EQ(text.find("FAILED"), std::string::npos) << text;
    std::remove((name + ".txt").c_str());
    std::remove((name + ".json").c_str());
  }
  EXPECT_GT(faults, 5u);
  EXPECT_EQ(retransmits, faults);
}

TEST(FaultInjection, ScenarioNamingARankOutsideTheJobIsRefused) {
  mccl::runtime rt;
  auto scenario = std::make_shared<mccl::transport::fault_scenario>(mccl::transport::parse_fault_scenario(
    R"({"faults": [{"kind": "crash", "rank": 5}]})", "my scenario"));
  mccl::comm_options o;
  o.rank = 0;
  o.world_size = 2;
  o.store = std::make_shared<mccl::memory_store>();
  o.faults = scenario;
  try {
    rt.create_communicator(o);
    ADD_FAILURE() << "accepted";
  } catch (const mccl::error& e) {
    EXPECT_EQ(e.code(), mccl::errc::invalid_config);
    EXPECT_NE(e.message().find("my scenario: fault #0 (crash) names rank 5, but the job has ranks 0..1"),
              std::string::npos)
      << e.message();
  }
}
