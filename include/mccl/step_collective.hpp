#pragma once
/// Custom collectives that exchange whole messages: the way to write one.
///
/// A step collective is a state machine that mccl's op actor hosts, one
/// instance per op, on the thread that drives the op. It talks in
/// messages: one message per (peer, step), of any size. mccl does the rest:
///
///   - it cuts every message into frames of MCCL_CHUNK_BYTES (rounded down
///     to a multiple of 64 bytes) and joins the frames of a received one
///     again (straight into a destination you name, when you name it), or
///     hands it over part by part as it comes, when you ask for that;
///   - it holds what a peer sent for a step you have not asked for yet, and
///     hands messages over in step order: one of step s only once every
///     message you asked for of earlier steps was handed over. A fast peer
///     one step ahead is no concern of yours, and you may ask for all your
///     messages in start() (they are then read in place where the
///     transport allows) and still see them step by step;
///   - it keeps what you send alive until its last frame has left, so a
///     buffer you hand over is never read after it was freed or changed;
///   - it stamps every frame with the op's signature (a rank that issued
///     another op is caught), names the step and peer it waits for in
///     timeout errors, and completes the op once you called finish() and
///     every frame has left.
///
/// Handlers run one at a time, never re-entered: a message you ask for
/// inside a handler, already complete, is delivered after that handler
/// returns. A handler that throws fails the op with the exception's text.
///
///   class my_collective final : public mccl::step_collective {
///     void start(mccl::step_io& io) override { ... io.send(...); io.receive(...); }
///     void on_message(mccl::step_io& io, const mccl::step_message& m) override { ... }
///   };
///   mccl::register_step_collective("mine", [](const mccl::collective_args&) {
///     return std::make_unique<my_collective>();
///   });
///   comm.custom("mine", in, out, count, mccl::dtype::float32).wait();
///
/// mccl::algorithm (collective.hpp) stays the lower-level extension point:
/// frames instead of messages, chunking and lifetimes your own.

#include <mccl/collective.hpp>
#include <mccl/error.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mccl {

/// A message from a peer: the whole of it, or one part of one asked for
/// with receive_parts(). `data` is valid during on_message() only (unless
/// it points into a destination of yours): copy what you keep.
struct step_message {
  int peer = -1;
  uint32_t step = 0;
  const uint8_t* data = nullptr;
  std::size_t bytes = 0;
  /// Where `data` starts in the whole message (0 for a whole one).
  std::size_t offset = 0;
  /// True when the message is now fully delivered (always for a whole one).
  bool last = true;

  /// The payload as `bytes / sizeof(T)` values of T.
  template <class T>
  const T* as() const noexcept { return reinterpret_cast<const T*>(data); }
  template <class T>
  std::size_t count() const noexcept { return bytes / sizeof(T); }
};

/// What the runtime does for a step collective. Valid for the op's life.
class step_io {
public:
  explicit step_io(const collective_args& args) : args_(args) {}
  virtual ~step_io() = default;

  /// This rank, the world size, the op (its buffers, count, dtype, redop).
  const collective_args& args() const noexcept { return args_; }
  int rank() const noexcept { return args_.rank; }
  int world() const noexcept { return args_.world; }

  /// Sends `bytes` at `data` as this op's message (peer, step); one send
  /// per (peer, step). `owner` is held until the last frame has left, and
  /// the memory must stay unchanged until then. Pass no owner only for
  /// memory that stays unchanged until the op completes (its input).
  virtual void send(int peer, uint32_t step, const void* data, std::size_t bytes,
                    std::shared_ptr<const void> owner) = 0;

  /// Sends `values`, moved into the runtime, which frees them once they
  /// have left (a snapshot of state that changes while it travels).
  template <class T>
  void send(int peer, uint32_t step, std::vector<T> values) {
    auto held = std::make_shared<const std::vector<T>>(std::move(values));
    send(peer, step, held->data(), held->size() * sizeof(T), held);
  }

  /// Asks for the message (peer, step), exactly `bytes` long (a different
  /// length fails the op: ranks disagree on the count). on_message() gets
  /// it once all of it is in and every message asked for of an earlier
  /// step was delivered; what arrived before you asked was held. With
  /// `dst`, the message is assembled there: nothing may read or write
  /// those bytes until on_message(). Without, it lives in memory of the
  /// runtime's. Asked for in start(), it is read straight from the link
  /// into place where the transport allows.
  virtual void receive(int peer, uint32_t step, std::size_t bytes, void* dst = nullptr) = 0;

  /// The same, delivered in parts as its frames arrive (in the same step
  /// order): each on_message() gets one part, `m.offset` bytes into the
  /// message, and `m.last` marks the part that completes it. For work that
  /// goes element by element (a combine), so that it overlaps the
  /// transfer instead of waiting for the whole message. Parts start at
  /// multiples of 64 bytes: elements of 1, 2, 4, 8, 16, 32 or 64 bytes are
  /// never split. Without `dst`, parts are handed over where the link put
  /// them, uncopied.
  virtual void receive_parts(int peer, uint32_t step, std::size_t bytes, void* dst = nullptr) = 0;

  /// The op succeeded; it completes once every frame has left. Call it
  /// after the last message you asked for arrived.
  virtual void finish() = 0;

  /// The op failed; `why` is wrapped with the op, sequence and where().
  virtual void fail(errc code, const std::string& why) = 0;

private:
  const collective_args& args_;
};

/// The state machine of one op of a custom collective.
class step_collective {
public:
  virtual ~step_collective() = default;

  /// Called once: send the first messages, ask for the first ones.
  virtual void start(step_io& io) = 0;

  /// A message asked for with receive() is complete.
  virtual void on_message(step_io& io, const step_message& m) = 0;

  /// Where the state machine stands, for error messages ("step 2 of 3");
  /// the runtime adds which (peer, step) it still waits for. Empty: only
  /// that.
  virtual std::string where() const { return {}; }
};

/// Builds the state machine of one op.
using step_collective_factory =
  std::function<std::unique_ptr<step_collective>(const collective_args& args)>;

/// Makes `name` invocable as communicator::custom(name, ...) on every
/// communicator; replaces an earlier registration of the name. Thread-safe.
void register_step_collective(const std::string& name, step_collective_factory factory);

} // namespace mccl
