#include "tools/mccl_sim/sim_run.hpp"

#include "collectives/engine/engine.hpp"
#include "collectives/extension/registry.hpp"
#include "transport/buffer_pool.hpp"
#include <mccl/algo_spec.hpp>
#include <mccl/config.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace mccl::sim {

namespace {

using clock = std::chrono::steady_clock;
constexpr double never = std::numeric_limits<double>::infinity();
// The engines' clock: virtual seconds after an arbitrary origin.
const clock::time_point origin = clock::time_point(std::chrono::hours(1));

clock::time_point at(double seconds) {
  return origin + std::chrono::nanoseconds(static_cast<int64_t>(std::llround(seconds * 1e9)));
}

double seconds_of(clock::time_point t) {
  return std::chrono::duration<double>(t - origin).count();
}

/// Rank r's element i: small integers, so sums over 1024 ranks are exact
/// in float32 whatever the order of additions.
float contribution(int r, std::size_t i) {
  return static_cast<float>(static_cast<int>((static_cast<std::size_t>(r) * 7 + i * 3) % 13) - 6);
}

/// Records how a rank's op ended, in virtual time.
class completion : public op_completion {
public:
  explicit completion(const transport::timed_network& net) : net_(net) {}
  void complete(op_report report) override {
    done = true;
    ok = report.code == errc::none;
    error = report.message;
    algorithm = report.algorithm;
    ended_at = net_.now();
  }
  bool done = false;
  bool ok = false;
  std::string error;
  std::string algorithm;
  double ended_at = 0;

private:
  const transport::timed_network& net_;
};

/// The engine's control-plane callbacks: nothing to drive (the event loop
/// runs every rank) and nothing to reconnect.
class quiet_listener : public engine_listener {
public:
  void needs_driver(driver_kind) override {}
  void aborted(errc, const std::string&, int) override {}
  void link_lost(int, const std::string&) override {}
};

/// One rank's buffers and expected result.
struct rank_data {
  std::vector<float> send;
  std::vector<float> recv;
};

std::size_t elements_of_largest(const run_options& o) {
  if (o.bytes % sizeof(float) != 0)
    throw std::invalid_argument("--bytes " + std::to_string(o.bytes) + " is not a whole number of float32");
  return o.bytes / sizeof(float);
}

/// Elements of the op's largest buffer moved per rank: all of them when
/// they fit max_rank_bytes, else a multiple of the world that does.
std::size_t moved_elements(const run_options& o) {
  auto full = elements_of_largest(o);
  bool per_rank_blocks = o.op == op_kind::allgather || o.op == op_kind::reduce_scatter;
  if (per_rank_blocks && full % static_cast<std::size_t>(o.ranks) != 0)
    throw std::invalid_argument(std::string(to_string(o.op)) + " of " + std::to_string(o.bytes)
                                + " bytes: the size must divide into " + std::to_string(o.ranks)
                                + " equal blocks of float32");
  auto rank_bytes = o.max_rank_bytes != 0 ? o.max_rank_bytes
                                           : std::min<std::size_t>(1 << 20, (256u << 20) / static_cast<std::size_t>(o.ranks));
  auto budget = std::max<std::size_t>(1, rank_bytes / sizeof(float));
  if (full <= budget)
    return full;
  auto p = static_cast<std::size_t>(o.ranks);
  return std::max(p, budget / p * p);
}

class world {
public:
  world(const run_options& o, std::size_t moved, double scale) : o_(o), moved_(moved) {
    transport::timed_network_options no;
    no.world = o.ranks;
    no.ranks_per_host = o.ranks_per_host;
    no.net = o.net;
    no.host = o.host;
    no.payload_scale = scale;
    net_ = std::make_unique<transport::timed_network>(no);

    cfg_ = resolve_config({}, {});
    cfg_.spin = std::chrono::microseconds(0);
    cfg_.inline_bytes = 0;
    cfg_.op_thread_bytes = 0;
    cfg_.timeout = std::chrono::hours(24);
    cfg_.heartbeat = std::chrono::hours(24);
    cfg_.transport_crc = false;
    // Where each rank lives, as a communicator learns it at start-up: the
    // table and the host-aware algorithms read it.
    cfg_.host_of.resize(static_cast<std::size_t>(o.ranks));
    for (int r = 0; r < o.ranks; ++r)
      cfg_.host_of[static_cast<std::size_t>(r)] = r / o.ranks_per_host;
    cfg_.hosts = (o.ranks + o.ranks_per_host - 1) / o.ranks_per_host;
    // The table chooses for the full size, with the full-size chunk.
    algorithm_ = o.algorithm.empty() ? default_algorithm(o.op, o.bytes, o.ranks, cfg_) : o.algorithm;
    cfg_.algo = parse_algo_spec(std::string(to_string(o.op)) + "=" + algorithm_);
    validate_algo_spec(cfg_);
    // The chunk shrinks with the payload: the same number of chunks as the
    // full-size op.
    auto chunk = static_cast<double>(cfg_.chunk_bytes) / scale;
    cfg_.chunk_bytes = std::max<std::size_t>(sizeof(float), static_cast<std::size_t>(chunk) / sizeof(float) * sizeof(float));

    engines_.reserve(static_cast<std::size_t>(o.ranks));
    for (int r = 0; r < o.ranks; ++r) {
      engine_options eo;
      eo.rank = r;
      eo.world = o.ranks;
      eo.cfg = cfg_;
      eo.pool = &pool_;
      auto* net = net_.get();
      eo.now = [net] { return at(net->now()); };
      engines_.push_back(std::make_unique<engine>(eo, net_->connections(r), listener_));
    }
  }

