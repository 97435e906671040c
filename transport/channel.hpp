#pragma once
/// A channel: one peer's framed stream over one connection (connection.hpp),
/// both directions. It is the only code that reads or writes the wire, for
/// every driver and every transport:
///
/// - out: a queue of frames written with gathered writes (header, then the
///   payload straight from the caller's memory); the listener hears when
///   each data frame has fully left (on_sent);
/// - in: headers are staged and checked (lengths bounded before anything
///   is allocated); a data frame's payload goes where the listener says
///   (landing_for: the caller's memory, receive in place) or to pooled
///   memory, large payloads read straight there without passing the stage;
/// - classification: data frames go up (on_frame) in stream order;
///   heartbeats only prove the peer alive; ABORT and BYE go up as such;
///   crc_ack and crc_nack are handled here (MCCL_TRANSPORT_CRC,
///   crc_recovery.hpp), as is resuming a lost connection
///   (MCCL_RECONNECT_MS);
/// - liveness: when bytes last arrived and last left (last_rx, last_tx),
///   and keep_alive() queues a heartbeat on a direction idle for half an
///   interval.
///
/// Owned by the peer's link (collectives/engine/peer_link.hpp), which the
/// peer's link actor keeps.
///
/// Threading: one thread at a time (the engine's leader) calls everything
/// except the constructor; listener calls happen on that thread, inside
/// progress() or the call that caused them. Never blocks.

#include "transport/buffer_pool.hpp"
#include "transport/connection.hpp"
#include "transport/crc_recovery.hpp"
#include "transport/link_counters.hpp"
#include "transport/fault/fault_report.hpp"
#include "transport/received_frame.hpp"
#include "transport/wire/frame.hpp"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace mccl::transport {

/// Names a data frame for on_sent: whatever the sender put in it.
struct frame_ref {
  uint64_t owner = 0; ///< the sender's id of the op
  uint32_t step = 0;
  uint32_t chunk = 0;
};

/// Why a channel stopped (channel_listener::on_down).
enum class down_kind : uint8_t {
  lost,      ///< the connection failed or closed without BYE or ABORT
  resumable, ///< lost, and the channel waits for resume() (MCCL_RECONNECT_MS)
  error,     ///< the peer broke the protocol, or CRC recovery gave up: abort
};

class channel_listener {
public:
  virtual ~channel_listener() = default;
  /// Where to read the payload of data frame `h` from `peer`: memory of the
  /// op it belongs to (receive in place), or null for pooled memory.
  virtual uint8_t* landing_for(int peer, const wire::frame_header& h) = 0;
  /// A data frame, intact (CRC-checked with MCCL_TRANSPORT_CRC), in stream order.
  virtual void on_frame(received_frame f) = 0;
  /// A data frame queued with send() has fully left (or, with CRC, was
  /// copied for a later retransmission): its memory may be reused.
  virtual void on_sent(int peer, const frame_ref& ref) = 0;
  /// The peer's ABORT frame: rank `origin` aborted the communicator; at
  /// the end of a revoke (code revoked) with the revoke point it agreed.
  /// `revokes`: the abort revokes the communicator (a member was lost).
  virtual void on_peer_abort(int peer, int origin, errc code, const std::string& reason,
                             uint64_t revoke_point, bool revokes) = 0;
  /// The peer's BYE: it finalized after issuing `issued` collectives; every
  /// byte it sent came before. The channel is closed.
  virtual void on_peer_bye(int peer, uint64_t issued) = 0;
  /// The channel stopped (or waits to be resumed); `why` names the peer.
  virtual void on_down(int peer, down_kind kind, errc code, const std::string& why) = 0;
  /// The stream still works, but what came over it means the communicator
  /// cannot go on (CRC recovery gave up): it must abort, and the ABORT can
  /// still reach this peer.
  virtual void on_fatal(int peer, errc code, const std::string& why) = 0;
  /// The peer's REVOKE frame: rank `origin` revoked the communicator, and
  /// the peer's revoke point is `point` (wire::frame_kind::revoke). Every
  /// data frame the peer sent before it has been delivered. Ignored by
  /// listeners that know nothing of revoking.
  virtual void on_peer_revoke(int /*peer*/, int /*origin*/, uint64_t /*point*/, const std::string& /*reason*/) {}
};

struct channel_options {
  int rank = 0;
  int peer = 0;
  uint32_t comm_id = 0;
  /// Largest data payload accepted (the chunk size plus slack).
  uint32_t max_payload = 0;
  bool crc = false;     ///< MCCL_TRANSPORT_CRC
  int crc_retries = 3;  ///< MCCL_CRC_RETRIES
  /// A lost connection waits for resume() instead of failing (needs crc).
  bool resumable = false;
  std::chrono::milliseconds reconnect{0}; ///< MCCL_RECONNECT_MS, for messages
  std::chrono::milliseconds heartbeat{1000}; ///< MCCL_HEARTBEAT_MS
  buffer_pool* pool = nullptr;
  std::shared_ptr<fault_recorder> recorder; ///< null: no fault scenario
  /// Where the channel counts what it moves (metrics); null: not counted.
  std::shared_ptr<link_counters> counters;
};

