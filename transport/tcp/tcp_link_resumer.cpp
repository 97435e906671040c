#include "transport/tcp/tcp_link_resumer.hpp"

#include <mccl/error.hpp>
#include "config/log.hpp"
#include "transport/tcp/handshake_io.hpp"
#include "transport/tcp/hello_gate.hpp"
#include "transport/tcp/tcp_connection.hpp"
#include "transport/wire/handshake.hpp"

#include <algorithm>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace mccl::transport {

namespace {
/// How long connecting and sending a resume hello may take per attempt,
/// and reading a handshake frame once it has begun to arrive (a stray's
/// hello at the gate included). The answer to our own hello has no limit
/// but the link's reconnect window.
constexpr auto resume_attempt_limit = std::chrono::milliseconds(500);
/// Pause after a refused attempt (the peer has not noticed the loss yet).
constexpr auto resume_retry_pause = std::chrono::milliseconds(50);
} // namespace

tcp_link_resumer::tcp_link_resumer(std::shared_ptr<readiness_monitor> monitor, mesh_options opts,
                                   int listen_fd, std::vector<std::string> endpoints)
  : monitor_(std::move(monitor)), opts_(std::move(opts)), listen_fd_(listen_fd),
    endpoints_(std::move(endpoints)) {
  opts_.rendezvous = nullptr; // not needed (and maybe gone) after the mesh is built
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    ::close(listen_fd_);
    throw error(errc::connect_failed, rank_str(opts_.rank) + " cannot make the reconnect thread's "
                                        "wake-up descriptor (MCCL_RECONNECT_MS): eventfd failed");
  }
  gate_ = std::make_unique<hello_gate>(io_, rank_str(opts_.rank), opts_.comm_id, resume_attempt_limit);
  thread_ = std::thread([this] { run(); });
}

tcp_link_resumer::~tcp_link_resumer() {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    stop_ = true;
  }
  poke();
  thread_.join();
  dials_.clear(); // their sockets belong to io_
  gate_.reset();
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void tcp_link_resumer::resume(int peer, clock::time_point deadline, done_fn done) {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    requests_[peer] = request{deadline, clock::now(), std::move(done), next_request_id_++};
  }
  poke();
}

void tcp_link_resumer::poke() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

void tcp_link_resumer::cancel(int peer) {
  std::lock_guard<std::mutex> guard{mutex_};
  requests_.erase(peer);
}

void tcp_link_resumer::finish(int peer, connection_ptr conn, const std::string& why) {
  done_fn done;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    auto i = requests_.find(peer);
    if (i == requests_.end())
      return; // cancelled meanwhile: the connection (if any) is dropped
    done = std::move(i->second.done);
    requests_.erase(i);
  }
  done(std::move(conn), why);
}

void tcp_link_resumer::run() {
  for (;;) {
    std::vector<int> due;
    std::vector<int> expired;
    std::map<int, std::pair<uint64_t, clock::time_point>> live; ///< peer -> request id, deadline
    {
      std::unique_lock<std::mutex> lock{mutex_};
      if (stop_)
        return;
      auto now = clock::now();
      for (auto& [peer, req] : requests_) {
        live[peer] = {req.id, req.deadline};
        if (now >= req.deadline)
          expired.push_back(peer);
        else if (peer < opts_.rank && now >= req.next_try)
          due.push_back(peer);
      }
    }
    // A dial outlives only its own request: one finished, cancelled or
    // replaced meanwhile drops it (closing the socket).
    for (auto i = dials_.begin(); i != dials_.end();) {
      auto l = live.find(i->first);
      bool current = l != live.end() && l->second.first == i->second.request_id;
      i = current ? std::next(i) : dials_.erase(i);
    }
    for (int peer : expired) {
      dials_.erase(peer);
      finish(peer, nullptr, "the reconnect window ended");
    }
    for (int peer : due) {
      if (dials_.count(peer) || std::find(expired.begin(), expired.end(), peer) != expired.end())
        continue; // its hello is out: the answer decides
      auto& [id, deadline] = live[peer];
      auto why = start_dial(peer, id, std::min(deadline, clock::now() + resume_attempt_limit));
      if (!why.empty()) {
        MCCL_LOG(debug, rank_str(opts_.rank) << " could not resume its link to " << rank_str(peer)
                                             << " yet: " << why);
        retry_later(peer);
      }
    }
    // Wait for resume hellos (and strays, read side by side, each for at
    // most resume_attempt_limit) on the listening socket and for the
    // answers to our own hellos; briefly while a peer is to be dialled
    // again, so retries stay on time. resume() and the destructor poke
    // wake_fd_, so a new request or a stop is served at once.
    std::vector<int> also{wake_fd_};
    for (auto& [peer, d] : dials_)
      also.push_back(d.socket->native_handle());
    bool dialling = false;
    for (auto& [peer, req] : live)
      dialling |= peer < opts_.rank && !dials_.count(peer)
                  && std::find(expired.begin(), expired.end(), peer) == expired.end();
    auto arrived = gate_->wait({listen_fd_}, clock::now() + (dialling ? std::chrono::milliseconds(20)
                                                                        : std::chrono::milliseconds(200)),
                               also);
    uint64_t count;
    [[maybe_unused]] auto n = ::read(wake_fd_, &count, sizeof count);
    for (auto& in : arrived)
      answer(in);
    std::vector<int> answered;
    for (auto& [peer, d] : dials_) {
      pollfd p{d.socket->native_handle(), POLLIN, 0};
      if (::poll(&p, 1, 0) > 0)
        answered.push_back(peer);
    }
    for (int peer : answered) {
      connection_ptr conn;
      auto why = take_answer(peer, &conn);
      if (conn) {
        finish(peer, std::move(conn), "");
        continue;
      }
      MCCL_LOG(debug, rank_str(opts_.rank) << " could not resume its link to " << rank_str(peer)
                                           << " yet: " << why);
      retry_later(peer);
    }
  }
}

