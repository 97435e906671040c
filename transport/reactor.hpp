#pragma once
/// The runtime's one I/O thread. It runs Boost.Asio's io_context and is used
/// for what must wait in the kernel without holding a CAF worker: a parked
/// link waiting for its socket to become readable or writable, and the
/// rendezvous store's server. Data does not flow through it: busy links move
/// bytes from their own actor handlers (see actors/link_actor.hpp).

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <thread>

namespace mccl::transport {

class reactor {
public:
  reactor();
  /// Stops the io_context and joins the thread; pending handlers are dropped.
  ~reactor();

  reactor(const reactor&) = delete;
  reactor& operator=(const reactor&) = delete;

  boost::asio::io_context& io() noexcept { return io_; }

private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
};

} // namespace mccl::transport
