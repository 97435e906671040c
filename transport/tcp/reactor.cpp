#include "transport/tcp/reactor.hpp"

#include "config/log.hpp"

namespace mccl::transport {

reactor::reactor() : guard_(boost::asio::make_work_guard(io_)) {
  thread_ = std::thread([this] {
    // A handler that throws must not kill the process: log and keep serving.
    for (;;) {
      try {
        io_.run();
        return;
      } catch (const std::exception& e) {
        MCCL_LOG(error, "reactor: handler threw: " << e.what());
      }
    }
  });
}

reactor::~reactor() {
  guard_.reset();
  io_.stop();
  if (thread_.joinable())
    thread_.join();
}

} // namespace mccl::transport
