// Compression on the wire (MCCL_COMPRESSION / op_options::compression):
// float32 payloads travel as float16 or bfloat16 and reductions add in
// float32. Ranks are threads of this process.
//
// What must hold, for every algorithm that can carry it, worlds 2..5:
//   - every element is within the rounding bound of the exact result: each
//     value is rounded at most once per hop, so |error| <= (world + 1) * u *
//     sum_i |x_i| with u the format's unit roundoff (2^-11 float16, 2^-8
//     bfloat16);
//   - every rank that ends with a value ends with the same bits (a model
//     replicated by allreduce must not drift apart);
//   - compression really happened: some element differs from the exact
//     float32 result (the inputs are not representable in 16 bits).

#include <mccl/mccl.hpp>
#include <mccl/metrics.hpp>

#include "rank_threads.hpp"
#include "reducers/topk.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace {

using mccl::compression_kind;
using mccl::dtype;
using mccl::op_kind;
using mccl::redop;
using mccl_test::run_ranks;

/// Spans several 64 KiB chunks, odd so blocks and chunks are uneven.
constexpr std::size_t count = 40001;

mccl::config_overrides settings(const std::string& compression, const std::string& algo = "") {
  mccl::config_overrides o;
  o.set("MCCL_CONNECT_TIMEOUT_MS", 20000);
  o.set("MCCL_TIMEOUT_MS", 60000);
  o.set("MCCL_LOG_LEVEL", "error");
  o.set("MCCL_CHUNK_BYTES", "64K");
  o.set("MCCL_COMPRESSION", compression);
  if (!algo.empty())
    o.set("MCCL_ALGO", algo);
  return o;
}

/// Rank r's input: values in [-1, 1) that 16-bit floats cannot hold exactly.
std::vector<float> input_of(int rank, std::size_t n) {
  std::mt19937 rng(static_cast<unsigned>(1000 + rank));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v)
    x = u(rng);
  return v;
}

double unit_roundoff(compression_kind c) {
  return c == compression_kind::fp16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
}

/// What one rank ended with.
struct outcome {
  std::vector<float> data;
};

