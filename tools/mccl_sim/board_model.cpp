// The host board's schedule in virtual time (board_model.hpp).

#include "tools/mccl_sim/board_model.hpp"

#include "collectives/algorithms/board_collectives.hpp"

#include <algorithm>
#include <functional>
#include <sstream>
#include <stdexcept>

namespace mccl::sim {

memory_curve::memory_curve(std::vector<std::pair<int, double>> points) : points_(std::move(points)) {
  for (std::size_t i = 0; i < points_.size(); ++i)
    if (points_[i].first < 1 || !(points_[i].second > 0) || (i > 0 && points_[i].first <= points_[i - 1].first))
      throw std::invalid_argument("a memory curve needs ranks ascending from 1 and rates above 0");
}

memory_curve memory_curve::parse(const std::string& setting, const std::string& text) {
  std::vector<std::pair<int, double>> points;
  std::istringstream in(text);
  std::string point;
  while (std::getline(in, point, ',')) {
    auto colon = point.find(':');
    try {
      std::size_t used = 0, used_rate = 0;
      int ranks = std::stoi(point.substr(0, colon), &used);
      double gbs = colon == std::string::npos ? 0 : std::stod(point.substr(colon + 1), &used_rate);
      if (used != colon || used_rate != point.size() - colon - 1 || ranks < 1 || !(gbs > 0))
        throw std::invalid_argument(point);
      if (!points.empty() && ranks <= points.back().first)
        throw std::invalid_argument(point);
      points.emplace_back(ranks, gbs * 1e9);
    } catch (const std::exception&) {
      throw std::invalid_argument(setting + " " + text + ": \"" + point
                                  + "\" is not RANKS:GB/s with ranks ascending (e.g. 1:23.5,16:112,64:188)");
    }
  }
  if (points.empty())
    throw std::invalid_argument(setting + " is empty: give RANKS:GB/s points (e.g. 1:23.5,16:112,64:188)");
  return memory_curve(std::move(points));
}

double memory_curve::rate(int copiers) const {
  if (points_.empty() || copiers < 1)
    return 0;
  const auto& first = points_.front();
  if (copiers <= first.first)
    return first.second / first.first * copiers;
  for (std::size_t i = 1; i < points_.size(); ++i)
    if (copiers <= points_[i].first) {
      const auto& [k0, r0] = points_[i - 1];
      const auto& [k1, r1] = points_[i];
      return r0 + (r1 - r0) * (copiers - k0) / (k1 - k0);
    }
  return points_.back().second;
}

std::string memory_curve::to_string() const {
  std::ostringstream s;
  for (std::size_t i = 0; i < points_.size(); ++i)
    s << (i > 0 ? "," : "") << points_[i].first << ":" << points_[i].second / 1e9;
  return s.str();
}

memory_curve measured_host_memory() {
  return memory_curve({{1, 23.5e9}, {2, 35.1e9}, {4, 55.6e9}, {8, 86.9e9}, {16, 112.1e9}, {24, 120.3e9},
                       {32, 140.6e9}, {40, 177.0e9}, {48, 185.3e9}, {56, 185.9e9}, {64, 187.6e9}});
}

memory_curve measured_host_cache() {
  return memory_curve({{1, 67.7e9}, {16, 769.6e9}, {32, 1247.3e9}, {64, 1405.7e9}});
}

memory_curve measured_host_peer() {
  return memory_curve({{8, 62.8e9}, {16, 81.0e9}, {24, 113.0e9}, {32, 133.2e9}});
}

namespace {

/// One rank's bytes in one stretch between two flag rounds.
struct traffic {
  double own = 0;  ///< its buffers and its banks: the memory, or its core's caches
  double peer = 0; ///< read from banks other cores wrote
  traffic& operator+=(const traffic& o) {
    own += o.own;
    peer += o.peer;
    return *this;
  }
  bool idle() const { return own == 0 && peer == 0; }
};

/// Reading `b` bytes of a user buffer and writing them into our bank.
traffic stage(double b) { return {2 * b, 0}; }
/// Reading `b` bytes of peers' banks and writing them into a user buffer
/// (`overwrites_read`: where the op read before).
traffic unstage(double b, bool overwrites_read) { return {overwrites_read ? b : 2 * b, b}; }

/// Copying `b` bytes of our input into a fresh output (out of place).
traffic copy_out(double b) { return {3 * b, 0}; }

using rank_work = std::function<traffic(uint64_t op, int rank)>;

/// Board ops 0 .. ops-1: each rank does before(j) then posts op j, waits
/// for every peer's post, then does after(j). Between two flag rounds a
/// rank does after(j - 1) and before(j); the stretch lasts as long as the
/// slowest rank's, its ranks sharing the memory and the cache.
board_estimate play(uint64_t ops, int world, const board_model& m, bool fits, const rank_work& before,
                    const rank_work& after) {
  board_estimate e;
  e.board_ops = ops;
  const auto& own_rate = fits ? m.cache : m.memory;
  auto& own_bytes = fits ? e.cache_bytes : e.memory_bytes;
  for (uint64_t j = 0; j <= ops; ++j) {
    std::vector<traffic> work(static_cast<std::size_t>(world));
    int busy = 0;
    for (int r = 0; r < world; ++r) {
      auto& w = work[static_cast<std::size_t>(r)];
      if (j > 0)
        w += after(j - 1, r);
      if (j < ops)
        w += before(j, r);
      busy += w.idle() ? 0 : 1;
      own_bytes += w.own;
      e.peer_bytes += w.peer;
    }
    if (busy == 0)
      continue;
    double own_each = own_rate.rate(busy) / busy, peer_each = m.peer.rate(busy) / busy;
    double slowest = 0;
    for (const auto& w : work)
      slowest = std::max(slowest, std::max(w.own / own_each, w.peer / peer_each));
    e.seconds += slowest;
  }
  e.seconds += static_cast<double>(ops) * m.round_s_per_rank * world;
  return e;
}

/// Whether what a rank touches fits its core's caches: the op's largest
/// buffer (its output too when not in place) and the two banks it writes.
bool fits_caches(const op_request& op, int world, const board_model& m) {
  auto largest = static_cast<double>(op.count) * static_cast<double>(op.elem_size());
  if (op.kind == op_kind::allgather || op.kind == op_kind::reduce_scatter)
    largest *= world; // op.count is a block
  double touched = largest * (m.in_place ? 1 : 2) + 2.0 * static_cast<double>(m.stage_bytes);
  return touched <= static_cast<double>(m.cache_bytes_per_rank);
}

/// board_stage (pieces of a stage bank) and the banks (one piece: the
/// whole op): piece j's bytes in, then out.
board_estimate play_pieces(const op_request& op, int world, uint64_t pieces, std::size_t piece_elems,
                           const board_model& m) {
  auto elem = static_cast<double>(op.elem_size());
  auto p = static_cast<double>(world);
  auto bytes_of = [&](uint64_t j) {
    auto first = j * piece_elems;
    return elem * static_cast<double>(std::min<std::size_t>(piece_elems, op.count - std::min<std::size_t>(op.count, first)));
  };
  auto before = [&](uint64_t j, int r) -> traffic {
    auto b = bytes_of(j);
    switch (op.kind) {
      case op_kind::broadcast: return r == op.root ? stage(b) : traffic{};
      case op_kind::reduce_scatter: return stage(p * b); // the piece of every block
      default: return stage(b);
    }
  };
  auto after = [&](uint64_t j, int r) -> traffic {
    auto b = bytes_of(j);
    switch (op.kind) {
      case op_kind::broadcast:
        if (r != op.root)
          return unstage(b, false);
        return m.in_place ? traffic{} : copy_out(b);
      case op_kind::allgather: { // every peer's block; our own only when not in place
        traffic t{(p - 1) * 2 * b, (p - 1) * b};
        if (!m.in_place)
          t += copy_out(b); // our own block
        return t;
      }
      default: // a reduction of every rank's bank into our output (a reduce: the root's)
        if (op.kind == op_kind::reduce && r != op.root)
          return {};
        return {m.in_place ? b : 2 * b, p * b};
    }
  };
  return play(pieces, world, m, fits_caches(op, world, m), before, after);
}

board_estimate play_board_rs(const op_request& op, int world, const board_model& m) {
  auto elem = op.elem_size();
  auto piece = m.stage_bytes / elem;
  auto ops = board_rs_ops(op.count, elem, m.stage_bytes);
  auto pieces = ops - 1;
  auto count_of = [&](uint64_t j) { return std::min<std::size_t>(piece, op.count - j * piece); };
  auto p = static_cast<double>(world);
  auto before = [&](uint64_t j, int) {
    return j < pieces ? stage(static_cast<double>(count_of(j) * elem)) : traffic{};
  };
  auto after = [&](uint64_t j, int r) {
    traffic t;
    bool gathers = op.kind == op_kind::allreduce || r == op.root;
    if (j > 0 && gathers) // every share of piece j - 1, over its input (in place) or not
      t += unstage(static_cast<double>(count_of(j - 1) * elem), m.in_place);
    if (j < pieces) { // our share of piece j from every bank, into our result bank
      auto share = static_cast<double>(board_rs_share(count_of(j), elem, world, r).count * elem);
      t += {share, p * share};
    }
    return t;
  };
  return play(ops, world, m, fits_caches(op, world, m), before, after);
}

} // namespace

board_estimate estimate_board(const op_request& op, int world, const std::string& algorithm, const board_model& m) {
  if (world < 2)
    throw std::invalid_argument("the host board needs at least 2 ranks");
  board_estimate e;
  if (algorithm == "board_rs") {
    if (op.kind != op_kind::allreduce && op.kind != op_kind::reduce)
      throw std::invalid_argument(std::string("board_rs runs allreduce and reduce, not ") + mccl::to_string(op.kind));
    e = play_board_rs(op, world, m);
  } else if (algorithm == "board_stage") {
    if (op.kind != op_kind::broadcast && op.kind != op_kind::allgather && op.kind != op_kind::reduce_scatter)
      throw std::invalid_argument(std::string("board_stage runs broadcast, allgather and reduce_scatter, not ")
                                  + mccl::to_string(op.kind));
    e = play_pieces(op, world, board_ops(op, world, m.stage_bytes, "board_stage"),
                    board_stage_piece(op, world, m.stage_bytes), m);
  } else if (algorithm == "board") {
    if (op.kind == op_kind::barrier)
      e = play(1, world, m, true, [](uint64_t, int) { return traffic{}; }, [](uint64_t, int) { return traffic{}; });
    else
      e = play_pieces(op, world, 1, op.count, m);
  } else {
    throw std::invalid_argument("no board algorithm \"" + algorithm + "\" (board, board_rs, board_stage)");
  }
  e.algorithm = algorithm;
  return e;
}

} // namespace mccl::sim
