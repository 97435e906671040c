// Hosts a step collective (include/mccl/step_collective.hpp) as the op's
// algorithm: frames in and out go through the message inbox and outbox,
// and the collective's handlers see whole messages (or the parts of one it
// asked for in parts), never frames.

#include <mccl/step_collective.hpp>

#include "collectives/extension/message_inbox.hpp"
#include "collectives/extension/message_outbox.hpp"
#include "collectives/extension/registry.hpp"

#include <algorithm>

namespace mccl {

namespace {

/// Frames of MCCL_CHUNK_BYTES rounded down to a multiple of 64 bytes, so
/// that parts never split an element of a power-of-two size up to 64.
std::size_t frame_bytes_for(const collective_args& args) {
  return std::max<std::size_t>(64, args.chunk_bytes / 64 * 64);
}

/// The op's arguments, a base of step_host so that they are built before
/// the step_io base that refers to them.
struct held_args {
  collective_args held;
};

class step_host final : private held_args, public algorithm, public step_io {
public:
  step_host(collective_io& io, const collective_args& args, std::unique_ptr<step_collective> c)
    : held_args{args}, step_io(held), io_(io), collective_(std::move(c)),
      inbox_(frame_bytes_for(args)), outbox_(frame_bytes_for(args)) {}

  // ---- algorithm: what the op session calls ----
  void start() override {
    starting_ = true;
    collective_->start(*this);
    starting_ = false;
    deliver_ready();
  }

  void on_chunk(const incoming_chunk& c) override {
    inbox_.add(c);
    deliver_ready();
  }

  void on_sent(int peer, uint32_t step, uint32_t /*chunk*/) override { outbox_.sent(peer, step); }

  bool next_senders(std::vector<int>& peers) const override { return inbox_.waiting_on(peers); }

  std::string where() const override {
    auto own = collective_->where();
    auto waiting = inbox_.waiting_for();
    if (waiting.empty())
      return own.empty() ? "no message outstanding" : own;
    return own.empty() ? "waiting for " + waiting : own + ", waiting for " + waiting;
  }

  // ---- step_io: what the collective calls ----
  void send(int peer, uint32_t step, const void* data, std::size_t bytes,
            std::shared_ptr<const void> owner) override {
    outbox_.send(io_, peer, step, static_cast<const uint8_t*>(data), bytes, std::move(owner));
  }

  void receive(int peer, uint32_t step, std::size_t bytes, void* dst) override {
    ask(peer, step, bytes, dst, false);
  }

  void receive_parts(int peer, uint32_t step, std::size_t bytes, void* dst) override {
    ask(peer, step, bytes, dst, true);
  }

  void finish() override {
    stopped_ = true;
    io_.finish();
  }

  void fail(errc code, const std::string& why) override {
    stopped_ = true;
    io_.fail(code, why);
  }

private:
  void ask(int peer, uint32_t step, std::size_t bytes, void* dst, bool parts) {
    if (peer < 0 || peer >= world() || peer == rank())
      throw error(errc::invalid_argument, "asks for a message from rank " + std::to_string(peer));
    // Landing spots can only be added while the op starts (landing.hpp).
    inbox_.ask(peer, step, bytes, static_cast<uint8_t*>(dst), parts,
               starting_ ? io_.landing() : nullptr);
  }

  /// Hands over every ready message, one handler at a time: a message
  /// asked for inside a handler waits for that handler to return.
  void deliver_ready() {
    if (delivering_ || starting_)
      return;
    delivering_ = true;
    step_message m;
    while (!stopped_ && inbox_.next(m)) {
      collective_->on_message(*this, m);
      inbox_.release(m);
    }
    delivering_ = false;
  }

  collective_io& io_;
  std::unique_ptr<step_collective> collective_;
  message_inbox inbox_;
  message_outbox outbox_;
  bool starting_ = false;
  bool delivering_ = false;
  bool stopped_ = false; ///< finished or failed: nothing more is delivered
};

} // namespace

void register_step_collective(const std::string& name, step_collective_factory factory) {
  if (name.empty())
    throw error(errc::invalid_argument, "register_step_collective: the name is empty");
  if (!factory)
    throw error(errc::invalid_argument, "register_step_collective(\"" + name + "\"): no factory");
  register_algorithm(op_kind::custom, name,
                     [factory = std::move(factory)](collective_io& io, const collective_args& args)
                       -> std::unique_ptr<algorithm> {
                       auto c = factory(args);
                       if (!c)
                         throw error(errc::internal, "the factory returned no collective");
                       return std::make_unique<step_host>(io, args, std::move(c));
                     });
}

} // namespace mccl
