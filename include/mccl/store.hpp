#pragma once
/// The rendezvous key-value store: ranks publish their endpoints (and rank 0
/// the job token) under keys and read each other's. It is an interface so an
/// embedder can plug in its own (the PyTorch binding passes c10d's Store).

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <string>

namespace mccl {

class store {
public:
  virtual ~store() = default;

  /// Publishes key = value (overwrites). Throws mccl::error(rendezvous_failed).
  virtual void set(const std::string& key, const std::string& value) = 0;

  /// Returns the value of key, waiting until some rank sets it; throws
  /// mccl::error(rendezvous_failed) naming the key after `timeout`.
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
};

using store_ptr = std::shared_ptr<store>;

/// A store inside one process, for ranks that are threads of one program
/// (tests, or several communicators of one process).
class memory_store : public store {
public:
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

} // namespace mccl
