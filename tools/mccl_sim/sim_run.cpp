#include "tools/mccl_sim/sim_run.hpp"

#include "collectives/algorithms/board_collectives.hpp"
#include "collectives/engine/engine.hpp"
#include "collectives/extension/registry.hpp"
#include "transport/buffer_pool.hpp"
#include <mccl/algo_spec.hpp>
#include <mccl/config.hpp>

#include <algorithm>
#include <cctype>
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
  bool killed = false;
  std::string error;
  std::string algorithm;
  double ended_at = 0;

private:
  const transport::timed_network& net_;
};

/// One engine's control-plane callbacks: nothing to drive (the event loop
/// runs every rank) and nothing to reconnect; a lost peer is revoked at
/// once, as a supervisor whose link actor exits at once would (the next
/// pass of the same rank takes it).
class quiet_listener : public engine_listener {
public:
  engine* eng = nullptr;
  void needs_driver(driver_kind) override {}
  void aborted(errc, const std::string&, int) override {}
  void link_lost(int, const std::string&) override {}
  void peer_failed(int peer, errc code, const std::string& why) override {
    if (eng)
      eng->post_member_lost(peer, code, why);
  }
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

/// What every old rank of a grown world holds before the newcomers get it:
/// a pattern apart from any rank's contribution, so a newcomer that kept
/// its empty buffer, or got another rank's data, shows.
float state_value(std::size_t i) {
  return static_cast<float>(static_cast<int>((i * 5 + 1) % 11)) + 0.5f;
}

/// One world: its network, one engine per rank, and ops run on all of
/// them one after another (wire sequence 0, 1, ...).
class world {
public:
  world(const run_options& o, std::size_t moved, double scale) : o_(o), moved_(moved) {
    transport::timed_network_options no;
    no.world = o.ranks;
    no.ranks_per_host = o.ranks_per_host;
    no.net = o.net;
    no.host = o.host;
    no.host_bus_bytes_per_s = host_bus_of(o);
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
    // The table chooses for the full size, with the full-size chunk; a
    // grown world's state broadcast is as large as the op.
    algorithm_ = o.algorithm.empty() ? default_algorithm(o.op, o.bytes, o.ranks, cfg_) : o.algorithm;
    auto spec = std::string(to_string(o.op)) + "=" + algorithm_;
    if (o.op != op_kind::broadcast) {
      broadcast_algorithm_ = default_algorithm(op_kind::broadcast, o.bytes, o.ranks, cfg_);
      spec += "; broadcast=" + broadcast_algorithm_;
    } else {
      broadcast_algorithm_ = algorithm_;
    }
    cfg_.algo = parse_algo_spec(spec);
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
      listeners_.push_back(std::make_unique<quiet_listener>());
      engines_.push_back(std::make_unique<engine>(eo, net_->connections(r), *listeners_.back()));
      listeners_.back()->eng = engines_.back().get();
    }
    dead_.assign(static_cast<std::size_t>(o.ranks), false);
    // Deaths in the order they happen.
    pending_kills_ = o.kills;
    std::stable_sort(pending_kills_.begin(), pending_kills_.end(),
                     [](const rank_death& a, const rank_death& b) { return a.at < b.at; });
  }

  ~world() {
    // Engines first: their channels hold buffers of the pool.
    engines_.clear();
  }

  const std::string& algorithm() const { return algorithm_; }

  /// The op of the options, on every rank, checked.
  run_result run_op() {
    auto wall = clock::now();
    fill();
    drive(o_.op);
    auto out = result(std::chrono::duration<double>(clock::now() - wall).count(), algorithm_);
    check(out);
    return out;
  }

