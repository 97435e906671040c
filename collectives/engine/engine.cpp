#include "collectives/engine/engine.hpp"

#include "collectives/engine/engine_op.hpp"
#include "collectives/observability/metrics_registry.hpp"
#include "config/log.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>

namespace mccl {

/// Work posted by any thread for the leader.
struct engine::command {
  enum class kind : uint8_t { start, abort, revoke, resume, lost, member_lost, task } what = kind::start;
  op_ptr op;
  errc code = errc::none;
  std::string text;
  int peer = -1; ///< resume, lost, member_lost: the peer; abort, revoke: the origin
  transport::connection_ptr conn;
  std::function<void()> task;
};

namespace {
/// The identity of the calling thread, for led_by_this_thread().
const void* this_thread_id() noexcept {
  static thread_local char marker;
  return &marker;
}
} // namespace

engine::engine(engine_options opts, std::vector<transport::connection_ptr> conns,
               engine_listener& listener)
  : opts_(std::move(opts)), listener_(listener),
    runners_(opts_.runners ? opts_.runners : &direct_runners_),
    host_of_(std::make_shared<const std::vector<int>>(opts_.cfg.host_of)), now_(opts_.now()) {
  knock_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (knock_fd_ < 0)
    throw error(errc::internal, std::string("engine: eventfd: ") + std::strerror(errno));
  links_.resize(static_cast<std::size_t>(opts_.world));
  queued_flag_.assign(static_cast<std::size_t>(opts_.world), 0);
  turned_in_pass_.assign(static_cast<std::size_t>(opts_.world), 0);
  awaited_.assign(static_cast<std::size_t>(opts_.world), 0);
  // The largest data frame a peer sends: a pipelining chunk, or a whole
  // small op on the latency path.
  auto max_payload = static_cast<uint32_t>(std::min<std::size_t>(
    std::max(opts_.cfg.chunk_bytes, opts_.cfg.small_msg_threshold), wire::max_payload_limit));
  for (int peer = 0; peer < opts_.world && peer < static_cast<int>(conns.size()); ++peer) {
    if (!conns[peer])
      continue;
    transport::channel_options co;
    co.rank = opts_.rank;
    co.peer = peer;
    co.comm_id = opts_.comm_id;
    co.max_payload = max_payload;
    co.crc = opts_.cfg.transport_crc;
    co.crc_retries = opts_.cfg.crc_retries;
    co.resumable = opts_.resumable;
    co.reconnect = opts_.cfg.reconnect;
    co.heartbeat = opts_.cfg.heartbeat;
    co.pool = opts_.pool;
    co.recorder = opts_.faults;
    co.counters = metrics_registry::register_link(opts_.comm_id, opts_.rank, peer);
    transport::channel_listener& self = *this;
    links_[peer] = std::make_shared<peer_link>(co, std::move(conns[peer]), self, now_);
    if (opts_.links)
      opts_.links->adopt(peer, links_[peer]); // the peer's link actor keeps it
  }
  if (opts_.scenario) {
    chunk_faults_ = chunk_faults::make(*opts_.scenario, opts_.rank, opts_.faults, now_);
    route_fn_ = [this](transport::received_frame f) { route(std::move(f)); };
  }
}

engine::~engine() {
  // A link actor may keep its link a little longer: nothing in it may
  // still point at the engine's memory or the pool.
  for (auto& c : links_)
    if (c) {
      c->close();
      c->drop_early();
    }
  if (knock_fd_ >= 0)
    ::close(knock_fd_);
}

// ---- posting (any thread) -------------------------------------------------------

void engine::push(command c) {
  {
    std::lock_guard<std::mutex> guard{inbox_mutex_};
    inbox_.push_back(std::move(c));
    inbox_ready_.store(true);
  }
  knock();
}

void engine::knock(bool for_an_op) {
  // Only a leader blocked in wait() needs the system call (it set
  // waiting_ before checking inbox_ready_ and check_due_, so it sees
  // either the flag or the knock).
  if (waiting_.load()) {
    if (for_an_op)
      metrics_registry::count_thread_wakeup();
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(knock_fd_, &one, sizeof one);
  }
}

void engine::post(op_ptr op) {
  unfinished_.fetch_add(1);
  (op->background == driver_kind::actor ? want_actor_ : want_op_thread_).fetch_add(1);
  command c;
  c.what = command::kind::start;
  c.op = std::move(op);
  push(std::move(c));
}

void engine::post_abort(errc code, std::string why, int origin) {
  command c;
  c.what = command::kind::abort;
  c.code = code;
  c.text = std::move(why);
  c.peer = origin;
  push(std::move(c));
}

void engine::post_revoke(int origin, std::string reason) {
  {
    // Refused from now on, before the leader gets to it: an op this thread
    // issues right after revoke() returns never starts.
    std::lock_guard<std::mutex> guard{closed_mutex_};
    if (!revoked_.load()) {
      revoke_origin_ = origin;
      revoke_reason_ = reason;
      revoked_.store(true);
    }
  }
  command c;
  c.what = command::kind::revoke;
  c.text = std::move(reason);
  c.peer = origin;
  push(std::move(c));
}

void engine::post_resume(int peer, transport::connection_ptr conn, std::string why) {
  command c;
  c.what = command::kind::resume;
  c.peer = peer;
  c.conn = std::move(conn);
  c.text = std::move(why);
  push(std::move(c));
}

void engine::post_member_lost(int peer, errc code, std::string why) {
  command c;
  c.what = command::kind::member_lost;
  c.peer = peer;
  c.code = code;
  c.text = std::move(why);
  push(std::move(c));
}

void engine::post_lost(int peer, errc code, std::string text) {
  if (!closed())
    mark_revoked(opts_.rank, text, true);
  command c;
  c.what = command::kind::lost;
  c.peer = peer;
  c.code = code;
  c.text = std::move(text);
  push(std::move(c));
}

void engine::post_check() {
  check_due_.store(true);
  knock(false); // the watchdog's clock, not an op's path
}

void engine::post_task(std::function<void()> task) {
  command c;
  c.what = command::kind::task;
  c.task = std::move(task);
  push(std::move(c));
}

std::string engine::why_closed() const {
  std::lock_guard<std::mutex> guard{closed_mutex_};
  return closed_why_;
}

errc engine::closed_code() const {
  std::lock_guard<std::mutex> guard{closed_mutex_};
  return closed_code_;
}

bool engine::led_by_this_thread() const noexcept {
  return leader_thread_.load(std::memory_order_acquire) == this_thread_id();
}

// ---- leadership --------------------------------------------------------------------

engine::leadership engine::try_lead(driver_kind who) {
  if (!lead_mutex_.try_lock())
    return {};
  leader_thread_.store(this_thread_id(), std::memory_order_release);
  leader_kind_ = who;
  return leadership(this, who);
}

void engine::await_release(clock::time_point until) {
  std::unique_lock<std::mutex> lock{release_mutex_};
  release_waiters_.fetch_add(1);
  // Checked under the mutex the releasing leader notifies under: a release
  // between the caller's failed try_lead and this wait is not missed.
  if (leader_thread_.load(std::memory_order_acquire) != nullptr)
    released_.wait_until(lock, until);
  release_waiters_.fetch_sub(1);
}

engine::leadership::leadership(leadership&& o) noexcept
  : e_(std::exchange(o.e_, nullptr)), who_(o.who_) {
}

engine::leadership& engine::leadership::operator=(leadership&& o) noexcept {
  if (this != &o) {
    release();
    e_ = std::exchange(o.e_, nullptr);
    who_ = o.who_;
  }
  return *this;
}

void engine::leadership::release(bool hand_off) {
  if (auto* e = std::exchange(e_, nullptr))
    e->finish_release(hand_off);
}

void engine::finish_release(bool hand_off) {
  // Swapped with a vector kept for the purpose: no allocation per op.
  std::vector<std::pair<op_ptr, op_report>> done;
  done.swap(completions_);
  leader_thread_.store(nullptr, std::memory_order_release);
  lead_mutex_.unlock();
  // Outside the engine: a Work's callbacks may issue the next op.
  for (auto& [op, report] : done) {
    auto who = op->background;
    auto completion = std::move(op->done);
    completion->complete(std::move(report));
    (who == driver_kind::actor ? want_actor_ : want_op_thread_).fetch_sub(1);
    unfinished_.fetch_sub(1);
  }
  done.clear();
  if (release_waiters_.load() > 0) {
    metrics_registry::count_thread_wakeup();
    std::lock_guard<std::mutex> guard{release_mutex_};
    released_.notify_all();
  }
  // Hand the capacity back unless another leader started collecting.
  if (done.capacity() > 0 && lead_mutex_.try_lock()) {
    if (completions_.empty())
      completions_.swap(done);
    lead_mutex_.unlock();
  }
  if (hand_off)
    this->hand_off();
}

void engine::hand_off() {
  if (idle() || callers_driving())
    return; // nothing left, or a caller takes the engine as soon as it is free
  // Ops are left: whoever posted them may be waiting for a background
  // driver (it only leads when it finds the engine free).
  if (want_op_thread_.load() > 0)
    listener_.needs_driver(driver_kind::op_thread);
  if (want_actor_.load() > 0)
    listener_.needs_driver(driver_kind::actor);
}

// ---- the leader's pass -------------------------------------------------------------

bool engine::begin_pass(clock::time_point now) {
  now_ = now;
  // What was posted first: a new op's frames go out in the same pass that
  // reads its peers' (one system call less per op than reading first).
  if (!inbox_ready_.load())
    return false;
  drain_inbox();
  return true;
}

bool engine::progress(leadership&) {
  auto now = opts_.now();
  ++passes_;
  bool moved = begin_pass(now);
  // The frames the ops started above queued go out first, in their links'
  // turns, before any other link is read: a peer waits for them.
  moved |= write_queued();
  const auto& visit = channels_to_visit(now);
  for (auto* c : visit) {
    // A link whose turn came above (its frames written first) was read in
    // that turn: a second read right away mostly finds nothing, a system
    // call for no bytes (a 2-rank 4 B allreduce over TCP made 2.05 reads
    // an op, 1.16 without it), and the next pass reads it anyway.
    if (c->current() != transport::channel::state::open
        || turned_in_pass_[static_cast<std::size_t>(c->peer())] == passes_)
      continue;
    moved |= turn_of(c->peer());
    // What the turn's reads made ops send to other links goes out now,
    // in those links' turns.
    moved |= write_queued();
  }
  // Frames queued since each channel was written (by reading later
  // channels) go out now, not after a wait; a channel that could not
  // write everything stays listed for progress_peers().
  moved |= write_queued();
  for (auto& c : links_)
    if (c && c->wants_write() && c->current() == transport::channel::state::open) {
      moved |= turn_of(c->peer());
      if (c->wants_write())
        note_queued(c->peer());
    }
  settle();
  return end_of_pass(now) || moved;
}

bool engine::turn_of(int peer) {
  // A link with nothing to do now gets no turn: an idle shared-memory ring
  // says so without a read (with 16 ranks a pass visits 15 of them), a
  // socket never does.
  if (!links_[static_cast<std::size_t>(peer)]->has_work())
    return false;
  turned_in_pass_[static_cast<std::size_t>(peer)] = passes_;
  return opts_.links != nullptr ? opts_.links->move(peer) : move_link(peer);
}

bool engine::move_link(int peer) {
  auto* c = links_[static_cast<std::size_t>(peer)].get();
  if (c == nullptr || c->current() != transport::channel::state::open)
    return false;
  bool moved = c->progress(now_) > 0;
  settle();
  return moved;
}

const std::vector<transport::channel*>& engine::channels_to_visit(clock::time_point now) {
  // With a few peers every channel is read (a read that finds nothing is
  // as cheap as asking whether there is something). With more, a pass reads
  // the links its ops wait on next (algorithm::next_senders) and asks
  // poll(2) once which of the other sockets have bytes only every
  // sweep_every passes, before a health check, or on every pass while some
  // op cannot say whom it waits on. At 16 ranks a pass otherwise made 15
  // reads, most finding nothing; and one poll over the 15 sockets per pass
  // still cost about 1 us per round of a small op against reading the
  // awaited link alone (bench/RESULTS.md, "16 ranks over TCP: 4 B allreduce
  // from 46.2 to 38.8 µs").
  constexpr std::size_t poll_from = 4;
  constexpr int sweep_every = 16;
  visit_.clear();
  poll_fds_.clear();
  poll_of_.clear();
  for (auto& c : links_) {
    if (!c || c->current() != transport::channel::state::open)
      continue;
    c->keep_alive(now);
    visit_.push_back(c.get());
  }
  if (visit_.size() < poll_from)
    return visit_;
  // A pass that ends in a health check reads every link that has bytes:
  // a peer's heartbeat waiting in its socket is not its silence.
  bool sweep = check_due_.load() || ++passes_since_sweep_ >= sweep_every || !mark_next_senders();
  if (sweep)
    passes_since_sweep_ = 0;
  std::size_t kept = 0;
  for (auto* c : visit_) {
    const auto& conn = *c->conn();
    int fd = conn.poll_fd_exact() ? conn.poll_fd() : -1;
    if (fd < 0 || c->wants_write() || c->has_staged() || awaited_[static_cast<std::size_t>(c->peer())]) {
      visit_[kept++] = c; // no exact descriptor to ask, work of its own, or awaited
      continue;
    }
    if (!sweep)
      continue;
    poll_fds_.push_back(pollfd{fd, POLLIN, 0});
    poll_of_.push_back(c);
  }
  visit_.resize(kept);
  if (poll_fds_.empty())
    return visit_;
  int n = ::poll(poll_fds_.data(), static_cast<nfds_t>(poll_fds_.size()), 0);
  for (std::size_t i = 0; i < poll_fds_.size(); ++i)
    if (n < 0 || poll_fds_[i].revents != 0) // a failed poll: read them all
      visit_.push_back(poll_of_[i]);
  return visit_;
}

bool engine::mark_next_senders() {
  for (int peer : next_senders_)
    awaited_[static_cast<std::size_t>(peer)] = 0;
  next_senders_.clear();
  if (ops_.empty())
    return false; // nothing in flight: the next frame may come from anyone
  bool known = true;
  for (const auto& [id, op] : ops_)
    if (!op->next_senders(next_senders_)) {
      known = false;
      break;
    }
  for (int peer : next_senders_)
    if (peer >= 0 && peer < opts_.world)
      awaited_[static_cast<std::size_t>(peer)] = 1;
  return known;
}

bool engine::end_of_pass(clock::time_point now) {
  bool moved = false;
  if (pending_loss_peer_ >= 0 && now >= pending_loss_at_ + loss_grace) {
    // No ABORT explained the loss in time: this rank reports it itself.
    auto peer = pending_loss_peer_;
    auto why = pending_loss_why_;
    pending_loss_peer_ = -1;
    found_lost(peer, errc::peer_lost, why);
    settle();
    moved = true;
  }
  if (lost_.peer >= 0 && now >= lost_.due) {
    // The supervisor did not answer (CAF's workers are busy or gone): the
    // ops waiting on the peer fail all the same, from whoever drives.
    MCCL_LOG(warn, "rank " << opts_.rank << ": the supervisor of communicator " << opts_.comm_id
                           << " did not revoke it within " << supervisor_window.count() << " ms of losing rank "
                           << lost_.peer << "; revoking without it");
    member_lost(lost_.peer, lost_.code, lost_.text);
    settle();
    moved = true;
  }
  if (chunk_faults_) {
    chunk_faults_->release_due(now, route_fn_);
    settle();
  }
  if (check_due_.exchange(false)) {
    check_health(); // after reading every channel: a peer's bytes waiting here are not its silence
    settle();
  }
  for (auto& task : std::exchange(tasks_, {}))
    task();
  return moved;
}

bool engine::progress_peers(leadership& l, const std::vector<int>& readable) {
  if (std::exchange(queued_to_all_, false))
    return progress(l);
  auto now = opts_.now();
  bool moved = begin_pass(now);
  auto visit = [&](int peer) {
    auto& c = links_[static_cast<std::size_t>(peer)];
    if (c && c->current() == transport::channel::state::open)
      moved |= turn_of(peer);
  };
  for (int peer : readable)
    visit(peer);
  // What reading queued (and what ops started above queued) goes out now;
  // a channel that could not write everything stays listed.
  auto queued = std::exchange(queued_to_, {});
  for (int peer : queued) {
    queued_flag_[static_cast<std::size_t>(peer)] = 0;
    visit(peer);
    const auto& c = links_[static_cast<std::size_t>(peer)];
    if (c && c->wants_write() && c->current() == transport::channel::state::open)
      note_queued(peer);
  }
  settle(); // what ended in the pass, when no link had a turn to settle it
  return end_of_pass(now) || moved;
}

bool engine::write_queued() {
  if (queued_to_.empty())
    return false;
  // In the order the ops queued them: a tree forwards to the child with
  // the largest subtree first, and that child should get the bytes first
  // (written in rank order, a binomial tree's root wrote its critical
  // child last of four at 16 ranks).
  writing_.swap(queued_to_);
  bool moved = false;
  for (int peer : writing_) {
    queued_flag_[static_cast<std::size_t>(peer)] = 0;
    auto& c = links_[static_cast<std::size_t>(peer)];
    if (c && c->wants_write() && c->current() == transport::channel::state::open)
      moved |= turn_of(peer);
  }
  writing_.clear();
  return moved;
}

void engine::note_queued(int peer) {
  auto& flag = queued_flag_[static_cast<std::size_t>(peer)];
  if (!flag) {
    flag = 1;
    queued_to_.push_back(peer);
  }
}

void engine::drain_inbox() {
  // Swapped with a vector kept for the next drain, so posting reuses its
  // capacity instead of allocating every time.
  auto& work = draining_;
  {
    std::lock_guard<std::mutex> guard{inbox_mutex_};
    work.swap(inbox_);
    inbox_ready_.store(false);
  }
  for (auto& c : work) {
    switch (c.what) {
      case command::kind::start:
        admit(std::move(c.op));
        break;
      case command::kind::abort:
        abort(c.code, c.text, c.peer);
        break;
      case command::kind::revoke:
        begin_revoke(c.peer, c.text);
        break;
      case command::kind::resume: {
        auto& ch = links_[static_cast<std::size_t>(c.peer)];
        if (!ch || ch->current() != transport::channel::state::resuming) {
          if (c.conn)
            c.conn->close();
        } else if (c.conn) {
          ch->resume(std::move(c.conn), now_);
        } else {
          ch->resume_failed(c.text);
        }
        break;
      }
      case command::kind::lost:
        found_lost(c.peer, c.code, c.text);
        break;
      case command::kind::member_lost:
        member_lost(c.peer, c.code, c.text);
        break;
      case command::kind::task:
        tasks_.push_back(std::move(c.task));
        break;
    }
    settle();
  }
  work.clear();
}

engine::clock::time_point engine::grace_due(leadership&) const {
  auto due = pending_loss_peer_ >= 0 ? pending_loss_at_ + loss_grace : clock::time_point::max();
  return lost_.peer >= 0 ? std::min(due, lost_.due) : due;
}

engine::clock::time_point engine::next_due(leadership& l) const {
  auto due = grace_due(l);
  if (chunk_faults_)
    due = std::min(due, chunk_faults_->next_due()); // a delayed chunk is passed on by a pass
  // A channel with bytes queued waits for writability, not for a time (its
  // heartbeat is queued behind them anyway).
  for (const auto& c : links_)
    if (c && c->current() == transport::channel::state::open && !c->wants_write())
      due = std::min(due, c->last_tx() + opts_.cfg.heartbeat / 2);
  return due;
}

void engine::wait(leadership&, clock::time_point until) {
  waiting_.store(true);
  if (inbox_ready_.load() || check_due_.load()) {
    waiting_.store(false);
    return;
  }
  std::vector<pollfd> fds;
  fds.reserve(links_.size() + 1);
  fds.push_back(pollfd{knock_fd_, POLLIN, 0});
  bool every_fd = true;
  for (const auto& c : links_) {
    if (!c || c->current() != transport::channel::state::open)
      continue;
    int fd = c->conn()->poll_fd();
    if (fd < 0) {
      every_fd = false;
      break;
    }
    fds.push_back(pollfd{fd, static_cast<short>(POLLIN | (c->wants_write() ? POLLOUT : 0)), 0});
  }
  if (!every_fd) {
    // A connection without a descriptor: every connection rings the knock
    // when it is ready (connection::notify_when_ready), and only the knock
    // is polled.
    fds.resize(1);
    int fd = knock_fd_;
    for (const auto& c : links_) {
      if (!c || c->current() != transport::channel::state::open)
        continue;
      auto ring = [fd] {
        uint64_t one = 1;
        [[maybe_unused]] auto n = ::write(fd, &one, sizeof one);
      };
      c->conn()->notify_when_ready(false, ring);
      if (c->wants_write())
        c->conn()->notify_when_ready(true, ring);
    }
  }
  auto asleep = opts_.now();
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - asleep).count() + 1;
  ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(left, 0, 1000)));
  waiting_.store(false);
  if (opts_.trace && !ops_.empty())
    opts_.trace->wait(asleep, opts_.now());
  uint64_t drained;
  [[maybe_unused]] auto n = ::read(knock_fd_, &drained, sizeof drained);
}