/// Runs `kind` on `world` ranks with MCCL_COMPRESSION=`codec` and the
/// algorithm `algo`, and checks the three properties above.
/// `hosts` > 1 splits the ranks into that many hosts (MCCL_HOST_ID), for
/// the host-aware algorithms.
void check_compressed(op_kind kind, const std::string& algo, compression_kind codec, int world,
                      int hosts = 1) {
  SCOPED_TRACE(std::string(mccl::to_string(kind)) + " " + algo + " " + mccl::to_string(codec)
               + " world " + std::to_string(world) + ", " + std::to_string(hosts) + " host(s)");
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < world; ++r)
    inputs.push_back(input_of(r, kind == op_kind::reduce_scatter ? count * world : count));
  std::vector<outcome> out(static_cast<std::size_t>(world));
  mccl::runtime rt;
  auto spec = algo.empty() ? "" : std::string(mccl::to_string(kind)) + "=" + algo;
  auto settings_of = [&](int rank) {
    auto o = settings(mccl::to_string(codec), spec);
    if (hosts > 1)
      o.set("MCCL_HOST_ID", "host" + std::to_string(rank % hosts));
    return o;
  };
  run_ranks(rt, world, settings_of, [&](mccl::communicator& comm) {
    auto r = comm.rank();
    const auto& in = inputs[static_cast<std::size_t>(r)];
    auto& res = out[static_cast<std::size_t>(r)].data;
    switch (kind) {
      case op_kind::allreduce:
        res.resize(count);
        comm.allreduce(in.data(), res.data(), count, dtype::float32, redop::sum).wait();
        break;
      case op_kind::reduce:
        res.resize(count);
        comm.reduce(in.data(), res.data(), count, dtype::float32, redop::sum, 1).wait();
        if (r != 1)
          res.clear();
        break;
      case op_kind::reduce_scatter:
        res.resize(count);
        comm.reduce_scatter(in.data(), res.data(), count, dtype::float32).wait();
        break;
      case op_kind::allgather:
        res.resize(count * static_cast<std::size_t>(world));
        comm.allgather(in.data(), res.data(), count, dtype::float32).wait();
        break;
      case op_kind::broadcast:
        res = in; // in place; the root's data goes everywhere
        comm.broadcast(res.data(), count, dtype::float32, world - 1).wait();
        break;
      default:
        FAIL() << "not a compressed op";
    }
  });
  if (::testing::Test::HasFailure())
    return;
  const double u = unit_roundoff(codec);
  const double bound_factor = (world + 1) * u;
  bool inexact = false;
  auto check = [&](int r, std::size_t i, double exact, double magnitude) {
    float got = out[static_cast<std::size_t>(r)].data[i];
    if (std::fabs(got - exact) > bound_factor * magnitude + 1e-30) {
      ADD_FAILURE() << "rank " << r << " element " << i << ": " << got << ", exact " << exact
                    << ", bound " << bound_factor * magnitude;
      return false;
    }
    inexact |= got != static_cast<float>(exact);
    return true;
  };
  for (int r = 0; r < world; ++r) {
    const auto& res = out[static_cast<std::size_t>(r)].data;
    for (std::size_t i = 0; i < res.size(); ++i) {
      double exact = 0, magnitude = 0;
      switch (kind) {
        case op_kind::allreduce:
        case op_kind::reduce:
        case op_kind::reduce_scatter: {
          auto at = kind == op_kind::reduce_scatter ? static_cast<std::size_t>(r) * count + i : i;
          for (const auto& in : inputs) {
            exact += in[at];
            magnitude += std::fabs(in[at]);
          }
          break;
        }
        case op_kind::allgather:
          exact = inputs[i / count][i % count];
          magnitude = std::fabs(exact);
          break;
        default: // broadcast
          exact = inputs[static_cast<std::size_t>(world - 1)][i];
          magnitude = std::fabs(exact);
          break;
      }
      if (!check(r, i, exact, magnitude))
        return;
    }
  }
  EXPECT_TRUE(inexact) << "every element exact: were the payloads compressed at all?";
  if (kind != op_kind::allreduce && kind != op_kind::allgather && kind != op_kind::broadcast)
    return; // only one rank holds each result
  for (int r = 1; r < world; ++r) {
    ASSERT_EQ(std::memcmp(out[0].data.data(), out[static_cast<std::size_t>(r)].data.data(),
                          out[0].data.size() * sizeof(float)),
              0)
      << "rank " << r << " ended with other bits than rank 0";
  }
}

struct algos {
  op_kind kind;
  std::vector<std::string> names;
};

const algos compressing[] = {
  {op_kind::allreduce, {"rd", "rabenseifner", "bidir_ring"}},
  {op_kind::reduce, {"tree", "ring"}},
  {op_kind::reduce_scatter, {"ring", "rd", "halving"}},
  {op_kind::allgather, {"ring", "rd", "bidir_ring"}},
  {op_kind::broadcast, {"scatter_allgather"}},
};

} // namespace

TEST(Compression, EveryCompressingAlgorithmIsWithinTheBoundAndRanksAgree) {
  for (auto codec : {compression_kind::fp16, compression_kind::bf16})
    for (const auto& a : compressing)
      for (const auto& name : a.names)
        for (int world : {2, 3, 4, 5}) {
          check_compressed(a.kind, name, codec, world);
          if (::testing::Test::HasFailure())
            return;
        }
}