  /// A grown world's first op: rank 0 broadcasts the state that the first
  /// `old_ranks` ranks hold (the newcomers hold nothing yet); every rank's
  /// copy is checked.
  run_result run_state_broadcast(int old_ranks) {
    auto wall = clock::now();
    data_.assign(static_cast<std::size_t>(o_.ranks), {});
    for (int r = 0; r < o_.ranks; ++r) {
      auto& d = data_[static_cast<std::size_t>(r)];
      d.recv.assign(moved_, std::numeric_limits<float>::quiet_NaN());
      if (r < old_ranks)
        for (std::size_t i = 0; i < moved_; ++i)
          d.recv[i] = state_value(i);
      if (r == 0)
        d.send = d.recv;
    }
    drive(op_kind::broadcast);
    auto out = result(std::chrono::duration<double>(clock::now() - wall).count(), broadcast_algorithm_);
    for (int r = 0; r < o_.ranks; ++r) {
      const auto& got = data_[static_cast<std::size_t>(r)].recv;
      if (!out.outcomes[static_cast<std::size_t>(r)].ok)
        continue;
      for (std::size_t i = 0; i < got.size(); ++i)
        note_mismatch(out, r, i, got[i], state_value(i));
    }
    return out;
  }

private:
  bool dead(int r) const { return dead_[static_cast<std::size_t>(r)]; }

  void fill() {
    auto p = static_cast<std::size_t>(o_.ranks);
    data_.assign(p, {});
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

  /// Posts `kind` on every live rank (the next wire sequence) and runs the
  /// event loop until every rank's op has ended, killing ranks on time.
  void drive(op_kind kind) {
    started_at_ = net_->now();
    done_.assign(static_cast<std::size_t>(o_.ranks), nullptr);
    // (rank, peer whose bytes it can read), ascending; peer -1: none, a
    // pass for posted work or a timer.
    std::vector<std::pair<int, int>> active;
    for (int r = 0; r < o_.ranks; ++r) {
      done_[static_cast<std::size_t>(r)] = std::make_shared<completion>(*net_);
      if (dead(r)) {
        mark_killed(r, "dead before the op");
        continue;
      }
      post(r, kind);
      active.emplace_back(r, -1);
    }
    ++seq_;
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
      // A death after every op ended still happens: the next world must
      // go on without that rank.
      if (all_done() && pending_kills_.empty())
        break;
      double next = std::min(net_->next_arrival(), next_timer());
      if (!pending_kills_.empty())
        next = std::min(next, std::max(net_->now(), pending_kills_.front().at));
      if (next == never) {
        stalled();
        break;
      }
      active = net_->advance_to(next);
      kill_due(active);
      add_due_timers(active);
    }
  }

  /// The deaths due by now: each rank's connections fail, its op ends
  /// there, and every live rank reads the reset at its next pass.
  void kill_due(std::vector<std::pair<int, int>>& active) {
    while (!pending_kills_.empty() && pending_kills_.front().at <= net_->now()) {
      int k = pending_kills_.front().rank;
      pending_kills_.erase(pending_kills_.begin());
      net_->kill(k);
      dead_[static_cast<std::size_t>(k)] = true;
      std::ostringstream why;
      why << "killed at " << net_->now() << " s";
      mark_killed(k, why.str());
      for (int r = 0; r < o_.ranks; ++r)
        if (!dead(r))
          active.emplace_back(r, k);
    }
  }

  void mark_killed(int r, const std::string& why) {
    auto& c = *done_[static_cast<std::size_t>(r)];
    c.killed = true;
    if (!c.done) { // an op that ended before the death keeps its outcome
      c.done = true;
      c.ok = false;
      c.error = why;
      c.ended_at = net_->now();
    }
  }

