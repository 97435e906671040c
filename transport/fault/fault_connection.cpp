#include "transport/fault/fault_connection.hpp"

#include "config/log.hpp"
#include "transport/fault/fault_draw.hpp"
#include "transport/fault/rank_faults.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

namespace mccl::transport {

namespace {

/// One thread that runs the timed parts of fault injection (after_ms,
/// the end of a delay or stall). Callbacks must be short: they post or
/// flip flags. Started on first use, joined at process exit.
class fault_clock {
public:
  static fault_clock& instance() {
    static fault_clock clock;
    return clock;
  }

  void at(std::chrono::steady_clock::time_point when, std::function<void()> fn) {
    std::lock_guard<std::mutex> guard{mutex_};
    if (!thread_.joinable())
      thread_ = std::thread([this] { run(); });
    queue_.emplace(when, std::move(fn));
    cv_.notify_all();
  }

  ~fault_clock() {
    {
      std::lock_guard<std::mutex> guard{mutex_};
      stop_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable())
      thread_.join();
  }

private:
  void run() {
    std::unique_lock<std::mutex> lock{mutex_};
    while (!stop_) {
      if (queue_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto first = queue_.begin();
      if (std::chrono::steady_clock::now() < first->first) {
        cv_.wait_until(lock, first->first);
        continue;
      }
      auto fn = std::move(first->second);
      queue_.erase(first);
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::multimap<std::chrono::steady_clock::time_point, std::function<void()>> queue_;
  std::thread thread_;
  bool stop_ = false;
};

/// Copies n bytes at stream offset `at` of the gathered buffers; false if
/// they end first.
bool copy_out(const iovec* iov, int count, std::size_t at, uint8_t* out, std::size_t n) {
  for (int i = 0; i < count && n > 0; ++i) {
    if (at >= iov[i].iov_len) {
      at -= iov[i].iov_len;
      continue;
    }
    auto take = std::min(n, iov[i].iov_len - at);
    std::memcpy(out, static_cast<const uint8_t*>(iov[i].iov_base) + at, take);
    out += take;
    n -= take;
    at = 0;
  }
  return n == 0;
}

} // namespace

// ---- injector -------------------------------------------------------------------

fault_injector::fault_injector(fault_scenario scenario, int rank, std::shared_ptr<fault_recorder> recorder)
  : scenario_(std::move(scenario)), rank_(rank), recorder_(std::move(recorder)),
    fired_(scenario_.faults.size(), false) {
}

void fault_injector::start() {
  std::weak_ptr<fault_injector> weak = shared_from_this();
  for (std::size_t i = 0; i < scenario_.faults.size(); ++i) {
    const auto& f = scenario_.faults[i];
    if (is_link_fault(f.kind) || f.rank != rank_ || f.seq || f.during != membership_change::none)
      continue; // a link's, another rank's, one at an op or one inside a membership change
    fault_clock::instance().at(start_ + std::chrono::milliseconds(f.after_ms), [weak, i] {
      if (auto self = weak.lock())
        self->fire(i, "after " + std::to_string(self->scenario_.faults[i].after_ms) + " ms");
    });
  }
}

connection_ptr fault_injector::wrap(connection_ptr inner, int peer) {
  auto c = std::make_shared<fault_connection>(std::move(inner), shared_from_this(), peer);
  c->start();
  return c;
}

void fault_injector::on_data_frame(const wire::frame_header& h) {
  if (h.flags & wire::flag_p2p)
    return;
  auto elapsed = clock::now() - start_;
  for (std::size_t i = 0; i < scenario_.faults.size(); ++i) {
    const auto& f = scenario_.faults[i];
    if (is_link_fault(f.kind) || f.rank != rank_ || !f.seq || f.during != membership_change::none || h.seq < *f.seq
        || elapsed < std::chrono::milliseconds(f.after_ms))
      continue;
    fire(i, "at the first frame of op seq " + std::to_string(h.seq));
  }
}

void fault_injector::fire(std::size_t index, const std::string& trigger) {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (fired_[index])
      return;
    fired_[index] = true;
  }
  const auto& f = scenario_.faults[index];
  auto what = std::string("rank ") + std::to_string(rank_) + " "
              + (f.kind == fault_kind::crash ? "crashes (exit " + std::to_string(f.exit_code) + ")"
                                             : std::string("freezes (SIGSTOP)"))
              + " " + trigger + " (fault #" + std::to_string(index) + ")";
  carry_out_rank_fault(f, what, recorder_.get());
}

// ---- decorated connection ---------------------------------------------------------

fault_connection::fault_connection(connection_ptr inner, std::shared_ptr<fault_injector> injector, int peer)
  : inner_(std::move(inner)), injector_(std::move(injector)), peer_(peer) {
  int me = injector_->rank();
  link_ = std::to_string(me) + "->" + std::to_string(peer_);
  const auto& s = injector_->scenario();
  for (std::size_t i = 0; i < s.faults.size(); ++i) {
    const auto& f = s.faults[i];
    if (!is_link_fault(f.kind) || f.on != fault_layer::link || !matches_rank(f.from, me)
        || !matches_rank(f.to, peer_))
      continue; // another link's, a rank's, or one that acts on the ops' chunks (chunk_faults.hpp)
    bool timed = (f.kind == fault_kind::close || f.kind == fault_kind::stall) && !f.seq && !f.step
                 && !f.chunk;
    auto seed = mix(mix(mix(s.seed, i), static_cast<uint64_t>(me)), static_cast<uint64_t>(peer_));
    rules_.push_back(rule{&f, i, seed, 0, timed});
  }
}

void fault_connection::start() {
  std::weak_ptr<fault_connection> weak = shared_from_this();
  for (const auto& r : rules_)
    if (r.timed)
      fault_clock::instance().at(injector_->started() + std::chrono::milliseconds(r.spec->after_ms), [weak] {
        if (auto self = weak.lock())
          self->wake_holder();
      });
}

void fault_connection::wake_holder() {
  std::function<void()> r, w;
  {
    std::lock_guard<std::mutex> guard{wake_mutex_};
    r = read_cb_;
    w = write_cb_;
  }
  // The holder polls, and apply_timed_faults() acts on its thread.
  if (r)
    r();
  if (w)
    w();
}

void fault_connection::record(const rule& r, const wire::frame_header* h, const std::string& detail) {
  auto what = "fault #" + std::to_string(r.index) + " on link " + link_ + (detail.empty() ? "" : ": ")
              + detail;
  injector_->recorder().fault(to_string(r.spec->kind), peer_, h ? key_of(*h) : frame_key{}, what);
  MCCL_LOG(info, "fault injection: " << to_string(r.spec->kind) << " " << what);
}

io_result fault_connection::closed_result() const {
  io_result r;
  r.closed = true;
  r.error = close_why_;
  return r;
}

void fault_connection::apply_timed_faults() {
  auto now = clock::now();
  for (auto& r : rules_) {
    if (!r.timed || (r.spec->count && r.fired >= r.spec->count)
        || now < injector_->started() + std::chrono::milliseconds(r.spec->after_ms))
      continue;
    ++r.fired;
    if (r.spec->kind == fault_kind::close) {
      record(r, nullptr, "connection closed after " + std::to_string(r.spec->after_ms) + " ms");
      closed_by_fault_ = true;
      close_why_ = "closed by fault injection (fault #" + std::to_string(r.index) + ", link " + link_ + ")";
      inner_->close();
    } else {
      hold_until_ = r.spec->ms ? now + std::chrono::milliseconds(r.spec->ms) : clock::time_point::max();
      record(r, nullptr, "link stalled after " + std::to_string(r.spec->after_ms) + " ms for "
                           + (r.spec->ms ? std::to_string(r.spec->ms) + " ms" : std::string("good")));
    }
  }
}

void fault_connection::wake_when_flushable() {
  // The holder may think everything went out (the copies were reported
  // written) and wait for reads only: wake it when the socket takes bytes,
  // so its next call sends them.
  // Arming write replaces a write notification the holder asked for, so
  // this one wakes the holder for both (a spurious wake-up only polls).
  if (pending_.empty() || flush_armed_.exchange(true))
    return;
  std::weak_ptr<fault_connection> weak = shared_from_this();
  inner_->notify_when_ready(true, [weak] {
    if (auto self = weak.lock()) {
      self->flush_armed_ = false;
      self->wake_holder();
    }
  });
}

bool fault_connection::flush(io_result& failure) {
  while (pending_off_ < pending_.size()) {
    iovec v{pending_.data() + pending_off_, pending_.size() - pending_off_};
    auto r = inner_->write_some(&v, 1);
    if (!r.error.empty() || r.closed) {
      failure = r;
      return false;
    }
    if (r.bytes == 0)
      return false;
    pending_off_ += r.bytes;
  }
  pending_.clear();
  pending_off_ = 0;
  return true;
}

void fault_connection::release_held(bool now) {
  // A frame held back for reordering goes out once the next frame did, or
  // when the holder has nothing more to send (it asks to be woken).
  if (held_.empty() || (!now && clock::now() - held_since_ < std::chrono::milliseconds(2)))
    return;
  pending_.insert(pending_.end(), held_.begin(), held_.end());
  held_.clear();
}

void fault_connection::frame_done() {
  if (!decided_.empty())
    decided_.pop_front();
}

std::mt19937_64 fault_connection::frame_rng(const rule& r, const wire::frame_header& h,
                                            uint64_t salt) const {
  auto id = mix(mix(mix(mix(r.seed, h.seq), (uint64_t{h.step} << 32) | h.chunk),
                    (h.flags & wire::flag_p2p) ? 1 : 0),
                occurrence_);
  return std::mt19937_64(mix(id, salt));
}

int fault_connection::decide(const wire::frame_header& h) {
  if (h.kind != wire::frame_kind::data)
    return -1;
  occurrence_ = 0;
  if (h.flags & wire::flag_retransmit)
    occurrence_ = ++resent_[std::make_tuple(h.seq, h.step, h.chunk)];
  injector_->on_data_frame(h);
  auto elapsed = clock::now() - injector_->started();
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    auto& r = rules_[i];
    const auto& f = *r.spec;
    if (r.timed || (f.count && r.fired >= f.count) || (f.seq && *f.seq != h.seq)
        || (f.step && *f.step != h.step) || (f.chunk && *f.chunk != h.chunk)
        || elapsed < std::chrono::milliseconds(f.after_ms)
        || (f.kind == fault_kind::corrupt && h.payload_len == 0))
      continue;
    // Drawn only for frames that match everything else, so the draws follow
    // the link's traffic, which the same program repeats run after run.
    if (f.probability < 1.0) {
      auto rng = frame_rng(r, h, 0);
      if (std::uniform_real_distribution<double>(0.0, 1.0)(rng) >= f.probability)
        continue;
    }
    ++r.fired;
    return static_cast<int>(i);
  }
  return -1;
}

io_result fault_connection::apply(int index, const iovec* iov, int count, std::size_t frame_len,
                                   const wire::frame_header& h) {
  auto& r = rules_[static_cast<std::size_t>(index)];
  const auto& f = *r.spec;
  auto now = clock::now();
  io_result consumed;
  consumed.bytes = frame_len;
  std::vector<uint8_t> frame(frame_len);
  copy_out(iov, count, 0, frame.data(), frame_len);
  // A frame held back earlier goes right after this one (or, when this one
  // is held back too, before it).
  struct release_after {
    fault_connection& self;
    ~release_after() { self.release_held(true); }
  };
  switch (f.kind) {
    case fault_kind::drop: {
      release_after held{*this};
      record(r, &h, "frame dropped");
      frame_done();
      return consumed;
    }
    case fault_kind::duplicate: {
      release_after held{*this};
      record(r, &h, "frame sent twice");
      pending_.insert(pending_.end(), frame.begin(), frame.end());
      pending_.insert(pending_.end(), frame.begin(), frame.end());
      frame_done();
      return consumed;
    }
    case fault_kind::reorder:
      release_held(true);
      record(r, &h, "frame held back behind the next one");
      held_ = std::move(frame);
      held_since_ = now;
      frame_done();
      return consumed;
    case fault_kind::corrupt: {
      release_after held{*this};
      auto rng = frame_rng(r, h, 1);
      uint8_t* payload = frame.data() + wire::header_size;
      std::string where;
      auto n = f.bytes ? f.bytes : f.bits;
      for (uint32_t k = 0; k < n; ++k) {
        if (f.bytes) {
          auto pos = rng() % h.payload_len;
          payload[pos] ^= static_cast<uint8_t>(1 + rng() % 255); // always a different value
          if (k < 8)
            where += (where.empty() ? "" : ", ") + std::to_string(pos);
        } else {
          auto bit = rng() % (uint64_t{h.payload_len} * 8);
          payload[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
          if (k < 8)
            where += (where.empty() ? "" : ", ") + std::to_string(bit);
        }
      }
      record(r, &h, std::to_string(n) + (f.bytes ? " byte(s) overwritten at payload byte(s) "
                                                 : " bit flip(s) at payload bit(s) ")
                      + where + (n > 8 ? ", ..." : ""));
      pending_.insert(pending_.end(), frame.begin(), frame.end());
      frame_done();
      return consumed;
    }
    case fault_kind::delay:
    case fault_kind::stall:
      record(r, &h, f.kind == fault_kind::delay ? "frame delayed by " + std::to_string(f.ms) + " ms"
                                                : "link stalled for "
                                                    + (f.ms ? std::to_string(f.ms) + " ms" : std::string("good")));
      hold_until_ = f.ms ? now + std::chrono::milliseconds(f.ms) : clock::time_point::max();
      decided_.front().first = -1; // the frame itself passes once the hold ends
      return io_result{};
    case fault_kind::close:
      record(r, &h, "connection closed");
      closed_by_fault_ = true;
      close_why_ = "closed by fault injection (fault #" + std::to_string(r.index) + ", link " + link_ + ")";
      inner_->close();
      return closed_result();
    default:
      return io_result{};
  }
}

io_result fault_connection::write_some(const iovec* iov, int count) {
  apply_timed_faults();
  if (closed_by_fault_)
    return closed_result();
  if (clock::now() < hold_until_)
    return io_result{};
  io_result failure;
  release_held(false);
  if (!flush(failure)) {
    wake_when_flushable();
    return failure;
  }
  std::size_t total = 0;
  for (int i = 0; i < count; ++i)
    total += iov[i].iov_len;
  if (raw_)
    return inner_->write_some(iov, count);

  // Plan a run of frames without faults, or stop at the first frame that
  // has one (it is handled alone, when it is first in line).
  std::vector<std::size_t> pieces; ///< remaining length of each frame in the run
  std::size_t run = 0;
  std::size_t frame_no = 0; ///< index into decided_
  std::size_t remaining = cur_remaining_;
  if (remaining > 0) {
    pieces.push_back(remaining);
    run = std::min(remaining, total);
    frame_no = 1;
  }
  while (run < total && (remaining == 0 || run == remaining)) {
    uint8_t hdr[wire::header_size];
    auto res = copy_out(iov, count, run, hdr, wire::header_size)
                 ? wire::decode_header(hdr, wire::header_size, wire::max_payload_limit)
                 : wire::decode_result{wire::decode_status::need_more, {}, {}};
    if (res.status != wire::decode_status::ok) {
      // Not at a frame boundary we understand: stop injecting on this link.
      MCCL_LOG(warn, "fault injection on link " << link_ << " lost track of frames (" << res.reason
                     << "); passing the rest through unchanged");
      raw_ = true;
      break;
    }
    auto len = wire::header_size + res.header.payload_len;
    if (frame_no == decided_.size()) {
      int rule_index = decide(res.header);
      decided_.emplace_back(rule_index, occurrence_);
    }
    int fault = decided_[frame_no].first;
    occurrence_ = decided_[frame_no].second;
    if (fault >= 0 || !held_.empty()) {
      if (!pieces.empty())
        break; // send the clean run first
      if (total < len) {
        raw_ = true; // never happens with gather_frames: it queues whole frames
        break;
      }
      if (fault >= 0) {
        auto r = apply(fault, iov, count, len, res.header);
        // Copies go out now if the socket takes them: the holder may have
        // nothing more to write and so no reason to call again.
        if (!closed_by_fault_ && !pending_.empty() && clock::now() >= hold_until_ && !flush(failure))
          wake_when_flushable();
        return r;
      }
      // The frame after a held one: it goes first, then the held one.
      std::vector<uint8_t> frame(len);
      copy_out(iov, count, 0, frame.data(), len);
      pending_.insert(pending_.end(), frame.begin(), frame.end());
      release_held(true);
      frame_done();
      if (!flush(failure))
        wake_when_flushable();
      io_result consumed;
      consumed.bytes = len;
      return consumed;
    }
    pieces.push_back(len);
    run += std::min(len, total - run);
    remaining = 0;
    ++frame_no;
  }
  if (raw_ && pieces.empty())
    return inner_->write_some(iov, count);
  if (run == 0)
    return io_result{};

  // Write the run (whole iov entries up to `run` bytes).
  std::vector<iovec> sub;
  std::size_t left = run;
  for (int i = 0; i < count && left > 0; ++i) {
    auto take = std::min(left, iov[i].iov_len);
    sub.push_back(iovec{iov[i].iov_base, take});
    left -= take;
  }
  auto r = inner_->write_some(sub.data(), static_cast<int>(sub.size()));
  auto written = r.bytes;
  for (auto p : pieces) {
    if (written >= p) {
      written -= p;
      cur_remaining_ = 0;
      frame_done();
    } else {
      cur_remaining_ = p - written;
      break;
    }
  }
  return r;
}

io_result fault_connection::read_some(void* data, std::size_t len) {
  apply_timed_faults();
  if (closed_by_fault_)
    return closed_result();
  if (!pending_.empty() || !held_.empty()) {
    io_result ignored; // a failure shows on the next write
    release_held(false);
    if (!flush(ignored))
      wake_when_flushable();
  }
  return inner_->read_some(data, len);
}

void fault_connection::notify_when_ready(bool want_write, std::function<void()> ready) {
  {
    std::lock_guard<std::mutex> guard{wake_mutex_};
    (want_write ? write_cb_ : read_cb_) = ready;
  }
  if (closed_by_fault_) {
    ready();
    return;
  }
  auto now = clock::now();
  if (want_write && now < hold_until_) {
    // Writable again when the delay or stall ends (never, for an endless stall).
    if (hold_until_ != clock::time_point::max()) {
      std::weak_ptr<fault_connection> weak = shared_from_this();
      fault_clock::instance().at(hold_until_, [weak] {
        if (auto self = weak.lock())
          self->wake_holder();
      });
    }
    return;
  }
  // The holder is about to wait: what the decorator still owns must not
  // wait with it.
  release_held(true);
  if (want_write)
    flush_armed_ = false; // the holder's own arm replaces ours; it calls us again
  inner_->notify_when_ready(want_write, std::move(ready));
  if (!pending_.empty() && now >= hold_until_) {
    io_result ignored;
    if (!flush(ignored) && ignored.error.empty())
      wake_when_flushable();
  }
}

connection_ptr fault_connection::resumed(connection_ptr fresh) {
  // The new stream starts at a frame boundary with nothing of ours in it:
  // what was held back, half passed or waiting in the old one is gone (the
  // link sends every unacknowledged frame again).
  {
    std::lock_guard<std::mutex> guard{wake_mutex_};
    read_cb_ = nullptr;
    write_cb_ = nullptr;
  }
  inner_ = std::move(fresh);
  cur_remaining_ = 0;
  decided_.clear();
  raw_ = false;
  occurrence_ = 0;
  pending_.clear();
  pending_off_ = 0;
  held_.clear();
  hold_until_ = {};
  closed_by_fault_ = false;
  close_why_.clear();
  return shared_from_this();
}

void fault_connection::close() {
  inner_->close();
  // The callbacks hold the holder (a link actor): let it go.
  std::lock_guard<std::mutex> guard{wake_mutex_};
  read_cb_ = nullptr;
  write_cb_ = nullptr;
}

} // namespace mccl::transport