// The host-aware programs, on 2 hosts of 2 and 3 ranks (interleaved, so
// the inter-host steps are not the ring's neighbours).
TEST(Compression, HostAwareAlgorithmsAreWithinTheBoundAndRanksAgree) {
  for (auto kind : {op_kind::allreduce, op_kind::reduce_scatter, op_kind::allgather,
                    op_kind::broadcast})
    for (int world : {4, 5}) {
      check_compressed(kind, "hier", compression_kind::bf16, world, 2);
      if (::testing::Test::HasFailure())
        return;
    }
}

// The table's choice (oneshot, the pipelined ring, the broadcast tree:
// algorithms that cannot compress) gives way to a step program.
TEST(Compression, TheTableChoosesAlgorithmsThatCompress) {
  for (auto kind : {op_kind::allreduce, op_kind::broadcast, op_kind::allgather})
    for (int world : {2, 3, 4}) {
      check_compressed(kind, "", compression_kind::fp16, world);
      if (::testing::Test::HasFailure())
        return;
    }
}

namespace {

/// Largest |result - exact| of a 2-rank allreduce of input_of(0/1) with
/// the communicator's MCCL_COMPRESSION and this op's options.
double allreduce_error(const std::string& setting, const mccl::op_options& opts,
                       std::size_t n = count) {
  auto a = input_of(0, n), b = input_of(1, n);
  std::vector<float> res(n);
  mccl::runtime rt;
  run_ranks(rt, 2, settings(setting), [&](mccl::communicator& comm) {
    std::vector<float> out(n);
    comm.allreduce(comm.rank() == 0 ? a.data() : b.data(), out.data(), n, dtype::float32,
                   redop::sum, opts)
      .wait();
    if (comm.rank() == 0)
      res = out;
  });
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i)
    worst = std::max(worst, std::fabs(res[i] - (static_cast<double>(a[i]) + b[i])));
  return worst;
}

} // namespace

TEST(Compression, PerOpOptionBeatsTheCommunicatorSetting) {
  // float32 adds of two values in [-1, 1) round by at most 2^-24 * 2.
  const double float32_error = std::ldexp(1.0, -23);
  mccl::op_options fp16;
  fp16.compression = compression_kind::fp16;
  mccl::op_options none;
  none.compression = compression_kind::none;
  EXPECT_LE(allreduce_error("none", {}), float32_error);
  EXPECT_GT(allreduce_error("none", fp16), float32_error);
  EXPECT_GT(allreduce_error("bf16", {}), float32_error);
  EXPECT_LE(allreduce_error("bf16", none), float32_error);
  // At or below MCCL_SMALL_MSG_THRESHOLD (64K) ops travel exactly.
  EXPECT_LE(allreduce_error("fp16", fp16, 1000), float32_error);
}

TEST(Compression, AskingForItWhereItCannotApplyIsAnErrorNamingTheOp) {
  mccl::runtime rt;
  run_ranks(rt, 2, settings("none"), [&](mccl::communicator& comm) {
    mccl::op_options fp16;
    fp16.compression = compression_kind::fp16;
    std::vector<int32_t> ints(count, 1);
    try {
      comm.allreduce(ints.data(), ints.data(), count, dtype::int32, redop::sum, fp16);
      ADD_FAILURE() << "fp16 on int32 accepted";
    } catch (const mccl::error& e) {
      EXPECT_EQ(e.code(), mccl::errc::invalid_argument);
      std::string what = e.what();
      EXPECT_NE(what.find("allreduce"), std::string::npos) << what;
      EXPECT_NE(what.find("int32"), std::string::npos) << what;
      EXPECT_NE(what.find("compression fp16"), std::string::npos) << what;
    }
    mccl::op_options topk;
    topk.compression = compression_kind::topk;
    std::vector<float> floats(count * 2, 1.0f);
    for (auto bad : {std::string("max"), std::string("allgather"), std::string("ratio")}) {
      try {
        if (bad == "max") {
          comm.allreduce(floats.data(), floats.data(), count, dtype::float32, redop::max, topk);
        } else if (bad == "allgather") {
          comm.allgather(floats.data(), floats.data(), count, dtype::float32, topk);
        } else {
          auto zero = topk;
          zero.topk_ratio = 0.0;
          comm.allreduce(floats.data(), floats.data(), count, dtype::float32, redop::sum, zero);
        }
        ADD_FAILURE() << "topk accepted for " << bad;
      } catch (const mccl::error& e) {
        EXPECT_EQ(e.code(), mccl::errc::invalid_argument) << e.what();
        EXPECT_NE(std::string(e.what()).find("compression topk"), std::string::npos) << e.what();
      }
    }
    // The communicator's setting on an op it cannot carry is not an error:
    // int32 travels exactly.
    comm.allreduce(ints.data(), count, dtype::int32).wait();
    EXPECT_EQ(ints[7], 2);
  });
}

