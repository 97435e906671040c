#pragma once
/// The link actor: one per peer of a communicator. It owns the transport
/// connection and is the only code that touches it.
///
/// - frames out: queues tx_requests from collective actors, writes them
///   gathered (header + payload straight from the caller's buffer) and tells
///   the sender once a frame has fully left (sent_atom);
/// - frames in: parses headers (bounded before any allocation), lands
///   payloads in pooled staging memory and routes each data chunk to the
///   collective actor registered for its sequence number (buffering chunks
///   of ops this rank has not started yet);
/// - point-to-point matching: a peer's messages carry its own message
///   numbers (dense, in the order its sends were issued) and a tag. A
///   receive posted here for a tag matches the lowest-numbered unmatched
///   message with that tag, once every lower-numbered message has been seen
///   (their frames can arrive out of order, since each send is its own
///   actor) — MPI's non-overtaking rule, per tag. Unmatched messages wait
///   as unexpected;
/// - liveness: heartbeats when idle; EOF, socket errors, malformed frames and
///   CRC mismatches are reported to the progress actor (link_down_atom);
///   ABORT frames from the peer are passed on (peer_abort_atom).
///
/// Progress: while it has work (routed ops, queued frames, a partial frame)
/// the link busy-polls its connection by sending itself poll_atom, so bytes,
/// chunk messages and reductions stay on one CAF worker without thread
/// hand-offs. After MCCL_SPIN_US without traffic it parks: the readiness
/// monitor (transport/tcp/readiness.hpp) waits in the kernel and wakes it (ready_atom). An idle rank burns
/// no CPU. A parked link with nothing to do offers its connection to the
/// inline path (link_lease.hpp) and takes it back before touching it again.

#include "transport/buffer_pool.hpp"
#include "transport/crc_recovery.hpp"
#include "actors/link_lease.hpp"
#include "actors/messages.hpp"
#include "transport/connection.hpp"
#include "transport/fault/fault_report.hpp"
#include "transport/tcp/tcp_mesh.hpp"

#include <caf/event_based_actor.hpp>

#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

namespace mccl::actors {

struct link_init {
  int rank = 0;
  int peer = 0;
  uint32_t comm_id = 0;
  transport::connection_ptr conn;
  caf::actor progress;
  buffer_pool* pool = nullptr;
  bool crc = false;
  int crc_retries = 3; ///< MCCL_CRC_RETRIES
  std::chrono::microseconds spin{50};
  std::chrono::milliseconds heartbeat{1000};
  int heartbeat_misses = 5; ///< MCCL_HEARTBEAT_MISSES; 0: never declare the peer dead
  uint32_t max_payload = 0; ///< largest data frame accepted (chunk size + slack)
  /// Shared with the communicator's inline path; null: never lent.
  std::shared_ptr<link_lease> lease;
  /// MCCL_RECONNECT_MS (already capped at MCCL_TIMEOUT_MS): how long a
  /// connection lost without BYE or ABORT may take to be re-established
  /// before the peer is reported lost. Needs `crc` (the frame numbering
  /// and the copies kept until acked) and a resumer; else 0.
  std::chrono::milliseconds reconnect{0};
  /// Re-establishes lost connections (tcp_mesh.hpp); null: never.
  std::shared_ptr<transport::tcp_link_resumer> resumer;
  /// Records reactions to faults for the fault report; null: no scenario.
  std::shared_ptr<transport::fault_recorder> recorder;
};

class link_actor : public caf::event_based_actor {
public:
  link_actor(caf::actor_config& cfg, link_init init);

  caf::behavior make_behavior() override;

  const char* name() const override { return "mccl.link"; }

  /// Drops the connection as soon as the actor stops, so no socket outlives
  /// the runtime's readiness monitor.
  void on_exit() override;

private:
  using clock = std::chrono::steady_clock;

  struct tx_item {
    uint8_t header[wire::header_size] = {};
    const uint8_t* data = nullptr;
    std::size_t len = 0;
    std::size_t written = 0;       ///< bytes of header + payload already sent
    caf::actor notify;             ///< told sent_atom when done (may be null)
    uint32_t step = 0;
    uint32_t chunk = 0;
    std::vector<uint8_t> owned;    ///< payload copy for control frames / purged items
  };

  // ---- handlers
  void on_send(tx_request& req, caf::actor notify);
  void on_route(uint64_t seq, caf::actor collective, std::shared_ptr<landing_map> landing);
  void on_abort(int origin, const std::string& reason, errc code);
  void on_post_recv(uint32_t tag, uint64_t op_id, caf::actor receiver);
  void on_unpost(uint64_t op_id);
  void dispatch_p2p(rx_chunk chunk);
  void match_p2p();
  bool keep_early(std::size_t bytes, uint64_t seq, const char* what);
  void on_shutdown(uint64_t issued);
  /// With CRC, finalize waits until the peer acked our frames (or a bound).
  void finish_shutdown_when_acked();
  void on_tick();