  ~world() {
    // Engines first: their channels hold buffers of the pool.
    engines_.clear();
  }

  const std::string& algorithm() const { return algorithm_; }

  run_result run() {
    auto wall = clock::now();
    fill();
    // (rank, peer whose bytes it can read), ascending; peer -1: none, a
    // pass for posted work or a timer.
    std::vector<std::pair<int, int>> active;
    for (int r = 0; r < o_.ranks; ++r) {
      post(r);
      active.emplace_back(r, -1);
    }
    bool killed = false;
    due_.assign(static_cast<std::size_t>(o_.ranks), never);
    std::vector<int> readable;
    while (true) {
      for (std::size_t i = 0; i < active.size();) {
        int r = active[i].first;
        readable.clear();
        for (; i < active.size() && active[i].first == r; ++i)
          if (active[i].second >= 0)
            readable.push_back(active[i].second);
        if (!dead(r))
          pass(r, readable);
      }
      if (all_done())
        break;
      double next = std::min(net_->next_arrival(), next_timer());
      if (o_.kill_rank && !killed)
        next = std::min(next, o_.kill_at);
      if (next == never) {
        stalled();
        break;
      }
      active = net_->advance_to(next);
      if (o_.kill_rank && !killed && net_->now() >= o_.kill_at) {
        killed = true;
        int k = *o_.kill_rank;
        net_->kill(k);
        auto& c = *done_[static_cast<std::size_t>(k)];
        c.done = true;
        c.error = "killed at " + std::to_string(o_.kill_at) + " s";
        c.ended_at = net_->now();
        for (int r = 0; r < o_.ranks; ++r) // each reads the reset at its next pass
          if (r != k)
            active.emplace_back(r, k);
      }
      add_due_timers(active);
    }
    return result(std::chrono::duration<double>(clock::now() - wall).count());
  }

private:
  bool dead(int r) const { return o_.kill_rank && *o_.kill_rank == r && done_[static_cast<std::size_t>(r)]->done; }

  void fill() {
    auto p = static_cast<std::size_t>(o_.ranks);
    data_.resize(p);
    for (int r = 0; r < o_.ranks; ++r) {
      auto& d = data_[static_cast<std::size_t>(r)];
      switch (o_.op) {
        case op_kind::allgather:
          d.send.resize(moved_ / p);
          d.recv.assign(moved_, 0.f);
          break;
        case op_kind::reduce_scatter:
          d.send.resize(moved_);
          d.recv.assign(moved_ / p, 0.f);
          break;
        default:
          d.send.resize(moved_);
          d.recv.assign(moved_, 0.f);
          break;
      }
      for (std::size_t i = 0; i < d.send.size(); ++i)
        d.send[i] = contribution(r, i);
    }
  }

