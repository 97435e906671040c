#pragma once
/// The runtime's waiting threads: one runs Boost.Asio's io_context for the
/// rendezvous store's server and the process's standby store; the readiness
/// monitor (readiness.hpp) wakes an engine that no thread leads when one of
/// its connections becomes readable or writable (engine::arm). Data does not
/// flow through either: each peer's link actor writes and reads its link
/// (collectives/engine/peer_link.hpp) in the turns the engine's leader
/// gives it, on whichever thread drives the engine (the caller's, the op
/// thread or the progress actor; see docs/ARCHITECTURE.md, "Who drives").

#include "transport/tcp/readiness.hpp"

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
  /// Shared: connections keep it alive as long as they exist.
  const std::shared_ptr<readiness_monitor>& monitor() const noexcept { return monitor_; }

private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
  std::shared_ptr<readiness_monitor> monitor_ = std::make_shared<readiness_monitor>();
};

} // namespace mccl::transport
