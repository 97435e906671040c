// mccl_membership: rank program of tests/multiproc/membership_faults_test.py:
// a rank is lost in the middle of a membership change (a fault scenario's
// crash "during" it, MCCL_FAULTS), the change fails on every live rank,
// they try again without it, and each live process ends by printing the
// membership of the communicator it ends on, checked by an exact
// allreduce. One rank per process; the launched ranks take
// RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, a newcomer a handle file.
//
//   mccl_membership shrink FIRST MID   ops until one fails (the scenario
//                                      crashes FIRST), shrink without FIRST
//                                      (MID crashes inside it), shrink
//                                      without both
//   mccl_membership grow VICTIM DIR    grow by one newcomer, whose handle
//                                      goes to DIR/grow1. VICTIM (an old
//                                      rank or the newcomer's new rank)
//                                      crashes inside the grow. A lost
//                                      newcomer: keep the old communicator;
//                                      a lost old rank: shrink without it
//                                      and grow again (handle DIR/grow2)
//   mccl_membership join DIR           the newcomer of grow: joins with
//                                      DIR/grow1, and when that fails with
//                                      DIR/grow2
//   mccl_membership reconfigure VICTIM every rank reconfigures into the
//                                      same members; VICTIM crashes inside;
//                                      the others stay on the old
//                                      communicator and reconfigure again
//                                      without it
//
// Every process has an id: its launch rank, 100 for the newcomer. Lines the
// test reads: "id I: <change> failed after T ms: <error>" and
// "id I: membership size=N ids=A,B,... bad=K".
//
// Exit status: 0 passed, 1 a check or a call failed, 2 usage.

#include <mccl/mccl.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using steady = std::chrono::steady_clock;
constexpr int newcomer_id = 100;
constexpr std::size_t text_bytes = 512; // a handle travels as this many bytes
constexpr std::size_t check_count = 1000;

long since_ms(steady::time_point t0) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t0).count());
}

void say(int id, const std::string& text) {
  std::printf("id %d: %s\n", id, text.c_str());
  std::fflush(stdout);
}

/// Every member's id, allgathered: the membership as this rank sees it.
/// Then an allreduce of (id + 1) * (i + 1) over check_count elements, each
/// checked against the sum the allgathered ids give. Prints the line the
/// test compares across ranks.
int report_membership(mccl::communicator& c, int id) {
  std::vector<int64_t> mine{id}, ids(static_cast<std::size_t>(c.size()));
  c.allgather(mine.data(), ids.data(), 1, mccl::dtype::int64).wait();
  int64_t sum = 0;
  std::string listed;
  for (auto x : ids) {
    sum += x + 1;
    listed += (listed.empty() ? "" : ",") + std::to_string(x);
  }
  std::vector<int64_t> v(check_count);
  for (std::size_t i = 0; i < check_count; ++i)
    v[i] = (id + 1) * static_cast<int64_t>(i + 1);
  c.allreduce(v.data(), v.size()).wait();
  int bad = 0;
  for (std::size_t i = 0; i < check_count; ++i)
    bad += v[i] != sum * static_cast<int64_t>(i + 1);
  say(id, "membership size=" + std::to_string(c.size()) + " ids=" + listed + " bad=" + std::to_string(bad));
  return bad ? 1 : 0;
}

/// Rank 0's text to every rank of `c`, over `c`.
std::string share(mccl::communicator& c, const std::string& text) {
  std::vector<char> buf(text_bytes, '\0');
  if (c.rank() == 0)
    text.copy(buf.data(), text_bytes - 1);
  c.broadcast(buf.data(), buf.size(), mccl::dtype::uint8, 0).wait();
  return std::string(buf.data());
}

/// Written whole, then renamed, so a reader never sees half of it.
void publish(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path + ".tmp");
    out << text;
  }
  std::rename((path + ".tmp").c_str(), path.c_str());
}