  void post(int r) {
    auto& d = data_[static_cast<std::size_t>(r)];
    auto op = std::make_shared<op_request>();
    op->kind = o_.op;
    op->send = d.send.data();
    op->recv = d.recv.data();
    op->count = o_.op == op_kind::allgather ? d.send.size() : d.recv.size();
    op->type = dtype::float32;
    op->op = redop::sum;
    op->root = 0;
    op->id = 0;
    op->seq = 0;
    auto c = std::make_shared<completion>(*net_);
    done_.push_back(c);
    op->done = c;
    engines_[static_cast<std::size_t>(r)]->post(std::move(op));
  }

  /// Passes of rank r's engine until nothing moves; completions run when
  /// it lets go. Its next timer can only change here.
  void pass(int r, const std::vector<int>& readable) {
    auto& e = *engines_[static_cast<std::size_t>(r)];
    auto l = e.try_lead(driver_kind::caller);
    // Again while anything moves: a channel reads a bounded amount per
    // pass, and what the peers send next arrives later in virtual time.
    // Bounded: an engine that never stops moving at one instant is a bug to
    // report, not a loop to sit in.
    constexpr int max_passes = 1 << 20;
    int passes = 0;
    while (e.progress_peers(l, readable))
      if (++passes == max_passes) {
        l.release(false);
        throw std::runtime_error("rank " + std::to_string(r) + "'s engine kept moving for "
                                 + std::to_string(max_passes) + " passes at " + std::to_string(net_->now())
                                 + " s without waiting for the network");
      }
    // Heartbeats are off here: a lost peer's grace period is the only timer.
    auto due = e.grace_due(l);
    due_[static_cast<std::size_t>(r)] = due == clock::time_point::max() ? never : seconds_of(due);
    l.release(false);
  }

  bool all_done() const {
    return std::all_of(done_.begin(), done_.end(), [](const auto& c) { return c->done; });
  }

  /// The earliest engine timer still ahead (a lost peer's grace period
  /// ending), over the ranks still running.
  double next_timer() const {
    double next = never;
    for (int r = 0; r < o_.ranks; ++r) {
      auto due = due_[static_cast<std::size_t>(r)];
      if (due > net_->now() && due < next && !done_[static_cast<std::size_t>(r)]->done && !dead(r))
        next = due;
    }
    return next;
  }

  /// Ranks whose timers are due pass too.
  void add_due_timers(std::vector<std::pair<int, int>>& active) const {
    for (int r = 0; r < o_.ranks; ++r)
      if (due_[static_cast<std::size_t>(r)] <= net_->now() && !done_[static_cast<std::size_t>(r)]->done && !dead(r))
        active.emplace_back(r, -1);
    std::sort(active.begin(), active.end());
    active.erase(std::unique(active.begin(), active.end()), active.end());
  }

  void stalled() {
    for (int r = 0; r < o_.ranks; ++r) {
      auto& c = *done_[static_cast<std::size_t>(r)];
      if (c.done)
        continue;
      std::ostringstream why;
      why << "stalled at " << net_->now() << " s with nothing in flight";
      auto& e = *engines_[static_cast<std::size_t>(r)];
      auto l = e.try_lead(driver_kind::caller);
      for (const auto& s : e.running_ops())
        why << "; " << s.op << " " << s.algorithm << " " << s.where;
      l.release(false);
      c.error = why.str();
      c.done = true;
    }
  }