namespace {

/// The errors of one allreduce on 2 ranks with these settings per rank.
std::vector<std::string> allreduce_errors(const std::function<mccl::config_overrides(int)>& settings_of) {
  mccl::runtime rt;
  std::mutex m;
  std::vector<std::string> errors;
  run_ranks(rt, 2, settings_of, [&](mccl::communicator& comm) {
    std::vector<float> v(count, 1.0f);
    try {
      comm.allreduce(v.data(), count, dtype::float32).wait();
    } catch (const mccl::error& e) {
      std::lock_guard<std::mutex> guard{m};
      errors.push_back(e.what());
    }
  });
  return errors;
}

} // namespace

// Ranks that disagree about compression issued different ops: both fail,
// and the message says which side compressed.
TEST(Compression, RanksThatDisagreeFailNamingTheCompression) {
  auto errors = allreduce_errors([](int rank) { return settings(rank == 0 ? "fp16" : "none"); });
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& e : errors)
    EXPECT_NE(e.find("fp16 on the wire"), std::string::npos) << e;
}

// ---- topk ----------------------------------------------------------------------

namespace {

/// What a topk allreduce without feedback must give: the sum over ranks,
/// in rank order, of each rank's k largest-magnitude elements (ties to
/// the lower index).
std::vector<float> topk_reference(const std::vector<std::vector<float>>& inputs, std::size_t k) {
  std::vector<float> out(inputs[0].size(), 0.0f);
  for (const auto& v : inputs) {
    std::vector<uint32_t> idx(v.size());
    for (uint32_t i = 0; i < idx.size(); ++i)
      idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(),
                     [&](uint32_t a, uint32_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
    std::vector<uint32_t> top(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k));
    std::sort(top.begin(), top.end());
    for (auto i : top)
      out[i] += v[i];
  }
  return out;
}

} // namespace

// Without feedback each rank sends exactly its top k; every rank ends with
// the reference's bits. In place and out of place, worlds 1..4.
TEST(Compression, TopkSendsEachRanksLargestElements) {
  const double ratio = 0.03;
  for (int world : {1, 2, 3, 4}) {
    SCOPED_TRACE("world " + std::to_string(world));
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < world; ++r)
      inputs.push_back(input_of(r, count));
    auto want = topk_reference(inputs, mccl::topk_count(count, ratio));
    std::vector<std::vector<float>> got(static_cast<std::size_t>(world));
    mccl::runtime rt;
    run_ranks(rt, world, settings("none"), [&](mccl::communicator& comm) {
      mccl::op_options o;
      o.compression = compression_kind::topk;
      o.topk_ratio = ratio;
      o.error_feedback = false;
      auto r = static_cast<std::size_t>(comm.rank());
      auto in = inputs[r];
      got[r].resize(count);
      if (comm.rank() % 2 == 0) {
        comm.allreduce(in.data(), got[r].data(), count, dtype::float32, redop::sum, o).wait();
      } else {
        got[r] = in;
        comm.allreduce(got[r].data(), got[r].data(), count, dtype::float32, redop::sum, o).wait();
      }
    });
    if (world == 1) // one rank: nothing travels, the input is the sum
      EXPECT_EQ(got[0], inputs[0]);
    else
      for (int r = 0; r < world; ++r)
        ASSERT_EQ(std::memcmp(got[static_cast<std::size_t>(r)].data(), want.data(), count * 4), 0)
          << "rank " << r;
  }
}

