// The ring allreduce (MCCL_ALGO allreduce=ring) on 3, 4 and 5 ranks in one
// process: real progress, collective, link and watchdog actors over the
// simulated network, under CAF's deterministic test coordinator (see
// sim_world.hpp). Each test picks the order in which bytes reach each rank:
// round robin, seeded random amounts (headers split), one pipe starved until
// nothing else can move (the rest of the ring runs as far ahead as it can,
// then the starved rank gets chunks of several steps in one burst), the
// highest pipe first, a small pipe capacity (partial writes), and random
// actor interleavings. Two ops in flight share the links, their chunks
// interleaved, one of them started late on one rank. Results must
// match a reference computed here, exactly: the inputs are chosen so that
// float sums are exact in every order.

#include <mccl/types.hpp>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <tuple>
#include <vector>

#include "sim_world.hpp" // last: includes the CAF test DSL

using namespace mccl;
using namespace mccl::sim_test;

namespace {

/// Elements per rank: blocks are uneven (not a multiple of 3, 4 or 5) and
/// span 4 to 7 chunks of 4 KiB.
constexpr std::size_t ring_count = 20011;

uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

/// Rank r's input element i for op `salt`. Floats are multiples of 1/4 in
/// [-50, 50]: every partial sum of up to 5 of them is exact in float32, so
/// the ring's order of additions cannot change the result. Integers stay in
/// [-2^28, 2^28): sums of 5 cannot overflow.
template <class T>
T input(int r, std::size_t i, uint32_t salt) {
  auto h = mix(static_cast<uint32_t>(i) * 2654435761U ^ mix(static_cast<uint32_t>(r) + 97 * salt));
  if constexpr (std::is_same_v<T, float>)
    return static_cast<float>(static_cast<int>(h % 401) - 200) * 0.25f;
  else
    return static_cast<int32_t>(h & 0x1FFFFFFFU) - (1 << 28);
}

template <class T>
constexpr dtype dtype_of() {
  return std::is_same_v<T, float> ? dtype::float32 : dtype::int32;
}

template <class T>
T sentinel() {
  if constexpr (std::is_same_v<T, float>)
    return -12345.5f;
  else
    return -123456789;
}

/// Empty if equal, else the first difference and the number of differences.
template <class T>
std::string compare(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size())
    return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0 && bad++ == 0)
      first = i;
  if (bad == 0)
    return {};
  std::ostringstream out;
  out << bad << " of " << got.size() << " elements differ; first at " << first << ": got "
      << got[first] << ", want " << want[first];
  return out.str();
}

/// One allreduce of `count` elements on every rank of `w`.
template <class T>
struct allreduce_case {
  std::vector<std::vector<T>*> in;  ///< send buffers (the result too, in place)
  std::vector<std::vector<T>*> out; ///< recv buffers
  std::vector<std::vector<T>> inputs; ///< copies of the inputs
  std::vector<T> want;
  std::vector<work_ptr> works;

  /// Allocates and fills the buffers; submits on every rank except those in
  /// `skip` (submit_on() does those later).
  allreduce_case(sim_world& w, std::size_t count, bool in_place, uint32_t salt,
                 std::vector<int> skip = {})
    : in_place_(in_place), count_(count) {
    want.assign(count, T{});
    for (int r = 0; r < w.size(); ++r) {
      auto& b = w.alloc<T>(count);
      for (std::size_t i = 0; i < count; ++i) {
        b[i] = input<T>(r, i, salt);
        want[i] += b[i];
      }
      inputs.push_back(b);
      in.push_back(&b);
      out.push_back(in_place ? &b : &w.alloc<T>(count, sentinel<T>()));
    }
    works.resize(static_cast<std::size_t>(w.size()));
    for (int r = 0; r < w.size(); ++r)
      if (std::find(skip.begin(), skip.end(), r) == skip.end())
        submit_on(w, r);
  }

  void submit_on(sim_world& w, int r) {
    auto i = static_cast<std::size_t>(r);
    works[i] = w.allreduce(r, in[i]->data(), out[i]->data(), count_, dtype_of<T>());
  }

  /// Every rank: completed without error by the ring, result exact, input
  /// untouched (out of place).
  void check(const std::string& what, uint64_t seq) const {
    for (std::size_t r = 0; r < works.size(); ++r) {
      SCOPED_TRACE(what + ", rank " + std::to_string(r));
      ASSERT_TRUE(works[r]) << "never submitted";
      ASSERT_TRUE(works[r]->done());
      EXPECT_EQ(outcome(works[r]), "ok");
      auto m = works[r]->metrics();
      EXPECT_EQ(m.algorithm, "ring");
      EXPECT_EQ(m.op, "allreduce");
      EXPECT_EQ(m.seq, seq);
      EXPECT_EQ(m.bytes, count_ * sizeof(T));
      EXPECT_EQ(compare(*out[r], want), "");
      if (!in_place_) {
        EXPECT_EQ(compare(*in[r], inputs[r]), "") << "the send buffer was written";
      }
    }
  }

private:
  bool in_place_;
  std::size_t count_;
};

// ---- one allreduce per delivery order ------------------------------------------

enum class ring_order {
  round_robin,
  random_1,
  random_2,
  random_3,
  starve_0_to_1,
  starve_0_to_1_random, ///< the others in random order and amounts
  highest_pipe_first,
  random_capacity, ///< every pipe holds at most 5000 bytes: partial writes
  random_actors,   ///< random deliveries and random actor interleaving
};