  void post(int r, op_kind kind) {
    auto& d = data_[static_cast<std::size_t>(r)];
    auto op = std::make_shared<issued_op>();
    op->kind = kind;
    op->send = d.send.empty() ? nullptr : d.send.data();
    op->recv = d.recv.data();
    op->count = kind == op_kind::allgather ? d.send.size() : d.recv.size();
    op->type = dtype::float32;
    op->op = redop::sum;
    op->root = 0;
    op->id = seq_;
    op->seq = seq_;
    op->done = done_[static_cast<std::size_t>(r)];
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

  static void note_mismatch(run_result& out, int r, std::size_t i, float got, float want) {
    // NaN never equals: a newcomer's untouched element counts.
    if (got == want || out.mismatches++ != 0)
      return;
    std::ostringstream where;
    where << "rank " << r << " element " << i << ": " << got << ", expected " << want;
    out.first_mismatch = where.str();
  }

  /// Every element of every rank's result whose op finished.
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
      if (!out.outcomes[static_cast<std::size_t>(r)].ok)
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
        note_mismatch(out, r, i, got[i], want);
      }
    }
  }

  run_result result(double wall, const std::string& algorithm) const {
    run_result out;
    out.wall_seconds = wall;
    out.count = moved_;
    out.algorithm = algorithm;
    // Times from the op's start: a grown world's op follows its state
    // broadcast on the same clock.
    for (const auto& c : done_) {
      out.outcomes.push_back({c->ok, c->killed, c->error, c->ended_at - started_at_});
      out.seconds = std::max(out.seconds, c->ended_at - started_at_);
      if (!c->algorithm.empty())
        out.algorithm = c->algorithm;
    }
    return out;
  }

  run_options o_;
  std::size_t moved_;
  config cfg_;
  std::string algorithm_;
  std::string broadcast_algorithm_;
  transport::buffer_pool pool_;
  std::unique_ptr<transport::timed_network> net_;
  std::vector<std::unique_ptr<quiet_listener>> listeners_; ///< by rank, before the engines they outlive
  std::vector<std::unique_ptr<engine>> engines_;
  std::vector<std::shared_ptr<completion>> done_; ///< by rank, the op being driven
  std::vector<rank_data> data_;
  std::vector<double> due_; ///< each rank's next engine timer, virtual seconds
  std::vector<bool> dead_;
  std::vector<rank_death> pending_kills_; ///< by time
  uint64_t seq_ = 0;
  double started_at_ = 0; ///< virtual seconds when the op being driven was posted
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

double host_bus_of(const run_options& o) {
  if (o.host_bus_bytes_per_s >= 0)
    return o.host_bus_bytes_per_s;
  return o.board.memory.rate(o.ranks_per_host) / 4;
}

cost_params model_of(const run_options& o) {
  cost_params c;
  c.alpha = o.net.alpha;
  c.beta = 1.0 / o.net.bytes_per_s;
  c.host_alpha = o.host.alpha;
  c.host_beta = 1.0 / o.host.bytes_per_s;
  auto bus = host_bus_of(o);
  c.host_bus_beta = bus > 0 ? 1.0 / bus : 0;
  c.ranks_per_host = o.ranks_per_host;
  // The chunk the engine uses, at full size.
  auto cfg = resolve_config({}, {});
  c.chunk_bytes = cfg.chunk_bytes;
  c.stage_bytes = cfg.shm_stage_bytes;
  return c;
}

