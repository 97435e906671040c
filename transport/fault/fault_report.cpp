#include "transport/fault/fault_report.hpp"

#include "config/log.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace mccl::transport {

namespace {

std::string key_text(const frame_key& k) {
  if (!k.valid)
    return "";
  return std::string(k.p2p ? "message " : "seq ") + std::to_string(k.seq) + " step "
         + std::to_string(k.step) + " chunk " + std::to_string(k.chunk);
}

bool same_chunk(const frame_key& a, const frame_key& b) {
  return a.valid && b.valid && a.seq == b.seq && a.step == b.step && a.chunk == b.chunk
         && a.p2p == b.p2p;
}

std::string fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

} // namespace

fault_recorder::fault_recorder(int rank, std::string scenario, uint64_t seed, std::string prefix)
  : rank_(rank), scenario_(std::move(scenario)), seed_(seed), prefix_(std::move(prefix)) {
}

fault_recorder::event fault_recorder::stamp(const std::string& kind, int peer, const frame_key& key,
                                            const std::string& detail) const {
  event e;
  e.kind = kind;
  e.peer = peer;
  e.key = key;
  e.detail = detail;
  e.t_ms = std::chrono::duration<double, std::milli>(clock::now() - start_).count();
  e.unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
  return e;
}

void fault_recorder::fault(const std::string& kind, int peer, const frame_key& key,
                           const std::string& detail) {
  auto e = stamp(kind, peer, key, detail);
  std::lock_guard<std::mutex> guard{mutex_};
  faults_.push_back(std::move(e));
}

void fault_recorder::reaction(const std::string& kind, int peer, const frame_key& key,
                              const std::string& detail) {
  auto e = stamp(kind, peer, key, detail);
  std::lock_guard<std::mutex> guard{mutex_};
  // A retransmit answers the oldest unanswered fault this rank injected into
  // that chunk on the link to `peer` (the NACK came back to the injector).
  if (kind == "retransmit")
    for (auto& f : faults_)
      if (!f.answered && f.peer == peer && same_chunk(f.key, key)) {
        f.answered = true;
        e.latency_ms = e.t_ms - f.t_ms;
        break;
      }
  reactions_.push_back(std::move(e));
}

void fault_recorder::op(const std::string& name, const std::string& algorithm, uint64_t seq, bool ok,
                        const std::string& error, bool crc, double duration_ms) {
  std::lock_guard<std::mutex> guard{mutex_};
  ops_.push_back(op_outcome{name, algorithm, error, seq, ok, crc, duration_ms});
}

std::size_t fault_recorder::fault_count() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return faults_.size();
}

std::size_t fault_recorder::reaction_count(const std::string& kind) const {
  std::lock_guard<std::mutex> guard{mutex_};
  std::size_t n = 0;
  for (const auto& r : reactions_)
    n += r.kind == kind;
  return n;
}

std::string fault_recorder::json() const {
  std::lock_guard<std::mutex> guard{mutex_};
  auto event_json = [](const event& e) {
    nlohmann::json j{{"kind", e.kind}, {"t_ms", e.t_ms}, {"unix_ms", e.unix_ms}, {"detail", e.detail}};
    if (e.peer >= 0)
      j["peer"] = e.peer;
    if (e.key.valid)
      j["chunk"] = {{e.key.p2p ? "message" : "seq", e.key.seq}, {"step", e.key.step},
                    {"chunk", e.key.chunk}};
    if (e.latency_ms)
      j["detection_latency_ms"] = *e.latency_ms;
    return j;
  };
  nlohmann::json j;
  j["rank"] = rank_;
  j["scenario"] = scenario_;
  j["seed"] = seed_;
  j["faults"] = nlohmann::json::array();
  for (const auto& f : faults_)
    j["faults"].push_back(event_json(f));
  j["reactions"] = nlohmann::json::array();
  for (const auto& r : reactions_)
    j["reactions"].push_back(event_json(r));
  j["ops"] = nlohmann::json::array();
  for (const auto& o : ops_) {
    nlohmann::json op{{"op", o.name},       {"algorithm", o.algorithm}, {"seq", o.seq},
                      {"ok", o.ok},         {"duration_ms", o.duration_ms},
                      {"data_verified", o.ok && o.crc ? "crc32c" : "no"}};
    if (!o.ok)
      op["error"] = o.error;
    j["ops"].push_back(op);
  }
  return j.dump(2) + "\n";
}

std::string fault_recorder::text() const {
  std::lock_guard<std::mutex> guard{mutex_};
  std::ostringstream os;
  os << "mccl fault report, rank " << rank_ << ", scenario " << scenario_ << ", seed " << seed_
     << "\n\nfaults injected by this rank: " << faults_.size() << "\n";
  auto line = [&](const event& e) {
    os << "  " << fixed(e.t_ms) << " ms  " << e.kind;
    if (e.peer >= 0)
      os << "  peer " << e.peer;
    if (e.key.valid)
      os << "  " << key_text(e.key);
    if (e.latency_ms)
      os << "  (detected after " << fixed(*e.latency_ms) << " ms)";
    if (!e.detail.empty())
      os << ": " << e.detail;
    os << "\n";
  };
  for (const auto& f : faults_)
    line(f);
  os << "\nreactions of the runtime on this rank: " << reactions_.size() << "\n";
  for (const auto& r : reactions_)
    line(r);
  std::size_t ok = 0, verified = 0;
  for (const auto& o : ops_) {
    ok += o.ok;
    verified += o.ok && o.crc;
  }
  os << "\nops: " << ops_.size() << ", " << ok << " ok (" << verified
     << " with every chunk CRC32C-verified), " << ops_.size() - ok << " failed\n";
  for (const auto& o : ops_) {
    os << "  " << o.name << " seq " << o.seq << " (" << o.algorithm << ", " << fixed(o.duration_ms)
       << " ms): " << (o.ok ? (o.crc ? "ok, data verified (crc32c)" : "ok, data not verified (no CRC)")
                            : "FAILED: " + o.error)
       << "\n";
  }
  return os.str();
}

void fault_recorder::write() {
  for (auto [suffix, body] : {std::pair<const char*, std::string>{".txt", text()},
                              std::pair<const char*, std::string>{".json", json()}}) {
    std::ofstream out(prefix_ + suffix, std::ios::trunc);
    out << body;
    if (!out)
      MCCL_LOG(error, "fault report: cannot write " << prefix_ << suffix);
  }
}

} // namespace mccl::transport
