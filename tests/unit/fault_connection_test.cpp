// The fault-injecting connection decorator (transport/fault/fault_connection.hpp)
// over the simulated network: each fault kind does to the frame stream what
// it says, the faults are recorded, and the same seed injects the same faults.

#include "transport/fault/fault_connection.hpp"
#include "transport/wire/frame_queue.hpp"
#include "transport/sim/sim_network.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <thread>

using namespace mccl;
using namespace mccl::transport;

namespace {

struct out_frame {
  uint8_t header[wire::header_size] = {};
  const uint8_t* data = nullptr;
  std::size_t len = 0;
  std::size_t written = 0;
};

struct received {
  wire::frame_header h;
  std::vector<uint8_t> payload;
};

/// Rank 0 sends `frames` data frames (chunk i, 256 bytes of value i) to rank
/// 1 through the decorator, as a link would; returns what rank 1 reads.
class fault_pipe {
public:
  explicit fault_pipe(const std::string& scenario_json)
    : net_(true), recorder_(std::make_shared<fault_recorder>(0, "test", 0, "/dev/null/unused")) {
    auto [a, b] = net_.connect(0, 1);
    injector_ = std::make_shared<fault_injector>(parse_fault_scenario(scenario_json, "test"), 0, recorder_);
    sender_ = injector_->wrap(a, 1);
    receiver_ = b;
  }

  io_result send(uint32_t frames, uint32_t seq = 0) {
    payloads_.resize(frames);
    for (uint32_t i = 0; i < frames; ++i) {
      payloads_[i].assign(256, static_cast<uint8_t>(i));
      out_frame f;
      wire::frame_header h;
      h.kind = wire::frame_kind::data;
      h.seq = seq;
      h.chunk = i;
      h.payload_len = 256;
      wire::encode_header(h, f.header);
      f.data = payloads_[i].data();
      f.len = 256;
      queue_.push_back(f);
    }
    return flush();
  }

  io_result flush() {
    io_result last;
    for (int spins = 0; !queue_.empty() && spins < 1000; ++spins) {
      iovec iov[32];
      int n = gather_frames(queue_, iov, 32);
      last = sender_->write_some(iov, n);
      if (!last.error.empty())
        return last;
      account_written(queue_, last.bytes, [](out_frame&) {});
      if (last.bytes == 0)
        break;
    }
    // What the decorator still holds goes out when the holder parks.
    sender_->notify_when_ready(false, [] {});
    return last;
  }

  std::vector<received> receive() {
    std::vector<uint8_t> bytes(1 << 20);
    std::size_t have = 0;
    for (;;) {
      auto r = receiver_->read_some(bytes.data() + have, bytes.size() - have);
      if (r.bytes == 0)
        break;
      have += r.bytes;
    }
    std::vector<received> out;
    std::size_t at = 0;
    while (have - at >= wire::header_size) {
      auto res = wire::decode_header(bytes.data() + at, have - at, 1u << 20);
      EXPECT_EQ(res.status, wire::decode_status::ok) << res.reason;
      auto p = bytes.data() + at + wire::header_size;
      out.push_back(received{res.header, std::vector<uint8_t>(p, p + res.header.payload_len)});
      at += wire::header_size + res.header.payload_len;
    }
    EXPECT_EQ(at, have) << "a partial frame arrived";
    return out;
  }

  std::vector<uint32_t> chunks(const std::vector<received>& got) {
    std::vector<uint32_t> c;
    for (auto& r : got)
      c.push_back(r.h.chunk);
    return c;
  }

  sim_network net_;
  std::shared_ptr<fault_recorder> recorder_;
  std::shared_ptr<fault_injector> injector_;
  connection_ptr sender_, receiver_;
  std::vector<std::vector<uint8_t>> payloads_;
  std::deque<out_frame> queue_;
};

int differing_bits(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int n = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    n += __builtin_popcount(a[i] ^ b[i]);
  return n;
}

} // namespace