// Error feedback loses nothing: one step with data, then steps with zero
// input drain what was held back, until the outputs add up to the exact
// sum. Without feedback the held-back part is gone.
TEST(Compression, TopkErrorFeedbackDeliversEverythingEventually) {
  const int world = 3;
  const double ratio = 0.1; // 10 steps send every element once
  for (bool feedback : {true, false}) {
    SCOPED_TRACE(feedback ? "with feedback" : "without feedback");
    std::vector<double> total(count, 0.0);
    std::mutex m;
    mccl::runtime rt;
    run_ranks(rt, world, settings("topk"), [&](mccl::communicator& comm) {
      mccl::op_options o;
      o.topk_ratio = ratio;
      o.error_feedback = feedback;
      o.topk_key = 42;
      auto in = input_of(comm.rank(), count);
      std::vector<float> out(count), zeros(count, 0.0f);
      std::vector<double> mine(count, 0.0);
      for (int step = 0; step < 12; ++step) {
        comm.allreduce(step == 0 ? in.data() : zeros.data(), out.data(), count, dtype::float32,
                       redop::sum, o)
          .wait();
        for (std::size_t i = 0; i < count; ++i)
          mine[i] += out[i];
      }
      if (comm.rank() == 0) {
        std::lock_guard<std::mutex> guard{m};
        total = mine;
      }
    });
    std::vector<double> exact(count, 0.0);
    for (int r = 0; r < world; ++r) {
      auto in = input_of(r, count);
      for (std::size_t i = 0; i < count; ++i)
        exact[i] += in[i];
    }
    double worst = 0;
    for (std::size_t i = 0; i < count; ++i)
      worst = std::max(worst, std::fabs(total[i] - exact[i]));
    if (feedback)
      EXPECT_LT(worst, 1e-5);
    else
      EXPECT_GT(worst, 0.5); // most of each rank's input never travelled
  }
}

TEST(Compression, TopkRanksThatDisagreeOnTheRatioFailNamingK) {
  auto errors = allreduce_errors([](int rank) {
    auto o = settings("topk");
    o.set("MCCL_TOPK_RATIO", rank == 0 ? "0.01" : "0.02");
    return o;
  });
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& e : errors)
    EXPECT_NE(e.find("top 401 on the wire"), std::string::npos) << e;
}

// The metrics count each op's size and the payload bytes this rank sent:
// fp16 halves the latter, topk 0.01 cuts it to a few percent.
TEST(Compression, MetricsCountBytesBeforeAndAfterCompression) {
  std::map<std::string, mccl::op_kind_metrics> seen;
  for (std::string codec : {"none", "fp16", "topk"}) {
    mccl::reset_metrics();
    mccl::runtime rt;
    auto o = settings(codec);
    o.set("MCCL_SHM_STAGE_BYTES", 0); // "none" over the link too: its wire bytes are the reference
    run_ranks(rt, 2, o, [&](mccl::communicator& comm) {
      auto v = input_of(comm.rank(), count);
      comm.allreduce(v.data(), count, dtype::float32).wait();
    });
    seen[codec] = mccl::get_metrics().ops["allreduce"];
  }
  for (const auto& [codec, m] : seen) {
    EXPECT_EQ(m.ops, 2u) << codec; // one per rank
    EXPECT_EQ(m.bytes, 2 * count * 4) << codec;
  }
  EXPECT_EQ(seen["fp16"].wire_bytes * 2, seen["none"].wire_bytes);
  EXPECT_LT(seen["topk"].wire_bytes * 10, seen["none"].wire_bytes);
  EXPECT_EQ(seen["topk"].algorithms.count("topk"), 1u);
}