/// The file's text once it exists; "" after `bound`.
std::string await_file(const std::string& path, std::chrono::seconds bound) {
  auto until = steady::now() + bound;
  while (steady::now() < until) {
    std::ifstream in(path);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      return text.str();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return {};
}

int run_shrink(mccl::communicator& world, int first, int mid) {
  int id = world.rank();
  std::vector<int64_t> v(64, 1);
  try {
    for (int i = 0; i < 1000; ++i)
      world.allreduce(v.data(), v.size()).wait();
    say(id, "no op failed, though rank " + std::to_string(first) + " was to crash");
    return 1;
  } catch (const mccl::error& e) {
    say(id, std::string("op failed: ") + e.what());
  }
  auto t0 = steady::now();
  try {
    auto c = world.shrink({first});
    say(id, "the shrink without rank " + std::to_string(first) + " succeeded, though rank "
              + std::to_string(mid) + " was to crash inside it");
    return 1;
  } catch (const mccl::error& e) {
    say(id, "shrink failed after " + std::to_string(since_ms(t0)) + " ms: " + e.what());
  }
  auto c = world.shrink({first, mid});
  int rc = report_membership(c, id);
  c.finalize();
  return rc;
}

int run_grow(mccl::communicator& world, int victim, const std::string& dir) {
  int id = world.rank();
  int old_size = world.size();
  auto handle = share(world, world.rank() == 0 ? world.grow_handle(old_size + 1) : std::string());
  if (world.rank() == 0)
    publish(dir + "/grow1", handle);
  auto t0 = steady::now();
  try {
    auto grown = world.grow(handle);
    say(id, "grow succeeded, though rank " + std::to_string(victim) + " was to crash inside it");
    return 1;
  } catch (const mccl::error& e) {
    say(id, "grow failed after " + std::to_string(since_ms(t0)) + " ms: " + e.what());
  }
  if (victim >= old_size) { // the newcomer was lost: the old ranks go on as they were
    int rc = report_membership(world, id);
    world.finalize();
    return rc;
  }
  auto shrunk = world.shrink({victim});
  auto again = share(shrunk, shrunk.rank() == 0 ? shrunk.grow_handle(old_size) : std::string());
  if (shrunk.rank() == 0)
    publish(dir + "/grow2", again);
  auto grown = shrunk.grow(again);
  int rc = report_membership(grown, id);
  grown.finalize();
  shrunk.finalize();
  world.finalize();
  return rc;
}

int run_join(mccl::runtime& rt, const std::string& dir) {
  int id = newcomer_id;
  auto handle = await_file(dir + "/grow1", std::chrono::seconds(30));
  if (handle.empty()) {
    say(id, "no handle in " + dir + "/grow1 within 30 s");
    return 1;
  }
  auto t0 = steady::now();
  try {
    auto c = rt.join(handle);
    int rc = report_membership(c, id);
    c.finalize();
    return rc;
  } catch (const mccl::error& e) {
    say(id, "join failed after " + std::to_string(since_ms(t0)) + " ms: " + e.what());
  }
  handle = await_file(dir + "/grow2", std::chrono::seconds(30));
  if (handle.empty()) {
    say(id, "no handle in " + dir + "/grow2 within 30 s");
    return 1;
  }
  auto c = rt.join(handle);
  int rc = report_membership(c, id);
  c.finalize();
  return rc;
}

int run_reconfigure(mccl::communicator& world, int victim) {
  using namespace std::chrono_literals;
  int id = world.rank();
  int n = world.size();
  auto mine = world.get_reconfigure_handle();
  std::vector<char> buf(text_bytes, '\0'), all(text_bytes * static_cast<std::size_t>(n));
  mine.copy(buf.data(), text_bytes - 1);
  world.allgather(buf.data(), all.data(), text_bytes, mccl::dtype::uint8).wait();
  std::vector<std::string> handles, without_victim;
  for (int r = 0; r < n; ++r) {
    handles.emplace_back(all.data() + r * text_bytes);
    if (r != victim)
      without_victim.push_back(handles.back());
  }
  auto t0 = steady::now();
  try {
    auto next = world.reconfigure("attempt-1", handles, 20000ms);
    say(id, "reconfigure committed, though rank " + std::to_string(victim) + " was to crash inside it");
    return 1;
  } catch (const mccl::error& e) {
    say(id, "reconfigure failed after " + std::to_string(since_ms(t0)) + " ms: " + e.what());
  }
  // The commit rule: this member is still on its old communicator.
  say(id, "still on the old communicator: rank " + std::to_string(world.rank()) + " of "
            + std::to_string(world.size()));
  auto next = world.reconfigure("attempt-2", without_victim, 20000ms);
  int rc = report_membership(next, id);
  next.finalize();
  return rc;
}

} // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  auto arg = [&](int i) { return argc > i ? std::atoi(argv[i]) : -1; };
  bool usage_ok = (mode == "shrink" && argc == 4) || (mode == "grow" && argc == 4)
                  || (mode == "join" && argc == 3) || (mode == "reconfigure" && argc == 3);
  if (!usage_ok) {
    std::fprintf(stderr, "usage: mccl_membership shrink FIRST MID | grow VICTIM DIR | join DIR | "
                         "reconfigure VICTIM\n");
    return 2;
  }
  try {
    mccl::runtime rt;
    if (mode == "join")
      return run_join(rt, argv[2]);
    auto world = rt.communicator_from_env();
    int rc = 2;
    if (mode == "shrink")
      rc = run_shrink(world, arg(2), arg(3));
    else if (mode == "grow")
      rc = run_grow(world, arg(2), argv[3]);
    else
      rc = run_reconfigure(world, arg(2));
    world.finalize();
    return rc;
  } catch (const mccl::error& e) {
    std::fprintf(stderr, "mccl_membership: %s\n", e.what());
    return 1;
  }
}