  /// Every element of every live rank's result.
  void check(run_result& out) const {
    auto p = static_cast<std::size_t>(o_.ranks);
    std::vector<float> sum;
    if (o_.op == op_kind::allreduce || o_.op == op_kind::reduce || o_.op == op_kind::reduce_scatter) {
      sum.assign(moved_, 0.f);
      for (std::size_t i = 0; i < moved_; ++i)
        for (int r = 0; r < o_.ranks; ++r)
          sum[i] += contribution(r, i);
    }
    for (int r = 0; r < o_.ranks; ++r) {
      const auto& c = *done_[static_cast<std::size_t>(r)];
      if (!c.ok)
        continue;
      const auto& got = data_[static_cast<std::size_t>(r)].recv;
      for (std::size_t i = 0; i < got.size(); ++i) {
        float want = 0;
        switch (o_.op) {
          case op_kind::allreduce: want = sum[i]; break;
          case op_kind::reduce: if (r != 0) continue; want = sum[i]; break;
          case op_kind::broadcast: want = contribution(0, i); break;
          case op_kind::allgather: want = contribution(static_cast<int>(i / (moved_ / p)), i % (moved_ / p)); break;
          case op_kind::reduce_scatter: want = sum[static_cast<std::size_t>(r) * got.size() + i]; break;
          default: continue;
        }
        if (got[i] != want && out.mismatches++ == 0) {
          std::ostringstream where;
          where << "rank " << r << " element " << i << ": " << got[i] << ", expected " << want;
          out.first_mismatch = where.str();
        }
      }
    }
  }

  run_result result(double wall) {
    run_result out;
    out.wall_seconds = wall;
    out.count = moved_;
    out.algorithm = algorithm_;
    for (const auto& c : done_) {
      out.outcomes.push_back({c->ok, c->error, c->ended_at});
      out.seconds = std::max(out.seconds, c->ended_at);
      if (!c->algorithm.empty())
        out.algorithm = c->algorithm;
    }
    check(out);
    return out;
  }

  run_options o_;
  std::size_t moved_;
  config cfg_;
  std::string algorithm_;
  transport::buffer_pool pool_;
  std::unique_ptr<transport::timed_network> net_;
  quiet_listener listener_;
  std::vector<std::unique_ptr<engine>> engines_;
  std::vector<std::shared_ptr<completion>> done_;
  std::vector<rank_data> data_;
  std::vector<double> due_; ///< each rank's next engine timer, virtual seconds
};

} // namespace

op_kind parse_op(const std::string& name) {
  for (auto k : {op_kind::allreduce, op_kind::broadcast, op_kind::reduce, op_kind::allgather,
                 op_kind::reduce_scatter})
    if (name == to_string(k))
      return k;
  throw std::invalid_argument("unknown op '" + name
                              + "': one of allreduce, broadcast, reduce, allgather, reduce_scatter");
}

cost_params model_of(const run_options& o) {
  cost_params c;
  c.alpha = o.net.alpha;
  c.beta = 1.0 / o.net.bytes_per_s;
  c.host_alpha = o.host.alpha;
  c.host_beta = 1.0 / o.host.bytes_per_s;
  c.ranks_per_host = o.ranks_per_host;
  // The chunk the engine uses, at full size.
  auto cfg = resolve_config({}, {});
  c.chunk_bytes = cfg.chunk_bytes;
  return c;
}

run_result run(const run_options& o) {
  if (o.ranks < 1)
    throw std::invalid_argument("--ranks must be at least 1");
  if (o.ranks_per_host < 1)
    throw std::invalid_argument("--ranks-per-host must be at least 1");
  if (o.kill_rank && (*o.kill_rank < 0 || *o.kill_rank >= o.ranks))
    throw std::invalid_argument("--kill rank " + std::to_string(*o.kill_rank) + " is not a rank of "
                                + std::to_string(o.ranks));
  register_builtin_algorithms();
  auto moved = moved_elements(o);
  double scale = static_cast<double>(elements_of_largest(o)) / static_cast<double>(moved);
  run_result out;
  {
    world w(o, moved, scale);
    out = w.run();
  }
  out.scale = scale;
  out.predicted = predict(o.op, out.algorithm, o.ranks, static_cast<double>(o.bytes), model_of(o));
  if (o.kill_rank && o.shrink) {
    auto survivors = o;
    survivors.ranks = o.ranks - 1;
    survivors.kill_rank.reset();
    out.after_shrink = std::make_shared<run_result>(run(survivors));
  }
  return out;
}

} // namespace mccl::sim