class channel {
public:
  using clock = std::chrono::steady_clock;
  enum class state : uint8_t {
    open,     ///< moving frames
    resuming, ///< lost; sends are kept until resume() (MCCL_RECONNECT_MS)
    closed,   ///< for good: BYE, failure, or close()
  };

  /// Payloads at least this large are read straight to where they go
  /// rather than through the stage: one copy of every byte less.
  static constexpr std::size_t direct_read_min = 32 * 1024;

  channel(channel_options opts, connection_ptr conn, channel_listener& listener,
          clock::time_point now);
  ~channel();
  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;

  // ---- sending: queued here, written by progress() (the link actor's
  // turn), never by send()

  /// Payloads up to this size are copied into the queue entry itself (no
  /// allocation), so they leave the sender's memory inside send() and the
  /// sender hears so at once; a larger one is reported once written.
  static constexpr std::size_t inline_payload_bytes = 64;

  /// Queues data frame `h` (kind data; payload_len and comm_id are filled
  /// in). Without CRC `data` must stay untouched until on_sent(ref), which
  /// comes from inside this call for a payload of up to
  /// inline_payload_bytes, else once it is written; with CRC the channel
  /// copies every payload. Writes nothing: progress() does. False when the
  /// channel is closed (nothing queued, on_sent never comes).
  bool send(const wire::frame_header& h, const uint8_t* data, std::size_t len, frame_ref ref);
  /// Drops every queued data frame not yet begun (ending a revoke: only
  /// those that point into an op's memory) and finishes the one on the
  /// wire from a copy; a payload being read into caller memory goes to
  /// scratch memory instead. Afterwards the channel holds no pointer into
  /// any op's memory. Then queues an ABORT frame: rank `origin` aborted
  /// with `code` because `reason` (ending a revoke: `revoke_point` is the
  /// point this rank agreed). Data frames are neither sent nor delivered
  /// any more. `revokes`: the abort revokes the communicator (a lost
  /// member), and peers that read it mark it revoked (wire::abort_revokes).
  void abort(int origin, errc code, const std::string& reason, uint64_t revoke_point = 0, bool revokes = false);
  /// Queues BYE: this rank issued `issued` collectives and finalizes. From
  /// then on the connection closing is no loss (the peer closes when it
  /// reads our BYE, without answering it).
  void send_bye(uint64_t issued);
  /// Queues REVOKE behind what is queued (data frames still go out): rank
  /// `origin` revoked the communicator, this rank's revoke point is
  /// `point`, because `reason`. Nothing is queued on a channel that is not
  /// open or has aborted.
  void send_revoke(int origin, uint64_t point, const std::string& reason);
  /// Queues a heartbeat when nothing was written for half an interval and
  /// nothing is queued (with CRC, the acknowledgement it owes the peer
  /// instead, which is as good a sign of life).
  void keep_alive(clock::time_point now);
  /// With CRC: acknowledges now what arrived (finalize: the peer waits for
  /// it); otherwise acknowledgements ride along with our next frame.
  void ack_now();

  // ---- driving

  /// Writes what the connection takes, then reads and hands up what
  /// arrived (at most a budget, so one busy peer cannot starve the others).
  /// Returns the bytes moved.
  std::size_t progress(clock::time_point now);
  /// Writes what the connection takes now, reading nothing: what a peer
  /// about to be cut off can still get (the ABORT naming why).
  /// Best effort: a failed write is left to the close that follows.
  /// Returns the bytes written.
  std::size_t write_now(clock::time_point now);
  /// `bytes` of the queue left at `now`: the clock of the last send, the
  /// link's counters, and on_sent for each frame now fully written.
  void written(std::size_t bytes, clock::time_point now);
  /// The connection lost in state resuming came back as `fresh`: both
  /// sides say how many frames they received in order and send the rest
  /// again.
  void resume(connection_ptr fresh, clock::time_point now);
  /// The connection lost in state resuming could not be re-established:
  /// the channel goes down, naming the first cause and `why`.
  void resume_failed(const std::string& why);
  /// Ends the channel: `why` is reported (on_down, error) unless it is
  /// already closed.
  void fail(errc code, const std::string& why);
  /// Closes the connection without reporting anything (finalize).
  void close();

  // ---- state

