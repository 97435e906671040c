// A peer's link (collectives/engine/peer_link.hpp) holds the chunks its peer
// sent for collectives this rank has not started, by sequence number, in
// the order they came, until the op starts or the communicator aborts.

#include "collectives/engine/peer_link.hpp"
#include "transport/buffer_pool.hpp"
#include "transport/sim/sim_network.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

using namespace mccl;
using namespace mccl::transport;

namespace {

struct quiet_listener : channel_listener {
  uint8_t* landing_for(int, const wire::frame_header&) override { return nullptr; }
  void on_frame(received_frame) override {}
  void on_sent(int, const frame_ref&) override {}
  void on_peer_abort(int, int, errc, const std::string&, uint64_t, bool) override {}
  void on_peer_bye(int, uint64_t) override {}
  void on_down(int, down_kind, errc, const std::string&) override {}
  void on_fatal(int, errc, const std::string&) override {}
};

received_frame chunk(uint64_t seq, uint32_t step, uint32_t len) {
  received_frame f;
  f.peer = 1;
  f.header.kind = wire::frame_kind::data;
  f.header.seq = seq;
  f.header.step = step;
  f.header.payload_len = len;
  return f;
}

class PeerLink : public ::testing::Test {
protected:
  PeerLink() {
    auto [ca, cb] = net.connect(0, 1);
    other = cb;
    channel_options o;
    o.rank = 0;
    o.peer = 1;
    o.max_payload = 1u << 20;
    o.pool = &pool;
    link = std::make_shared<peer_link>(o, ca, listener, std::chrono::steady_clock::now());
  }

  sim_network net;
  buffer_pool pool;
  quiet_listener listener;
  connection_ptr other;
  std::shared_ptr<peer_link> link;
};

} // namespace

TEST_F(PeerLink, HandsOverTheChunksOfOneOpInTheOrderTheyCame) {
  link->hold_early(chunk(5, 0, 100));
  link->hold_early(chunk(6, 0, 7));
  link->hold_early(chunk(5, 1, 20));
  link->hold_early(chunk(5, 2, 0)); // an empty chunk is still a chunk
  EXPECT_EQ(link->early_bytes(), 127u);

  std::vector<received_frame> out;
  EXPECT_EQ(link->take_early(5, out), 120u);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].header.step, 0u);
  EXPECT_EQ(out[1].header.step, 1u);
  EXPECT_EQ(out[2].header.step, 2u);
  EXPECT_EQ(link->early_bytes(), 7u);

  // Nothing more for op 5; op 6's chunk goes behind what `out` holds.
  EXPECT_EQ(link->take_early(5, out), 0u);
  EXPECT_EQ(link->take_early(6, out), 7u);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[3].header.seq, 6u);
  EXPECT_EQ(link->early_bytes(), 0u);
}

TEST_F(PeerLink, DropsWhatItHoldsWhenTheCommunicatorAborts) {
  link->hold_early(chunk(3, 0, 64));
  link->hold_early(chunk(4, 0, 64));
  link->drop_early();
  EXPECT_EQ(link->early_bytes(), 0u);
  std::vector<received_frame> out;
  EXPECT_EQ(link->take_early(3, out), 0u);
  EXPECT_EQ(link->take_early(4, out), 0u);
  EXPECT_TRUE(out.empty());
}