void tcp_link_resumer::retry_later(int peer) {
  std::lock_guard<std::mutex> guard{mutex_};
  auto i = requests_.find(peer);
  if (i != requests_.end())
    i->second.next_try = clock::now() + resume_retry_pause;
}

void tcp_link_resumer::answer(hello_gate::arrival& in) {
  auto& s = *in.socket;
  const auto& h = in.header;
  wire::hello hi;
  std::vector<bool> resumable(static_cast<std::size_t>(opts_.world));
  {
    std::lock_guard<std::mutex> guard{mutex_};
    for (auto& entry : requests_)
      resumable[static_cast<std::size_t>(entry.first)] = true;
  }
  auto err = vet_resume_hello({opts_.rank, opts_.world, opts_.comm_id, opts_.token}, h,
                              in.payload.data(), in.payload.size(), resumable, hi);
  if (!err.empty()) {
    MCCL_LOG(warn, rank_str(opts_.rank) << " refused a connection from " << in.remote << ": " << err);
    send_control(s, wire::frame_kind::refuse, opts_.comm_id, wire::encode_text(err),
                 clock::now() + std::chrono::milliseconds(200));
    return;
  }
  tune_socket(s, opts_.socket_buffer_bytes);
  wire::hello ack{static_cast<uint32_t>(opts_.rank), hi.from_rank,
                  static_cast<uint32_t>(opts_.world), opts_.token};
  err = send_control(s, wire::frame_kind::hello_ack, opts_.comm_id, wire::encode_hello(ack),
                     clock::now() + resume_attempt_limit, stripe_tag{}, resume_marker);
  if (!err.empty()) {
    MCCL_LOG(warn, rank_str(opts_.rank) << ": resuming the link to rank " << hi.from_rank
                                        << " failed: " << err);
    return; // it dials again
  }
  int peer = static_cast<int>(hi.from_rank);
  MCCL_LOG(info, rank_str(opts_.rank) << " resumed its link to " << rank_str(peer) << " from "
                                      << in.remote);
  finish(peer, std::make_shared<tcp_connection>(monitor_, std::move(s),
                                                rank_str(peer) + " at " + in.remote),
         "");
}

std::string tcp_link_resumer::start_dial(int peer, uint64_t request_id, clock::time_point deadline) {
  const auto& ep_text = endpoints_[static_cast<std::size_t>(peer)];
  auto s = std::make_unique<tcp::socket>(io_);
  auto err = connect_with_retry(*s, parse_endpoint(ep_text, peer), deadline);
  if (!err.empty())
    return "connecting to " + ep_text + ": " + err;
  tune_socket(*s, opts_.socket_buffer_bytes);
  wire::hello hi{static_cast<uint32_t>(opts_.rank), static_cast<uint32_t>(peer),
                 static_cast<uint32_t>(opts_.world), opts_.token};
  err = send_control(*s, wire::frame_kind::hello, opts_.comm_id, wire::encode_hello(hi), deadline,
                     stripe_tag{}, resume_marker);
  if (!err.empty())
    return "handshake with " + ep_text + ": " + err;
  dials_[peer] = dial{request_id, std::move(s)};
  return {};
}

std::string tcp_link_resumer::take_answer(int peer, connection_ptr* conn) {
  const auto& ep_text = endpoints_[static_cast<std::size_t>(peer)];
  auto d = std::move(dials_[peer]);
  dials_.erase(peer);
  auto& s = *d.socket;
  wire::frame_header h;
  std::vector<uint8_t> payload;
  // The answer has begun to arrive: the rest of a frame this small follows
  // at once.
  auto err = read_control(s, clock::now() + resume_attempt_limit, h, payload);
  if (!err.empty())
    return "handshake with " + ep_text + ": " + err;
  std::string why;
  if (h.kind == wire::frame_kind::refuse) {
    auto text = wire::decode_text(payload.data(), payload.size(), &why);
    return "refused: " + (text ? *text : why);
  }
  auto ack = wire::decode_hello(payload.data(), payload.size(), &why);
  if (h.kind != wire::frame_kind::hello_ack || h.aux != resume_marker || h.comm_id != opts_.comm_id
      || !ack || ack->from_rank != static_cast<uint32_t>(peer) || !tokens_equal(ack->token, opts_.token))
    return "unexpected resume reply (" + std::string(wire::to_string(h.kind))
           + (why.empty() ? "" : ": " + why) + ")";
  MCCL_LOG(info, rank_str(opts_.rank) << " resumed its link to " << rank_str(peer) << " at "
                                      << ep_text);
  *conn = std::make_shared<tcp_connection>(monitor_, std::move(s), rank_str(peer) + " at " + ep_text);
  return {};
}

} // namespace mccl::transport
