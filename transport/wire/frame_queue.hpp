#pragma once
/// Writing a queue of frames with gathered sends, shared by the link actor
/// and the inline path. A queued frame has a `header` of wire::header_size
/// bytes, a payload (`data`, `len`) and `written`: how much of header plus
/// payload has left already.

#include "transport/wire/frame.hpp"

#include <sys/uio.h>

#include <cstddef>

namespace mccl::transport {

/// Fills iov with the unwritten bytes of the queue's frames, front first;
/// returns the number of entries used (at most max_iov).
template <class Queue>
int gather_frames(Queue& queue, iovec* iov, int max_iov) {
  int n = 0;
  for (auto it = queue.begin(); it != queue.end() && n + 2 <= max_iov; ++it) {
    auto w = it->written;
    if (w < wire::header_size)
      iov[n++] = {it->header + w, wire::header_size - w};
    auto poff = w > wire::header_size ? w - wire::header_size : 0;
    if (it->len > poff)
      iov[n++] = {const_cast<uint8_t*>(it->data) + poff, it->len - poff};
  }
  return n;
}

/// Accounts `bytes` the kernel took: every frame that is now complete is
/// passed to done(frame) and popped.
template <class Queue, class Done>
void account_written(Queue& queue, std::size_t bytes, Done&& done) {
  while (bytes > 0) {
    auto& front = queue.front();
    auto need = wire::header_size + front.len - front.written;
    if (bytes < need) {
      front.written += bytes;
      return;
    }
    bytes -= need;
    auto frame = std::move(front);
    queue.pop_front();
    done(frame);
  }
}

} // namespace mccl::transport