namespace {

/// The op of `o` at its full size, float32 sum, as every rank issues it.
op_request full_size_op(const run_options& o) {
  op_request op;
  op.kind = o.op;
  op.type = dtype::float32;
  op.op = redop::sum;
  auto elements = elements_of_largest(o);
  bool blocks = o.op == op_kind::allgather || o.op == op_kind::reduce_scatter;
  op.count = blocks ? elements / static_cast<std::size_t>(o.ranks) : elements;
  return op;
}

/// The host board's algorithm a job of `o` with the default settings
/// would run the op with, as comm_core chooses it, and the board model's
/// time for it; nothing where the job too would take the engine's.
void model_the_board(const run_options& o, run_result& out) {
  if (o.ranks < 2 || o.ranks_per_host < o.ranks)
    return;
  auto cfg = resolve_config({}, {}); // the defaults, as the simulated engines have
  // A board's banks are at most MCCL_INLINE_BYTES (transport/wireup/transport_table.cpp).
  auto board_bytes = std::min(cfg.shm_board_bytes, cfg.inline_bytes);
  auto op = full_size_op(o);
  out.runtime_algorithm = board_algorithm(op, o.ranks, board_bytes, cfg.shm_stage_bytes, o.algorithm);
  if (out.runtime_algorithm.empty())
    return;
  auto m = o.board;
  m.stage_bytes = cfg.shm_stage_bytes;
  out.board = estimate_board(op, o.ranks, out.runtime_algorithm, m);
}

/// One world's run of the op (and, in a grown world, the state broadcast
/// first), with the model's prediction.
run_result run_world(const run_options& o, int old_ranks_of_grown_world) {
  auto moved = moved_elements(o);
  double scale = static_cast<double>(elements_of_largest(o)) / static_cast<double>(moved);
  run_result out;
  std::shared_ptr<run_result> state;
  {
    world w(o, moved, scale);
    if (old_ranks_of_grown_world >= 0) {
      state = std::make_shared<run_result>(w.run_state_broadcast(old_ranks_of_grown_world));
      state->scale = scale;
      state->predicted = predict(op_kind::broadcast, state->algorithm, o.ranks, static_cast<double>(o.bytes), model_of(o));
    }
    out = w.run_op();
  }
  out.scale = scale;
  out.predicted = predict(o.op, out.algorithm, o.ranks, static_cast<double>(o.bytes), model_of(o));
  model_the_board(o, out);
  out.state_broadcast = std::move(state);
  return out;
}

void validate_run_options(const run_options& o) {
  if (o.ranks < 1)
    throw std::invalid_argument("--ranks must be at least 1");
  if (o.ranks_per_host < 1)
    throw std::invalid_argument("--ranks-per-host must be at least 1");
  std::vector<int> seen;
  for (const auto& k : o.kills) {
    if (k.rank < 0 || k.rank >= o.ranks)
      throw std::invalid_argument("--kill rank " + std::to_string(k.rank) + " is not a rank of "
                                  + std::to_string(o.ranks));
    if (std::find(seen.begin(), seen.end(), k.rank) != seen.end())
      throw std::invalid_argument("--kill rank " + std::to_string(k.rank) + " is given twice");
    if (!(k.at >= 0) || std::isinf(k.at))
      throw std::invalid_argument("--kill-at for rank " + std::to_string(k.rank) + " must be a finite time >= 0");
    seen.push_back(k.rank);
  }
  if (o.shrink && o.kills.empty())
    throw std::invalid_argument("--shrink needs --kill");
  if (o.shrink && static_cast<int>(o.kills.size()) == o.ranks)
    throw std::invalid_argument("--shrink: every one of the " + std::to_string(o.ranks) + " ranks is killed");
  if (o.grow < 0)
    throw std::invalid_argument("--grow must be at least 0");
  if (o.grow > 0 && !o.shrink)
    throw std::invalid_argument("--grow needs --shrink (the newcomers join the survivors)");
}

} // namespace

run_options shrunk_options(const run_options& o) {
  auto s = o;
  s.ranks = o.ranks - static_cast<int>(o.kills.size());
  s.kills.clear();
  s.shrink = false;
  s.grow = 0;
  return s;
}

run_options grown_options(const run_options& o) {
  auto g = shrunk_options(o);
  g.ranks += o.grow;
  return g;
}

bool names_rank(const std::string& message, int rank) {
  auto name = "rank " + std::to_string(rank);
  for (auto at = message.find(name); at != std::string::npos; at = message.find(name, at + 1)) {
    auto after = at + name.size();
    if (after == message.size() || !std::isdigit(static_cast<unsigned char>(message[after])))
      return true;
  }
  return false;
}

bool survivors_named_a_dead_rank(const run_options& o, const run_result& r) {
  for (const auto& x : r.outcomes) {
    if (x.killed || x.ok)
      continue;
    bool named = std::any_of(o.kills.begin(), o.kills.end(),
                             [&](const rank_death& k) { return names_rank(x.error, k.rank); });
    if (!named)
      return false;
  }
  return true;
}

run_result run(const run_options& o) {
  validate_run_options(o);
  register_builtin_algorithms();
  auto out = run_world(o, -1);
  if (!o.shrink)
    return out;
  // The survivors, in their old order, are ranks 0.. of the new world.
  auto shrunk = shrunk_options(o);
  out.after_shrink = std::make_shared<run_result>(run_world(shrunk, -1));
  for (int r = 0; r < o.ranks; ++r)
    if (!out.outcomes[static_cast<std::size_t>(r)].killed)
      out.after_shrink->origin.push_back(r);
  if (o.grow == 0)
    return out;
  // The newcomers come after the old ranks, which keep theirs.
  auto grown = grown_options(o);
  out.after_grow = std::make_shared<run_result>(run_world(grown, shrunk.ranks));
  for (int r = 0; r < grown.ranks; ++r)
    out.after_grow->origin.push_back(r < shrunk.ranks ? r : -1);
  return out;
}

} // namespace mccl::sim
