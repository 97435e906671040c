// mccl-reduce-bench: throughput of the reduction kernels (reducers/) against
// memcpy of the same size, with Google Benchmark.
//
// reduce(dst, src, n) reads dst and src and writes dst; memcpy reads src and
// writes dst. Both count the bytes of dst per iteration, so "bytes_per_second"
// (and the summary printed at the end: GB/s and percent of memcpy at the same
// size) says how close a reduction comes to just moving the data. Where both
// run at DRAM bandwidth and memcpy uses non-temporal stores, a reduction moves
// 3 bytes per dst byte against memcpy's 2, so ~67% is the bound there; while
// the buffers fit in cache (64 MiB does fit in some L3s) it can reach ~100%.
//
//   mccl-reduce-bench --benchmark_filter='64MiB'
//   mccl-reduce-bench --benchmark_filter='64MiB' --benchmark_repetitions=5

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "reducers/half.hpp"
#include "reducers/reduce.hpp"
#include "reducers/reduce_kernels.hpp"

namespace {

struct size_case {
  const char* label;
  std::size_t bytes;
};

constexpr size_case sizes[] = {
    {"64KiB", std::size_t{64} << 10},
    {"1MiB", std::size_t{1} << 20},
    {"64MiB", std::size_t{64} << 20},
};

// Page-aligned, like the large receive buffers the collectives reduce into.
struct buffer {
  std::unique_ptr<unsigned char, decltype(&std::free)> mem;
  explicit buffer(std::size_t bytes)
    : mem(static_cast<unsigned char*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)),
          &std::free) {
    if (!mem)
      throw std::bad_alloc();
  }
  unsigned char* get() const { return mem.get(); }
};

// Fills with the value 1 in dtype t: sums grow slowly (and stop growing once
// x + 1 == x), products stay 1, so no inf, NaN or subnormal slows the loop.
void fill_ones(mccl::dtype t, unsigned char* p, std::size_t bytes) {
  const std::size_t size = mccl::dtype_size(t);
  unsigned char one[8] = {};
  switch (t) {
    case mccl::dtype::float32: { float v = 1; std::memcpy(one, &v, 4); break; }
    case mccl::dtype::float64: { double v = 1; std::memcpy(one, &v, 8); break; }
    case mccl::dtype::float16: {
      uint16_t v = mccl::float_to_f16(1);
      std::memcpy(one, &v, 2);
      break;
    }
    case mccl::dtype::bfloat16: {
      uint16_t v = mccl::float_to_bf16(1);
      std::memcpy(one, &v, 2);
      break;
    }
    case mccl::dtype::int32: { int32_t v = 1; std::memcpy(one, &v, 4); break; }
    case mccl::dtype::int64: { int64_t v = 1; std::memcpy(one, &v, 8); break; }
    default: one[0] = 1; break;  // int8, uint8, bool
  }
  for (std::size_t i = 0; i + size <= bytes; i += size)
    std::memcpy(p + i, one, size);
}

void bm_memcpy(benchmark::State& state, std::size_t bytes) {
  buffer dst(bytes), src(bytes);
  std::memset(src.get(), 1, bytes);
  std::memset(dst.get(), 0, bytes);  // touch every page before timing
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

void bm_reduce(benchmark::State& state, mccl::redop op, mccl::dtype t, std::size_t bytes) {
  const std::size_t n = bytes / mccl::dtype_size(t);
  buffer dst(bytes), src(bytes);
  fill_ones(t, dst.get(), bytes);
  fill_ones(t, src.get(), bytes);
  for (auto _ : state) {
    mccl::reduce(op, t, dst.get(), src.get(), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

// Prints the usual console table, then a summary: for each reduction, its
// GB/s and the percentage of memcpy's GB/s at the same size. With
// --benchmark_repetitions the median run is used.
class summary_reporter : public benchmark::ConsoleReporter {
public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      if (r.error_occurred)
        continue;
      bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type != Run::RT_Iteration && !median)
        continue;
      auto it = r.counters.find("bytes_per_second");
      if (it != r.counters.end())
        gbps_[r.run_name.function_name] = it->second.value / 1e9;
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    auto& out = GetOutputStream();
    out << "\nSummary: GB/s = 1e9 dst bytes per second (the table's G/s is 2^30 B/s); kernels: "
        << mccl::detail::reduce_kernel_target() << "\n";
    char line[200];
    for (const auto& s : sizes) {
      const std::string suffix = std::string("/") + s.label;
      auto base = gbps_.find("memcpy" + suffix);
      for (const auto& [name, gbps] : gbps_) {
        if (name.size() < suffix.size()
            || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
          continue;
        if (base == gbps_.end() || name == base->first) {
          std::snprintf(line, sizeof line, "  %-28s %8.2f GB/s\n", name.c_str(), gbps);
        } else {
          std::snprintf(line, sizeof line, "  %-28s %8.2f GB/s  %5.1f%% of memcpy (%.2f GB/s)\n",
                        name.c_str(), gbps, 100.0 * gbps / base->second, base->second);
        }
        out << line;
      }
    }
  }

private:
  std::map<std::string, double> gbps_;
};

void register_all() {
  using mccl::dtype;
  using mccl::redop;
  struct reduce_case {
    redop op;
    dtype t;
  };
  std::vector<reduce_case> cases;
  for (dtype t : {dtype::float32, dtype::float64, dtype::float16, dtype::bfloat16, dtype::int8,
                  dtype::uint8, dtype::int32, dtype::int64, dtype::boolean})
    cases.push_back({redop::sum, t});
  for (redop op : {redop::min, redop::max, redop::prod})
    cases.push_back({op, dtype::float32});
  cases.push_back({redop::bxor, dtype::int32});

  for (const auto& s : sizes) {
    const std::size_t bytes = s.bytes;
    benchmark::RegisterBenchmark((std::string("memcpy/") + s.label).c_str(),
                                 [bytes](benchmark::State& st) { bm_memcpy(st, bytes); })
        ->UseRealTime();
    for (const auto& c : cases) {
      std::string name = std::string("reduce/") + mccl::to_string(c.t) + "/"
                         + mccl::to_string(c.op) + "/" + s.label;
      auto run = [c, bytes](benchmark::State& st) { bm_reduce(st, c.op, c.t, bytes); };
      benchmark::RegisterBenchmark(name.c_str(), run)->UseRealTime();
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::AddCustomContext("mccl_reduce_kernels", mccl::detail::reduce_kernel_target());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  summary_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
