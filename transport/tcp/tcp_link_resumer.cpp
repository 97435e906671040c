#include "transport/tcp/tcp_link_resumer.hpp"

#include <mccl/error.hpp>
#include "config/log.hpp"
#include "transport/tcp/handshake_io.hpp"
#include "transport/tcp/hello_gate.hpp"
#include "transport/tcp/tcp_connection.hpp"
#include "transport/wire/handshake.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace mccl::transport {

namespace asio = boost::asio;

namespace {
/// How long one dial attempt or one handshake read may take.
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
  gate_.reset();
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void tcp_link_resumer::resume(int peer, clock::time_point deadline, done_fn done) {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    requests_[peer] = request{deadline, clock::now(), std::move(done)};
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
    bool dialling = false;
    {
      std::unique_lock<std::mutex> lock{mutex_};
      if (stop_)
        return;
      auto now = clock::now();
      for (auto& [peer, req] : requests_) {
        if (now >= req.deadline)
          expired.push_back(peer);
        else if (peer < opts_.rank) {
          dialling = true;
          if (now >= req.next_try)
            due.push_back(peer);
        }
      }
    }
    for (int peer : expired)
      finish(peer, nullptr, "the reconnect window ended");
    for (int peer : due) {
      clock::time_point deadline;
      {
        std::lock_guard<std::mutex> guard{mutex_};
        auto i = requests_.find(peer);
        if (i == requests_.end())
          continue;
        deadline = i->second.deadline;
      }
      connection_ptr conn;
      auto why = dial_once(peer, std::min(deadline, clock::now() + resume_attempt_limit), &conn);
      if (conn) {
        finish(peer, std::move(conn), "");
        continue;
      }
      MCCL_LOG(debug, rank_str(opts_.rank) << " could not resume its link to " << rank_str(peer)
                                           << " yet: " << why);
      std::lock_guard<std::mutex> guard{mutex_};
      auto i = requests_.find(peer);
      if (i != requests_.end())
        i->second.next_try = clock::now() + resume_retry_pause;
    }
    // Wait for resume hellos (and strays, read side by side, each for at
    // most resume_attempt_limit) on the listening socket; briefly while a
    // dial is pending, so retries stay on time. resume() and the destructor
    // poke wake_fd_, so a new request or a stop is served at once.
    auto arrived = gate_->wait({listen_fd_}, clock::now() + (dialling ? std::chrono::milliseconds(20)
                                                                        : std::chrono::milliseconds(200)),
                               {wake_fd_});
    uint64_t count;
    [[maybe_unused]] auto n = ::read(wake_fd_, &count, sizeof count);
    for (auto& in : arrived)
      answer(in);
  }
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

std::string tcp_link_resumer::dial_once(int peer, clock::time_point deadline, connection_ptr* conn) {
  const auto& ep_text = endpoints_[static_cast<std::size_t>(peer)];
  asio::io_context local;
  tcp::socket s(local);
  auto err = connect_with_retry(s, parse_endpoint(ep_text, peer), deadline);
  if (!err.empty())
    return "connecting to " + ep_text + ": " + err;
  tune_socket(s, opts_.socket_buffer_bytes);
  wire::hello hi{static_cast<uint32_t>(opts_.rank), static_cast<uint32_t>(peer),
                 static_cast<uint32_t>(opts_.world), opts_.token};
  err = send_control(s, wire::frame_kind::hello, opts_.comm_id, wire::encode_hello(hi), deadline,
                     stripe_tag{}, resume_marker);
  wire::frame_header h;
  std::vector<uint8_t> payload;
  if (err.empty())
    err = read_control(s, deadline, h, payload);
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
