#include "collectives/engine/op_session.hpp"

#include "collectives/engine/frame_signature.hpp"

namespace mccl {

op_session::op_session(collective_args args, uint64_t seq, uint32_t comm_id, std::string algorithm_name,
                       algorithm_factory factory)
  : args_(std::move(args)), seq_(seq), comm_id_(comm_id), algorithm_name_(std::move(algorithm_name)),
    factory_(std::move(factory)), signature_(args_.op.signature(args_.world)) {
}

op_session::~op_session() = default;

template <class F>
void op_session::guarded(F&& f) {
  if (reported_)
    return;
  try {
    f();
  } catch (const mccl::error& e) {
    fail(e.code(), e.message());
  } catch (const std::exception& e) {
    fail(errc::internal, std::string("exception in the algorithm: ") + e.what());
  }
}

void op_session::start_op() {
  guarded([this] {
    algo_ = factory_(*this, args_);
    if (!algo_)
      throw error(errc::internal, "algorithm factory of \"" + algorithm_name_ + "\" returned nothing");
    algo_->start();
  });
  if (landing_)
    landing_->close_additions();
}

void op_session::start_op(std::vector<transport::received_frame>& early) {
  start_op();
  for (auto& f : early) {
    if (reported_ && !seen_) // done, and not counting copies: the rest is never used
      return;
    if (landing_)
      landing_->passed_on(f.peer, f.header);
    deliver(f);
  }
}

bool op_session::next_senders(std::vector<int>& peers) const {
  if (reported_)
    return true;
  if (p2p() || !algo_ || acks_pending_ > 0)
    return false;
  if (finished_)
    return true; // every chunk is in: only its own sends are left
  try {
    return algo_->next_senders(peers);
  } catch (...) {
    return false;
  }
}

void op_session::deliver(transport::received_frame& c) {
  if (seen_ && !seen_->first_time(c.peer, c.header.step, c.header.chunk))
    return dropped_duplicate(c.peer, c.header);
  guarded([&] {
    if (!p2p()) {
      auto mismatch = check_signature(c.header, c.peer);
      if (!mismatch.empty())
        return fail(errc::desync, mismatch);
      if (c.header.flags & wire::flag_ack) {
        if (acks_pending_ > 0)
          --acks_pending_;
        return maybe_report_success();
      }
      if (c.header.flags & wire::flag_ack_request)
        send_frame(c.peer, ack_step, 0, nullptr, 0, signature_.count, wire::flag_ack);
    }
    if (finished_) // every chunk it expected is in: this one is a copy
      return fail(errc::protocol_error, "duplicate chunk " + std::to_string(c.header.chunk) + " of step "
                                          + std::to_string(c.header.step) + " from rank "
                                          + std::to_string(c.peer) + " after the op had all its chunks");
    incoming_chunk in;
    in.message_bytes = c.header.op_count;
    in.tag = c.header.aux;
    in.peer = c.peer;
    in.step = c.header.step;
    in.chunk = c.header.chunk;
    in.data = c.payload();
    in.len = c.header.payload_len;
    in.keep = std::move(c.buffer);
    algo_->on_chunk(in);
  });
}

void op_session::frame_sent(int peer, uint32_t step, uint32_t chunk) {
  if (outstanding_sends_ > 0)
    --outstanding_sends_;
  if (step != ack_step || p2p())
    guarded([&] { algo_->on_sent(peer, step, chunk); });
  maybe_report_success();
}

void op_session::send(int peer, uint32_t step, uint32_t chunk, const void* data, std::size_t bytes) {
  send_block(peer, step, chunk, data, bytes, signature_.count);
}

void op_session::send_block(int peer, uint32_t step, uint32_t chunk, const void* data,
                            std::size_t bytes, uint64_t block_bytes) {
  uint16_t flags = 0;
  if (!p2p() && algo_ && !algo_->receives()) {
    ack_requested_.resize(static_cast<std::size_t>(args_.world));
    if (peer >= 0 && peer < args_.world && !ack_requested_[peer]) {
      ack_requested_[peer] = true;
      ++acks_pending_;
      flags = wire::flag_ack_request;
    }
  }
  send_frame(peer, step, chunk, data, bytes, block_bytes, flags);
}

void op_session::send_frame(int peer, uint32_t step, uint32_t chunk, const void* data,
                            std::size_t bytes, uint64_t block_bytes, uint16_t flags) {
  if (reported_)
    return;
  if (peer < 0 || peer >= args_.world || peer == args_.rank)
    throw error(errc::internal, "algorithm " + algorithm_name_ + " sends to invalid rank "
                                  + std::to_string(peer));
  wire::frame_header h;
  h.kind = wire::frame_kind::data;
  h.comm_id = comm_id_;
  h.seq = seq_;
  h.step = step;
  h.chunk = chunk;
  h.op_desc = pack_desc(signature_);
  h.op_arg = signature_.arg;
  h.op_count = block_bytes;
  h.flags = flags;
  if (p2p()) {
    h.flags = wire::flag_p2p;
    h.aux = args_.op.tag;
    h.op_count = args_.op.bytes();
  }
  ++outstanding_sends_;
  payload_sent_ += bytes;
  emit(peer, h, static_cast<const uint8_t*>(data), bytes);
}

void op_session::finish() {
  finished_ = true;
  maybe_report_success();
}

void op_session::maybe_report_success() {
  if (finished_ && outstanding_sends_ == 0 && acks_pending_ == 0 && !reported_)
    finish_report(errc::none, {});
}

std::string op_session::where() const {
  try {
    return algo_ ? algo_->where() : "not started";
  } catch (...) {
    return "(unknown step)";
  }
}

void op_session::fail(errc code, const std::string& why) {
  if (reported_)
    return;
  finish_report(code, describe_op() + " failed at " + where() + ": " + why);
}

void op_session::finish_report(errc code, std::string message) {
  reported_ = true;
  report(code, std::move(message));
}

std::string op_session::describe_op() const {
  const auto& op = args_.op;
  auto what = describe(op);
  auto paren = what.find('(');
  // "allreduce seq 7 on rank 1 (ring, count 1000, float32, sum)"; a send is
  // numbered per destination, a receive not at all.
  std::string number = op.kind == op_kind::recv ? ""
                       : op.kind == op_kind::send ? " message " + std::to_string(seq_)
                                                  : " seq " + std::to_string(seq_);
  // What describe() has in parentheses: "count 1000, float32, sum)", or
  // just ")" for an op without arguments (a barrier).
  auto args = what.substr(paren + 1);
  return what.substr(0, paren) + number + " on rank " + std::to_string(args_.rank) + " ("
         + algorithm_name_ + (args == ")" ? "" : ", ") + args;
}

std::string op_session::check_signature(const wire::frame_header& h, int peer) const {
  auto theirs = frame_signature(h, signature_);
  if (theirs == signature_)
    return {};
  return "ranks issued different collectives at seq " + std::to_string(seq_)
         + ": rank " + std::to_string(args_.rank) + " issued " + describe(signature_)
         + ", rank " + std::to_string(peer) + " issued " + describe(theirs)
         + " (all ranks must issue the same collectives in the same order)";
}

} // namespace mccl
