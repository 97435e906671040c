#include "collectives/observability/trace.hpp"

#include <mccl/error.hpp>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace mccl {

namespace {

// Track (thread) numbers inside a rank's process: one group per communicator.
constexpr int ops_track = 1, chunks_track = 2, waits_track = 3;

} // namespace

trace_recorder::trace_recorder(std::string dir, int rank, uint32_t comm_id)
  : dir_(std::move(dir)), rank_(rank), comm_id_(comm_id) {
  using namespace std::chrono;
  auto wall = duration<double, std::micro>(system_clock::now().time_since_epoch()).count();
  auto steady = duration<double, std::micro>(clock::now().time_since_epoch()).count();
  wall_offset_us_ = wall - steady;
}

double trace_recorder::wall_us(clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t.time_since_epoch()).count() + wall_offset_us_;
}

void trace_recorder::add(event e) {
  std::lock_guard<std::mutex> guard{mutex_};
  if (events_.size() >= max_events) {
    ++dropped_;
    return;
  }
  events_.push_back(std::move(e));
}

void trace_recorder::op(const std::string& name, bool collective, uint64_t seq,
                        const std::string& algorithm, std::size_t bytes, std::size_t wire_bytes,
                        clock::time_point start, clock::time_point end, bool ok) {
  event e;
  e.kind = 'o';
  e.name = name;
  e.collective = collective;
  e.seq = seq;
  e.algorithm = algorithm;
  e.bytes = bytes;
  e.wire_bytes = wire_bytes;
  e.start = start;
  e.end = end;
  e.ok = ok;
  add(std::move(e));
}

void trace_recorder::chunk(bool sent, int peer, uint64_t seq, uint32_t step, uint32_t chunk,
                           std::size_t bytes, clock::time_point at) {
  event e;
  e.kind = sent ? 's' : 'r';
  e.peer = peer;
  e.seq = seq;
  e.step = step;
  e.chunk = chunk;
  e.bytes = bytes;
  e.start = at;
  e.end = at;
  add(std::move(e));
}

void trace_recorder::wait(clock::time_point start, clock::time_point end) {
  event e;
  e.kind = 'w';
  e.start = start;
  e.end = end;
  add(std::move(e));
}

std::string trace_recorder::write() const {
  using nlohmann::json;
  const int base = static_cast<int>(comm_id_ % 100000) * 4;
  json events = json::array();
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", rank_},
                    {"args", {{"name", "rank " + std::to_string(rank_)}}}});
  const char* tracks[] = {"", "ops", "chunks", "waits"};
  for (int t : {ops_track, chunks_track, waits_track})
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank_}, {"tid", base + t},
                      {"args", {{"name", "comm " + std::to_string(comm_id_) + " " + tracks[t]}}}});
  std::size_t dropped;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    dropped = dropped_;
    uint64_t op_id = 0;
    for (const auto& e : events_) {
      switch (e.kind) {
        case 'o': {
          // Async slices: ops in flight together overlap without nesting.
          auto id = std::to_string(comm_id_) + "." + std::to_string(op_id++);
          json args = {{"seq", e.seq},           {"collective", e.collective},
                       {"algorithm", e.algorithm}, {"bytes", e.bytes},
                       {"wire_bytes", e.wire_bytes}, {"ok", e.ok},
                       {"comm", comm_id_}};
          events.push_back({{"ph", "b"}, {"cat", "op"}, {"name", e.name}, {"id", id},
                            {"pid", rank_}, {"tid", base + ops_track}, {"ts", wall_us(e.start)},
                            {"args", args}});
          events.push_back({{"ph", "e"}, {"cat", "op"}, {"name", e.name}, {"id", id},
                            {"pid", rank_}, {"tid", base + ops_track}, {"ts", wall_us(e.end)}});
          break;
        }
        case 's':
        case 'r':
          events.push_back({{"ph", "i"}, {"s", "t"}, {"cat", "chunk"},
                            {"name", (e.kind == 's' ? "send to " : "recv from ") + std::to_string(e.peer)},
                            {"pid", rank_}, {"tid", base + chunks_track}, {"ts", wall_us(e.start)},
                            {"args", {{"peer", e.peer}, {"seq", e.seq}, {"step", e.step},
                                      {"chunk", e.chunk}, {"bytes", e.bytes}}}});
          break;
        default:
          events.push_back({{"ph", "X"}, {"cat", "wait"}, {"name", "wait"}, {"pid", rank_},
                            {"tid", base + waits_track}, {"ts", wall_us(e.start)},
                            {"dur", std::chrono::duration<double, std::micro>(e.end - e.start).count()}});
          break;
      }
    }
  }
  json doc = {{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData", {{"rank", rank_}, {"comm", comm_id_}, {"dropped_events", dropped}}}};
  auto path = dir_ + "/mccl-trace.rank" + std::to_string(rank_) + ".comm" + std::to_string(comm_id_)
              + ".json";
  std::ofstream out(path, std::ios::trunc);
  out << doc.dump() << '\n';
  out.close();
  if (!out)
    throw error(errc::invalid_config, "MCCL_TRACE=\"" + dir_ + "\": cannot write " + path + ": "
                                        + std::strerror(errno));
  return path;
}

} // namespace mccl