  // ---- progress
  /// True when this actor may use the connection now (taking it back from
  /// the inline path if it was offered). False while a caller has it: the
  /// caller pokes us (returned_atom) when done.
  bool have_connection();
  /// Parked, with nothing queued, half-read, routed or buffered.
  bool lendable() const;
  void offer_if_idle();
  void hand_early_chunks_to_lease();
  void kick();            ///< schedule a poll unless one is queued
  void poll();            ///< move bytes both ways, then spin or park
  void park();
  std::size_t read_frames();
  std::size_t write_frames();
  void frame_complete();
  /// Where to read this frame's payload in place, or nullptr.
  uint8_t* land(const wire::frame_header& h);
  /// Where the current payload's next bytes go.
  uint8_t* payload_at() { return (cur_land_ ? cur_land_ : cur_buf_.get()) + cur_have_; }
  /// Stops reading the current payload into the caller's memory of op
  /// `seq` (any op when `seq` is null): the op ended or is being failed.
  void stop_landing(const uint64_t* seq);
  void dispatch_data(rx_chunk chunk);
  /// A data frame that passed every check, CRC recovery included.
  void accept_data(rx_chunk chunk);
  // ---- CRC recovery (crc_recovery.hpp); only with MCCL_TRANSPORT_CRC
  void on_crc_frame(rx_chunk chunk);
  void on_crc_nack(uint64_t index);
  void ack_delivered_frames();
  /// Fails the op (the whole communicator aborts) naming this link.
  void crc_give_up(const wire::frame_header& h, const std::string& why);
  /// Declares the peer dead when it has been silent for too long.
  void check_peer_alive(clock::time_point now);
  void enqueue_control(wire::frame_kind kind, uint32_t aux, std::vector<uint8_t> payload,
                       uint64_t seq = 0, uint32_t step = 0);
  void purge_queued_data();
  // ---- resuming a lost connection (MCCL_RECONNECT_MS)
  /// The connection broke (reset, closed, a failed send): resume it when
  /// the link may, else fail().
  void lost(const std::string& why);
  /// The resumer's answer: a new connection, or null and why not.
  void on_resumed(transport::connection_ptr conn, const std::string& why);
  /// The peer's first crc_ack on a resumed connection: how many of our
  /// frames it received in order; everything after that is sent again.
  void on_resume_count(uint64_t count);
  void stop_resuming();

  /// Closes the link and reports it down. graceful: the peer said BYE after
  /// issuing `issued` ops.
  void fail(const std::string& why, bool graceful = false, uint64_t issued = 0);

  link_init init_;
  std::string peer_name_; ///< "rank 2 at 127.0.0.1:4711"

  // tx
  std::deque<tx_item> txq_;
  clock::time_point last_tx_;

  // rx: staging area for headers and small frames; large payloads are read
  // straight into their pooled buffer.
  std::vector<uint8_t> stage_;
  std::size_t stage_begin_ = 0;
  std::size_t stage_end_ = 0;
  bool in_payload_ = false;
  wire::frame_header cur_;
  std::shared_ptr<uint8_t> cur_buf_;
  /// The current payload is read in place, here (collectives/landing.hpp).
  uint8_t* cur_land_ = nullptr;
  /// The current payload belongs to an op that ended: read and dropped.
  bool cur_discard_ = false;
  std::size_t cur_have_ = 0;
  clock::time_point last_rx_;

  // routing
  std::unordered_map<uint64_t, caf::actor> routes_;
  std::unordered_map<uint64_t, std::shared_ptr<landing_map>> landings_; ///< by seq, of routed ops
  std::map<uint64_t, std::vector<rx_chunk>> early_;
  std::size_t early_bytes_ = 0;

  // point-to-point matching
  struct posted_recv {
    uint32_t tag;
    uint64_t op_id;
    caf::actor receiver;
  };
  struct unexpected_message {
    uint32_t tag;
    std::vector<rx_chunk> chunks;
  };
  std::deque<posted_recv> posted_;                  ///< oldest first
  std::map<uint64_t, unexpected_message> unexpected_; ///< by message number
  struct p2p_route {
    uint64_t op_id;
    caf::actor receiver;
  };
  std::unordered_map<uint64_t, p2p_route> p2p_routes_; ///< by message number
  uint64_t seen_prefix_ = 0;      ///< every message below this has been seen
  std::set<uint64_t> seen_ahead_; ///< seen messages at or above seen_prefix_

  // progress state
  bool poll_queued_ = false;
  bool read_armed_ = false;
  bool write_armed_ = false;
  clock::time_point last_activity_;
  bool closed_ = false;
  bool offered_ = false; ///< the lease is (or was, until reclaimed) offered
  std::string close_reason_ = "the link was closed"; ///< why, for sends that arrive later
  std::string peer_abort_reason_; ///< set once the peer sent an ABORT frame
  /// The connection ended without the peer's BYE or ABORT: the progress
  /// actor blames the peer (or a rank whose ABORT explains it) shortly.
  bool lost_ = false;
  errc peer_abort_code_ = errc::aborted; ///< the code that frame carried
  bool aborted_ = false;

  // CRC recovery state, untouched without MCCL_TRANSPORT_CRC.
  crc_sender crc_tx_;
  crc_receiver crc_rx_;
  uint64_t crc_acked_ = 0;   ///< the count our last crc_ack carried
  bool crc_failed_ = false;  ///< recovery gave up: data frames are dropped
  caf::response_promise shutdown_wait_; ///< finalize waiting for acks

  // Resuming (MCCL_RECONNECT_MS). While `resuming_` there is no connection:
  // nothing is read or written, sends are only kept (numbered) for later.
  bool resuming_ = false;
  /// On a resumed connection, until the peer's first crc_ack says where to
  /// start again: data frames are kept, not queued.
  bool awaiting_resume_count_ = false;
  std::string resume_cause_; ///< why the connection was lost
  clock::time_point resume_started_;
  int resumes_ = 0; ///< connections resumed so far on this link
  uint64_t shutdown_issued_ = 0;
  clock::time_point shutdown_deadline_;
};

} // namespace mccl::actors
