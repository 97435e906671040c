#pragma once
/// mccl's rendezvous store over the c10d::Store that torch.distributed hands
/// the backend creator, so mccl needs no port or environment of its own:
/// whatever init_method gloo would rendezvous through (file://, tcp://,
/// env://), mccl's ranks publish their endpoints there too.

#include <mccl/store.hpp>
#include <mccl/error.hpp>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <optional>
#include <string>
#include <vector>

namespace mccl::torch_backend {

class c10d_store_adapter : public mccl::store {
public:
  explicit c10d_store_adapter(c10::intrusive_ptr<::c10d::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const std::string& value) override {
    try {
      store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
    } catch (const std::exception& e) {
      throw error(errc::rendezvous_failed, "setting key \"" + key + "\" in the torch.distributed store: "
                                             + e.what());
    }
  }

  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    try {
      // wait() bounds the wait by our timeout rather than the store's own.
      store_->wait({key}, timeout);
      auto v = store_->get(key);
      return std::string(v.begin(), v.end());
    } catch (const std::exception& e) {
      throw error(errc::rendezvous_failed, "key \"" + key + "\" was not published in the "
                                             "torch.distributed store within "
                                             + std::to_string(timeout.count()) + " ms: " + e.what());
    }
  }

  /// Without waiting: check() tells "not set" from "cannot ask".
  std::optional<std::string> try_get(const std::string& key) override {
    try {
      if (!store_->check({key}))
        return std::nullopt;
      auto v = store_->get(key);
      return std::string(v.begin(), v.end());
    } catch (const std::exception& e) {
      throw error(errc::rendezvous_failed, "reading key \"" + key + "\" in the torch.distributed store: "
                                             + e.what());
    }
  }

  /// Atomic, through the store's compare-and-set (an empty expected value
  /// sets a key that does not exist): two processes claiming one rank at
  /// once cannot both win.
  std::string set_if_absent(const std::string& key, const std::string& value) override {
    try {
      auto held = store_->compareSet(key, {}, std::vector<uint8_t>(value.begin(), value.end()));
      return std::string(held.begin(), held.end());
    } catch (const std::exception& e) {
      throw error(errc::rendezvous_failed, "claiming key \"" + key + "\" in the torch.distributed store: "
                                             + e.what());
    }
  }

private:
  c10::intrusive_ptr<::c10d::Store> store_;
};

} // namespace mccl::torch_backend