const char* ring_order_name(ring_order o) {
  switch (o) {
    case ring_order::round_robin: return "RoundRobin";
    case ring_order::random_1: return "Random1";
    case ring_order::random_2: return "Random2";
    case ring_order::random_3: return "Random3";
    case ring_order::starve_0_to_1: return "Starve0To1";
    case ring_order::starve_0_to_1_random: return "Starve0To1Random";
    case ring_order::highest_pipe_first: return "HighestPipeFirst";
    case ring_order::random_capacity: return "RandomCapacity5000";
    case ring_order::random_actors: return "RandomActorOrder";
  }
  return "?";
}

/// Sets up `w` for the order and returns its delivery policy.
delivery_policy setup(sim_world& w, ring_order o) {
  switch (o) {
    case ring_order::round_robin: return round_robin();
    case ring_order::random_1: return random_order(1);
    case ring_order::random_2: return random_order(2);
    case ring_order::random_3: return random_order(3);
    case ring_order::starve_0_to_1: return starve(0, 1);
    case ring_order::starve_0_to_1_random: return starve(0, 1, random_order(6));
    case ring_order::highest_pipe_first: return highest_pipe_first();
    case ring_order::random_capacity:
      w.net().set_capacity(5000);
      return random_order(4);
    case ring_order::random_actors:
      w.set_random_actor_order(5);
      return random_order(5);
  }
  return round_robin();
}

using ring_param = std::tuple<int, dtype, bool, ring_order>; // world, type, in place, order

class RingAllreduceSim : public sim_world_fixture<::testing::TestWithParam<ring_param>> {
protected:
  template <class T>
  void run_case() {
    auto [world, type, in_place, o] = GetParam();
    (void)type;
    auto& w = make_world(world, sim_config("allreduce=ring"));
    auto policy = setup(w, o);
    allreduce_case<T> c(w, ring_count, in_place, 1);
    ASSERT_TRUE(w.drive(c.works, policy)) << policy.name;
    c.check(policy.name, 0);
    // The ring consumed every byte it was sent.
    EXPECT_TRUE(w.net().pending().empty());
  }
};

TEST_P(RingAllreduceSim, SumMatchesReferenceOnEveryRank) {
  if (std::get<1>(GetParam()) == dtype::float32)
    run_case<float>();
  else
    run_case<int32_t>();
}

std::string ring_param_name(const ::testing::TestParamInfo<ring_param>& info) {
  const auto& [world, type, in_place, o] = info.param;
  return std::to_string(world) + "Ranks_" + (type == dtype::float32 ? "Float32" : "Int32") + "_"
         + (in_place ? "InPlace" : "OutOfPlace") + "_" + ring_order_name(o);
}

INSTANTIATE_TEST_SUITE_P(
  Orders, RingAllreduceSim,
  ::testing::Combine(::testing::Values(3, 4, 5), ::testing::Values(dtype::float32, dtype::int32),
                     ::testing::Bool(),
                     ::testing::Values(ring_order::round_robin, ring_order::random_1, ring_order::random_2,
                                       ring_order::random_3, ring_order::starve_0_to_1,
                                       ring_order::starve_0_to_1_random,
                                       ring_order::highest_pipe_first, ring_order::random_capacity,
                                       ring_order::random_actors)),
  ring_param_name);

// ---- two ops in flight ---------------------------------------------------------

class RingAllreduceTwoOpsSim : public sim_world_fixture<::testing::TestWithParam<uint64_t>> {};

// Both allreduces are submitted on every rank before any byte moves: their
// chunks share the links, interleaved at random.
TEST_P(RingAllreduceTwoOpsSim, BackToBackBothCorrect) {
  auto seed = GetParam();
  auto& w = make_world(4, sim_config("allreduce=ring"));
  if (seed % 2 == 0)
    w.set_random_actor_order(seed);
  auto policy = random_order(seed);
  allreduce_case<float> a(w, ring_count, true, 2);
  allreduce_case<int32_t> b(w, 9001, false, 3);
  auto works = a.works;
  works.insert(works.end(), b.works.begin(), b.works.end());
  ASSERT_TRUE(w.drive(works, policy)) << policy.name;
  a.check("first op, " + policy.name, 0);
  b.check("second op, " + policy.name, 1);
  EXPECT_TRUE(w.net().pending().empty());
}

// Rank 2 issues the second op late: every peer's chunks for it reach rank 2
// before rank 2 has started it (its links keep them), then it starts.
TEST_P(RingAllreduceTwoOpsSim, SecondOpLateOnOneRank) {
  auto seed = GetParam();
  auto& w = make_world(4, sim_config("allreduce=ring"));
  if (seed % 2 == 1)
    w.set_random_actor_order(seed);
  auto policy = random_order(seed + 100);
  allreduce_case<float> a(w, ring_count, false, 4);
  allreduce_case<int32_t> b(w, 9001, true, 5, {2});
  w.settle();
  // Everything in flight to rank 2, twice over (what it unblocks too).
  for (int k = 0; k < 2; ++k)
    for (int p = 0; p < w.size(); ++p)
      if (p != 2) {
        w.net().deliver(p, 2);
        w.settle();
      }
  for (int r : {0, 1, 3}) // no rank can finish the second op without rank 2
    EXPECT_FALSE(b.works[static_cast<std::size_t>(r)]->done()) << "rank " << r;
  b.submit_on(w, 2);
  auto works = a.works;
  works.insert(works.end(), b.works.begin(), b.works.end());
  ASSERT_TRUE(w.drive(works, policy)) << policy.name;
  a.check("first op, " + policy.name, 0);
  b.check("second op, " + policy.name, 1);
  EXPECT_TRUE(w.net().pending().empty());
}

INSTANTIATE_TEST_SUITE_P(Seeds, RingAllreduceTwoOpsSim, ::testing::Values(11, 12, 13, 14));

} // namespace