  state current() const noexcept { return state_; }
  bool aborted() const noexcept { return aborted_; }
  int peer() const noexcept { return opts_.peer; }
  /// "rank 2 at 127.0.0.1:4711".
  const std::string& name() const noexcept { return name_; }
  /// Bytes are queued (wait for writability too).
  bool wants_write() const noexcept { return !txq_.empty(); }
  /// Bytes already read from the connection wait in the stage: a pass must
  /// visit this channel even when its connection has nothing new.
  bool has_staged() const noexcept { return stage_begin_ < stage_end_; }
  /// Whether progress() would do anything now: frames to write, bytes
  /// staged, or something the connection may have to read
  /// (connection::maybe_readable: always, for a socket).
  bool has_work() const { return !txq_.empty() || has_staged() || conn_->maybe_readable(); }
  /// With CRC: data frames the peer has not acknowledged yet.
  std::size_t unacked_frames() const noexcept { return crc_tx_.kept_frames(); }
  /// The connection (null unless open), for waiting on it.
  const connection_ptr& conn() const noexcept { return conn_; }
  clock::time_point last_rx() const noexcept { return last_rx_; }
  clock::time_point last_tx() const noexcept { return last_tx_; }
  /// Payload bytes that passed the stage (copied once more than those read
  /// straight to their destination).
  std::size_t staged_payload_bytes() const noexcept { return staged_payload_; }

private:
  struct tx_item {
    uint8_t header[wire::header_size] = {};
    const uint8_t* data = nullptr;
    std::size_t len = 0;
    std::size_t written = 0; ///< of header + payload
    bool data_frame = false; ///< reports on_sent(ref) when done
    frame_ref ref;
    std::vector<uint8_t> owned; ///< payload of control frames and purged copies
    uint8_t inline_payload[inline_payload_bytes] = {}; ///< a small payload's copy (send())

    tx_item() = default;
    tx_item(tx_item&& o) noexcept { *this = std::move(o); }
    /// `data` follows an inline payload to its new place.
    tx_item& operator=(tx_item&& o) noexcept {
      std::memcpy(header, o.header, sizeof header);
      len = o.len;
      written = o.written;
      data_frame = o.data_frame;
      ref = o.ref;
      owned = std::move(o.owned); // the same buffer: `data` into it stays valid
      std::memcpy(inline_payload, o.inline_payload, sizeof inline_payload);
      data = o.data == o.inline_payload ? inline_payload : o.data;
      return *this;
    }
  };

  std::size_t write_frames(clock::time_point now);
  std::size_t read_frames(clock::time_point now);
  /// A header was decoded: where its payload goes.
  void begin_frame(const wire::frame_header& h);
  void frame_complete();
  uint8_t* payload_at() { return (cur_land_ ? cur_land_ : cur_buf_.get()) + cur_have_; }
  /// How much to read into the stage now.
  std::size_t stage_read_limit() const;
  /// The peer aborted the communicator (its ABORT frame, or the note it
  /// left beside the stream): the listener hears it once.
  void peer_aborted(int origin, uint32_t code, const std::string& reason, uint64_t revoke_point);
  void on_data(received_frame f);
  void accept_data(received_frame f);
  void on_crc_frame(received_frame f);
  void on_crc_nack(uint64_t index);
  /// Queues a crc_ack for the frames delivered since the last one.
  void ack_delivered_frames();
  void on_resume_count(uint64_t count);
  void queue_control(wire::frame_kind kind, uint32_t aux, std::vector<uint8_t> payload,
                     uint64_t seq = 0, uint32_t step = 0);
  void queue_kept(const crc_sender::kept_frame& f, bool report, frame_ref ref);
  /// The connection broke: resume it when the channel may, else go down.
  void lost(const std::string& why);
  void go_down(down_kind kind, errc code, const std::string& why);
  void reset_rx();
  void record(const char* kind, const wire::frame_header* h, const std::string& detail);

  channel_options opts_;
  connection_ptr conn_;
  channel_listener& listener_;
  std::string name_;
  state state_ = state::open;
  bool aborted_ = false;
  bool said_bye_ = false; ///< BYE is queued: the peer may close from now on
  bool peer_abort_heard_ = false;

  std::deque<tx_item> txq_;
  clock::time_point last_tx_;

  // Receiving: headers and small frames pass the stage, one recv for several.
  std::vector<uint8_t> stage_;
  std::size_t stage_begin_ = 0;
  std::size_t stage_end_ = 0;
  bool in_payload_ = false;
  wire::frame_header cur_;
  std::shared_ptr<uint8_t> cur_buf_;
  uint8_t* cur_land_ = nullptr; ///< the current payload is read in place, here
  bool cur_discard_ = false;    ///< read the current payload and drop it
  std::size_t cur_have_ = 0;
  /// While large data frames come, each header is read alone, so its
  /// payload goes straight to its destination too (one more recv per frame
  /// saves a copy of up to the stage's size). Only a run of small ones ends
  /// that: a stream of large ops mixed with a few small ones (mccl-bench's
  /// barriers, a loss value) keeps it. Counted up to small_frames_to_stage.
  static constexpr int small_frames_to_stage = 8;
  int small_frames_in_a_row_ = small_frames_to_stage;
  std::size_t staged_payload_ = 0;
  clock::time_point last_rx_;

  // CRC recovery (MCCL_TRANSPORT_CRC); untouched without it.
  crc_sender crc_tx_;
  crc_receiver crc_rx_;
  uint64_t crc_acked_ = 0; ///< the count our last crc_ack carried
  bool crc_failed_ = false;

  // Resuming (MCCL_RECONNECT_MS).
  bool awaiting_resume_count_ = false; ///< data waits for the peer's count
  std::string resume_cause_;
  clock::time_point resume_started_;
  int resumes_ = 0;
};

} // namespace mccl::transport
