#pragma once
/// The rendezvous key-value store: ranks publish their endpoints (and rank 0
/// the job token) under keys and read each other's. It is an interface so an
/// embedder can plug in its own (the PyTorch binding passes c10d's Store).

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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

  /// The value of key if some rank set it, without waiting; throws
  /// mccl::error(rendezvous_failed) when the store cannot be asked (its
  /// server is gone). The default asks get() for 1 ms and takes any error
  /// for "not set": a store that can tell the two apart overrides it.
  virtual std::optional<std::string> try_get(const std::string& key);

  /// Sets key to value unless it holds one already; returns what it holds
  /// afterwards (value when this call set it). Ranks claim their rank with
  /// it, so it must be atomic for a second claim to be refused reliably;
  /// the default (try_get, then set) is not, and a store that can do better
  /// (compare-and-set) overrides it.
  virtual std::string set_if_absent(const std::string& key, const std::string& value);
};

using store_ptr = std::shared_ptr<store>;

/// A store inside one process, for ranks that are threads of one program
/// (tests, or several communicators of one process).
class memory_store : public store {
public:
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::optional<std::string> try_get(const std::string& key) override;
  std::string set_if_absent(const std::string& key, const std::string& value) override;

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

} // namespace mccl
