#include "collectives/observability/flight_recorder.hpp"

#include <cstdio>

namespace mccl {

const char* to_string(flight_recorder::state s) noexcept {
  switch (s) {
    case flight_recorder::state::running: return "running";
    case flight_recorder::state::done: return "done";
    case flight_recorder::state::failed: return "failed";
    case flight_recorder::state::aborted: return "aborted";
  }
  return "unknown";
}

flight_recorder::op_info recorded_op(const issued_op& op, int world, std::string_view algorithm,
                                     driver_kind driver) {
  flight_recorder::op_info info;
  info.collective = op.kind != op_kind::send && op.kind != op_kind::recv;
  info.seq = op.seq;
  info.bytes = op.selection_bytes(world);
  info.algorithm = algorithm;
  info.driver = driver;
  info.kind = op.kind;
  if (op.kind == op_kind::custom)
    info.custom_name = op.name;
  if (!info.collective) {
    info.peer = op.root;
    info.tag = op.tag;
  }
  return info;
}

std::string what(const flight_recorder::op_info& info) {
  switch (info.kind) {
    case op_kind::send:
      return "send to rank " + std::to_string(info.peer) + " message " + std::to_string(info.seq) + " tag "
             + std::to_string(info.tag);
    case op_kind::recv: return "recv from rank " + std::to_string(info.peer) + " tag " + std::to_string(info.tag);
    case op_kind::custom: return info.custom_name;
    default: return to_string(info.kind);
  }
}

uint64_t flight_recorder::started(op_info info, clock::time_point at) {
  std::lock_guard<std::mutex> guard{mutex_};
  auto ticket = next_ticket_++;
  if (info.collective)
    if (!last_enqueued_ || info.seq > *last_enqueued_)
      last_enqueued_ = info.seq;
  if (capacity_ == 0)
    return ticket;
  if (ring_.size() < capacity_) { // every op has an entry: slot == ticket until full
    ring_.push_back(entry{ticket, std::move(info), state::running, at});
    return ticket;
  }
  auto& e = ring_[ticket % capacity_]; // the oldest
  e.ticket = ticket;
  e.info = std::move(info);
  e.how = state::running;
  e.start = at;
  e.took = {};
  return ticket;
}

flight_recorder::entry* flight_recorder::find(uint64_t ticket) {
  if (ticket >= next_ticket_ || next_ticket_ - ticket > ring_.size())
    return nullptr; // not handed out, or fell out of the window
  return &ring_[ticket % capacity_];
}

void flight_recorder::ended(uint64_t ticket, state how, clock::time_point at) {
  std::lock_guard<std::mutex> guard{mutex_};
  auto* e = find(ticket);
  if (e == nullptr || e->how != state::running)
    return;
  e->how = how;
  e->took = at - e->start;
  if (how == state::done && e->info.collective)
    if (!last_completed_ || e->info.seq > *last_completed_)
      last_completed_ = e->info.seq;
}

void flight_recorder::abort_running() {
  std::lock_guard<std::mutex> guard{mutex_};
  auto now = clock::now();
  for (auto& e : ring_)
    if (e.how == state::running) {
      e.how = state::aborted;
      e.took = now - e.start;
    }
}

std::optional<uint64_t> flight_recorder::last_enqueued_seq() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return last_enqueued_;
}

std::optional<uint64_t> flight_recorder::last_completed_seq() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return last_completed_;
}

std::string flight_recorder::progress_note() const {
  std::lock_guard<std::mutex> guard{mutex_};
  auto show = [](const std::optional<uint64_t>& v) { return v ? std::to_string(*v) : std::string("none"); };
  return "last enqueued seq " + show(last_enqueued_) + ", last completed seq " + show(last_completed_);
}

std::string flight_recorder::dump(int rank, uint32_t comm_id, const std::string& why) const {
  std::lock_guard<std::mutex> guard{mutex_};
  auto now = clock::now();
  auto ms = [](clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::string out = "flight recorder of rank " + std::to_string(rank) + ", communicator "
                    + std::to_string(comm_id) + " (last " + std::to_string(ring_.size())
                    + " of up to " + std::to_string(capacity_) + " ops; MCCL_FLIGHT_RECORDER), " + why
                    + ":";
  char line[160];
  each([&](const entry& e) {
    std::string number = e.info.collective ? " seq " + std::to_string(e.info.seq) : "";
    if (e.how == state::running) {
      std::snprintf(line, sizeof line, "running for %.1f ms", ms(now - e.start));
    } else {
      std::snprintf(line, sizeof line, "%s after %.1f ms, started %.1f ms before this dump",
                    to_string(e.how), ms(e.took), ms(now - e.start));
    }
    out += "\n  " + what(e.info) + number + ", " + std::to_string(e.info.bytes) + " B, "
           + (e.info.algorithm.empty() ? std::string("-") : e.info.algorithm)
           + " (driven by the " + to_string(e.info.driver) + "): " + line;
  });
  if (ring_.empty())
    out += capacity_ == 0 ? " off" : " no ops yet";
  return out;
}

} // namespace mccl