void engine::arm(leadership&, const std::function<void()>& wake) {
  for (const auto& c : links_) {
    if (!c || c->current() != transport::channel::state::open)
      continue;
    c->conn()->notify_when_ready(false, wake);
    if (c->wants_write())
      c->conn()->notify_when_ready(true, wake);
  }
}

void engine::shutdown(leadership& l, uint64_t issued, clock::time_point deadline) {
  progress(l); // what is posted and already here
  if (!ops_.empty()) {
    const auto& first = *ops_.begin()->second->request;
    abort(errc::finalized,
          "rank " + std::to_string(opts_.rank) + " finalized with " + std::to_string(ops_.size())
            + " op(s) in flight (first: " + describe(first) + " seq " + std::to_string(first.seq) + ")",
          opts_.rank);
    settle();
  }
  shut_down_ = true;
  {
    std::lock_guard<std::mutex> guard{closed_mutex_};
    if (!closed_.exchange(true)) {
      closed_why_ = "rank " + std::to_string(opts_.rank) + " finalized the communicator";
      closed_code_ = errc::finalized;
    }
  }
  drain_inbox(); // ops posted meanwhile fail with errc::finalized
  // Best effort and bounded: a peer that is gone or slow is not waited for.
  // First what is queued, and with CRC until the peers acknowledged every
  // frame (one may still find a mismatch in what we sent last and ask for
  // it again); then BYE, which is the last thing a peer reads from us.
  auto flush = [&](bool acks) {
    for (;;) {
      for (auto& c : links_)
        if (c)
          c->ack_now(); // the peer waits for them too
      bool moved = progress(l);
      bool pending = false;
      for (auto& c : links_)
        if (c && c->current() == transport::channel::state::open)
          pending |= c->wants_write() || (acks && c->unacked_frames() > 0);
      if (!pending || opts_.now() >= deadline)
        return;
      if (!moved)
        wait(l, std::min(deadline, opts_.now() + std::chrono::milliseconds(10)));
    }
  };
  flush(opts_.cfg.transport_crc);
  for (auto& c : links_)
    if (c)
      c->send_bye(issued);
  flush(false);
  for (auto& c : links_)
    if (c)
      c->close();
}

bool engine::has_unclaimed_message(int peer, uint32_t tag) const {
  const auto* m = matcher_of(peer);
  return m && m->has_unclaimed(tag);
}

std::vector<engine::op_status> engine::running_ops() const {
  std::vector<op_status> out;
  auto now = opts_.now();
  for (const auto& [id, op] : ops_) {
    op_status s;
    s.op = describe(*op->request);
    s.collective = !op->is_p2p();
    s.seq = op->request->seq;
    s.algorithm = op->algorithm_name();
    s.where = op->where();
    s.running_ms = std::chrono::duration<double, std::milli>(now - op->started).count();
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const op_status& a, const op_status& b) {
    return std::make_tuple(!a.collective, a.seq) < std::make_tuple(!b.collective, b.seq);
  });
  return out;
}

std::string engine::peer_name(int peer) const {
  const auto& c = links_[static_cast<std::size_t>(peer)];
  return c ? c->name() : "rank " + std::to_string(peer);
}

} // namespace mccl
