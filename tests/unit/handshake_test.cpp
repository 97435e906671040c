// The acceptor's handshake check on whole frames, as a stray or a peer of
// another job would send them: each bad handshake is refused with a reason
// naming what was wrong, and only the expected peer gets in.
#include "transport/wire/handshake.hpp"

#include <gtest/gtest.h>

using namespace mccl;
using namespace mccl::transport;

namespace {

// Rank 1 of 4 in communicator 7; rank 3 has already connected.
const handshake_expectations expect{1, 4, 7, "job-token"};
const std::vector<bool> connected{true, false, false, true};

std::vector<uint8_t> frame(const wire::hello& hi, uint32_t comm_id = 7,
                           wire::frame_kind kind = wire::frame_kind::hello) {
  auto payload = wire::encode_hello(hi);
  wire::frame_header h;
  h.kind = kind;
  h.comm_id = comm_id;
  h.payload_len = static_cast<uint32_t>(payload.size());
  std::vector<uint8_t> out(wire::header_size);
  wire::encode_header(h, out.data());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::string vet(const std::vector<uint8_t>& bytes) {
  wire::hello out;
  return vet_handshake_bytes(expect, bytes.data(), bytes.size(), connected, out);
}

} // namespace

TEST(Handshake, ExpectedPeerIsAccepted) {
  wire::hello out;
  auto bytes = frame({2, 1, 4, "job-token"});
  EXPECT_EQ(vet_handshake_bytes(expect, bytes.data(), bytes.size(), connected, out), "");
  EXPECT_EQ(out.from_rank, 2u);
}

TEST(Handshake, WrongTokenIsRefused) {
  EXPECT_NE(vet(frame({2, 1, 4, "job-tokem"})).find("wrong job token"), std::string::npos);
  EXPECT_NE(vet(frame({2, 1, 4, ""})).find("wrong job token"), std::string::npos);
}

TEST(Handshake, RefusalNeverQuotesTheToken) {
  auto why = vet(frame({2, 1, 4, "secret-guess"}));
  EXPECT_EQ(why.find("secret-guess"), std::string::npos);
  EXPECT_EQ(why.find("job-token"), std::string::npos);
}

TEST(Handshake, WrongProtocolVersionIsRefused) {
  auto bytes = frame({2, 1, 4, "job-token"});
  bytes[4] = wire::protocol_version + 1;
  EXPECT_NE(vet(bytes).find("version"), std::string::npos) << vet(bytes);
}

TEST(Handshake, DuplicateRankIsRefused) {
  EXPECT_NE(vet(frame({3, 1, 4, "job-token"})).find("duplicate connection from rank 3"),
            std::string::npos);
}

TEST(Handshake, RankOutsideTheWorldIsRefused) {
  // A hello whose ranks are consistent with its own (larger) world...
  EXPECT_NE(vet(frame({5, 1, 8, "job-token"})).find("world size 8"), std::string::npos);
  // ... and one that is not even consistent with itself (built by hand).
  auto bytes = frame({2, 1, 4, "job-token"});
  bytes[wire::header_size] = 9; // from_rank 9 of world 4
  EXPECT_NE(vet(bytes).find("not below world_size 4"), std::string::npos) << vet(bytes);
}

TEST(Handshake, LowerRankMustNotDial) {
  EXPECT_NE(vet(frame({0, 1, 4, "job-token"})).find("must not dial"), std::string::npos);
}

TEST(Handshake, WrongTargetOrCommunicatorIsRefused) {
  EXPECT_NE(vet(frame({2, 0, 4, "job-token"})).find("addressed to rank 0"), std::string::npos);
  EXPECT_NE(vet(frame({2, 1, 4, "job-token"}, 8)).find("communicator id 8"), std::string::npos);
  EXPECT_NE(vet(frame({2, 1, 4, "job-token"}, 7, wire::frame_kind::hello_ack)).find("expected a hello"),
            std::string::npos);
}

TEST(Handshake, TruncatedOrOversizedIsRefused) {
  auto bytes = frame({2, 1, 4, "job-token"});
  for (std::size_t n : {std::size_t{0}, std::size_t{10}, wire::header_size, bytes.size() - 1})
    EXPECT_FALSE(vet(std::vector<uint8_t>(bytes.begin(), bytes.begin() + n)).empty()) << n;
  bytes[32] = 0xFF; // payload_len far past the handshake bound
  bytes[33] = 0xFF;
  EXPECT_NE(vet(bytes).find("exceeds the limit"), std::string::npos) << vet(bytes);
}

TEST(Handshake, TokensCompareByValue) {
  EXPECT_TRUE(tokens_equal("abc", "abc"));
  EXPECT_TRUE(tokens_equal("", ""));
  EXPECT_FALSE(tokens_equal("abc", "abd"));
  EXPECT_FALSE(tokens_equal("abc", "abcd"));
}

// ---- resuming a lost link (MCCL_RECONNECT_MS) -----------------------------------

namespace {

std::vector<uint8_t> resume_frame(const wire::hello& hi, uint32_t aux = resume_marker,
                                  uint32_t comm_id = 7) {
  auto bytes = frame(hi, comm_id);
  wire::frame_header h;
  h.kind = wire::frame_kind::hello;
  h.comm_id = comm_id;
  h.aux = aux;
  h.payload_len = static_cast<uint32_t>(bytes.size() - wire::header_size);
  wire::encode_header(h, bytes.data());
  return bytes;
}

// Rank 1 of 4: the link to rank 3 was lost and waits to be resumed.
const std::vector<bool> resumable{false, false, false, true};

std::string vet_resume(const std::vector<uint8_t>& bytes) {
  wire::hello out;
  return vet_resume_bytes(expect, bytes.data(), bytes.size(), resumable, out);
}

} // namespace

TEST(Handshake, ResumeOfALostLinkIsAccepted) {
  wire::hello out;
  auto bytes = resume_frame({3, 1, 4, "job-token"});
  EXPECT_EQ(vet_resume_bytes(expect, bytes.data(), bytes.size(), resumable, out), "");
  EXPECT_EQ(out.from_rank, 3u);
}

TEST(Handshake, ResumeOfALinkThatIsUpIsRefused) {
  auto why = vet_resume(resume_frame({2, 1, 4, "job-token"}));
  EXPECT_NE(why.find("rank 2 asks to resume its link, but that link is not waiting"),
            std::string::npos) << why;
}

TEST(Handshake, ResumeNeedsTheTokenCommunicatorAndRanksOfAFreshHello) {
  EXPECT_NE(vet_resume(resume_frame({3, 1, 4, "guess"})).find("wrong job token"), std::string::npos);
  EXPECT_NE(vet_resume(resume_frame({3, 1, 4, "job-token"}, resume_marker, 8)).find("communicator id 8"),
            std::string::npos);
  EXPECT_NE(vet_resume(resume_frame({3, 2, 4, "job-token"})).find("addressed to rank 2"),
            std::string::npos);
  // Rank 0 was dialled by rank 1: only rank 1 may dial it again, never the reverse.
  EXPECT_NE(vet_resume(resume_frame({0, 1, 4, "job-token"})).find("must not dial rank 1"),
            std::string::npos);
  EXPECT_NE(vet_resume(resume_frame({3, 1, 5, "job-token"})).find("world size 5"), std::string::npos);
}

TEST(Handshake, FreshHelloAndResumeAreNotInterchangeable) {
  // A fresh hello once the mesh is built, where only resumes are expected.
  auto why = vet_resume(resume_frame({3, 1, 4, "job-token"}, 0));
  EXPECT_NE(why.find("sent a fresh hello"), std::string::npos) << why;
  // A resume while the mesh is being built.
  why = vet(resume_frame({2, 1, 4, "job-token"}));
  EXPECT_NE(why.find("asks to resume a link that was never established"), std::string::npos) << why;
}