TEST(FaultConnection, NoMatchingFaultPassesEverything) {
  fault_pipe p(R"({"faults": [{"kind": "drop", "link": "1->0"}, {"kind": "drop", "link": "0->1", "seq": 9}]})");
  p.send(5);
  auto got = p.receive();
  EXPECT_EQ(p.chunks(got), (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  for (auto& r : got)
    EXPECT_EQ(r.payload, p.payloads_[r.h.chunk]);
  EXPECT_EQ(p.recorder_->fault_count(), 0u);
}

TEST(FaultConnection, CorruptFlipsExactlyTheBitsAsked) {
  fault_pipe p(R"({"faults": [{"kind": "corrupt", "link": "0->1", "chunk": 2, "bits": 3}]})");
  p.send(4);
  auto got = p.receive();
  ASSERT_EQ(p.chunks(got), (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(differing_bits(got[2].payload, p.payloads_[2]), 3);
  EXPECT_EQ(got[1].payload, p.payloads_[1]);
  EXPECT_EQ(p.recorder_->fault_count(), 1u);
  EXPECT_NE(p.recorder_->text().find("3 bit flip(s)"), std::string::npos) << p.recorder_->text();
}

TEST(FaultConnection, CorruptBytesChangesThem) {
  fault_pipe p(R"({"faults": [{"kind": "corrupt", "link": "0->1", "chunk": 0, "bytes": 5}]})");
  p.send(1);
  auto got = p.receive();
  ASSERT_EQ(got.size(), 1u);
  int changed = 0;
  for (std::size_t i = 0; i < 256; ++i)
    changed += got[0].payload[i] != p.payloads_[0][i];
  EXPECT_GE(changed, 1); // positions may repeat
  EXPECT_LE(changed, 5);
}

TEST(FaultConnection, DropDuplicateReorder) {
  {
    fault_pipe p(R"({"faults": [{"kind": "drop", "link": "0->1", "chunk": 1}]})");
    p.send(3);
    EXPECT_EQ(p.chunks(p.receive()), (std::vector<uint32_t>{0, 2}));
  }
  {
    fault_pipe p(R"({"faults": [{"kind": "duplicate", "link": "0->1", "chunk": 1}]})");
    p.send(3);
    EXPECT_EQ(p.chunks(p.receive()), (std::vector<uint32_t>{0, 1, 1, 2}));
  }
  {
    fault_pipe p(R"({"faults": [{"kind": "reorder", "link": "0->1", "chunk": 1}]})");
    p.send(4);
    EXPECT_EQ(p.chunks(p.receive()), (std::vector<uint32_t>{0, 2, 1, 3}));
  }
  {
    // The last frame held back still goes out once the sender parks.
    fault_pipe p(R"({"faults": [{"kind": "reorder", "link": "0->1", "chunk": 2}]})");
    p.send(3);
    EXPECT_EQ(p.chunks(p.receive()), (std::vector<uint32_t>{0, 1, 2}));
  }
}

TEST(FaultConnection, DelayHoldsTheStreamThenLetsItGo) {
  fault_pipe p(R"({"faults": [{"kind": "delay", "link": "0->1", "chunk": 1, "ms": 40}]})");
  auto start = std::chrono::steady_clock::now();
  p.send(3);
  EXPECT_EQ(p.chunks(p.receive()), (std::vector<uint32_t>{0}));
  while (!p.queue_.empty() && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    p.flush();
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(40));
  EXPECT_EQ(p.chunks(p.receive()), (std::vector<uint32_t>{1, 2}));
}

TEST(FaultConnection, CloseFailsTheSenderAndEndsTheStream) {
  fault_pipe p(R"({"faults": [{"kind": "close", "link": "0->1", "chunk": 1}]})");
  auto r = p.send(3);
  EXPECT_TRUE(r.closed);
  EXPECT_NE(r.error.find("closed by fault injection"), std::string::npos) << r.error;
  EXPECT_EQ(p.chunks(p.receive()), (std::vector<uint32_t>{0}));
  uint8_t byte;
  EXPECT_TRUE(p.receiver_->read_some(&byte, 1).closed);
}

TEST(FaultConnection, SameSeedSameFaults) {
  auto corrupted = [](uint64_t seed) {
    fault_pipe p(R"({"seed": )" + std::to_string(seed)
                 + R"(, "faults": [{"kind": "corrupt", "link": "0->1", "probability": 0.3, "count": 0}]})");
    p.send(200);
    std::vector<std::pair<uint32_t, std::vector<uint8_t>>> out;
    for (auto& r : p.receive())
      if (r.payload != p.payloads_[r.h.chunk])
        out.emplace_back(r.h.chunk, r.payload);
    return out;
  };
  auto a = corrupted(11);
  auto b = corrupted(11);
  auto c = corrupted(12);
  EXPECT_GT(a.size(), 20u);
  EXPECT_LT(a.size(), 120u);
  EXPECT_EQ(a, b); // same frames, same bits
  EXPECT_NE(a, c);
}

TEST(FaultConnection, CountLimitsHowOftenAFaultFires) {
  fault_pipe p(R"({"faults": [{"kind": "drop", "link": "0->1", "count": 2}]})");
  p.send(5);
  EXPECT_EQ(p.chunks(p.receive()), (std::vector<uint32_t>{2, 3, 4}));
  EXPECT_EQ(p.recorder_->fault_count(), 2u);
}
