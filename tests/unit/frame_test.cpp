#include "transport/wire/frame.hpp"

#include <atomic>
#include <cstdlib>
#include <new>
#include <type_traits>

#include <gtest/gtest.h>

#include <mccl/error.hpp>

using namespace mccl::wire;

// -- allocation probe ----------------------------------------------------------
// Replacing the global operator new lets the tests show that a decoder never
// allocates anything near a size a hostile header claims. The probe is only
// armed inside alloc_probe scopes on the testing thread; otherwise it just
// forwards to malloc.

namespace {

thread_local bool probe_armed = false;
thread_local std::size_t probe_largest = 0;

struct alloc_probe {
  alloc_probe() {
    probe_largest = 0;
    probe_armed = true;
  }
  ~alloc_probe() { probe_armed = false; }
  std::size_t largest() const { return probe_largest; }
};

void* probed_alloc(std::size_t n) {
  if (probe_armed && n > probe_largest)
    probe_largest = n;
  if (void* p = std::malloc(n == 0 ? 1 : n))
    return p;
  throw std::bad_alloc();
}

} // namespace

void* operator new(std::size_t n) { return probed_alloc(n); }
void* operator new[](std::size_t n) { return probed_alloc(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return probed_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return probed_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

std::vector<uint8_t> encoded(const frame_header& h) {
  std::vector<uint8_t> b(header_size);
  encode_header(h, b.data());
  return b;
}

frame_header sample(frame_kind kind) {
  frame_header h;
  h.kind = kind;
  h.flags = flag_crc;
  h.comm_id = 0xA1B2C3D4;
  h.aux = 0x01020304;
  h.seq = 0x1122334455667788ull;
  h.step = 0xCAFEBABE;
  h.chunk = 0x0BADF00D;
  h.payload_len = kind == frame_kind::heartbeat ? 0 : (kind == frame_kind::data ? 4096 : 100);
  h.crc = 0xE3069283;
  h.op_count = 0x0102030405060708ull;
  h.op_desc = 1;
  h.op_arg = 0xDEADBEEF;
  return h;
}

constexpr frame_kind all_kinds[] = {frame_kind::hello, frame_kind::hello_ack, frame_kind::refuse,
                                    frame_kind::data,  frame_kind::abort,     frame_kind::heartbeat,
                                    frame_kind::bye,   frame_kind::revoke};

constexpr uint32_t cfg_max = 1u << 20;

} // namespace

TEST(frame, alloc_probe_sees_allocations) {
  // Guards the no-allocation tests below against a probe that never fires.
  std::size_t largest;
  {
    alloc_probe probe;
    std::vector<uint8_t> v(5000);
    largest = probe.largest();
  }
  EXPECT_GE(largest, 5000u);
}

TEST(frame, decode_header_is_noexcept) {
  static_assert(noexcept(decode_header(nullptr, 0, 0)));
  static_assert(noexcept(encode_header(frame_header{}, nullptr)));
  SUCCEED();
}

TEST(frame, exact_byte_layout) {
  auto b = encoded(sample(frame_kind::data));
  const uint8_t want[header_size] = {
    'M',  'C',  'C',  'L',  2,    4,    0x01, 0x00, // magic version kind flags
    0xD4, 0xC3, 0xB2, 0xA1, 0x04, 0x03, 0x02, 0x01, // comm_id aux
    0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // seq
    0xBE, 0xBA, 0xFE, 0xCA, 0x0D, 0xF0, 0xAD, 0x0B, // step chunk
    0x00, 0x10, 0x00, 0x00, 0x83, 0x92, 0x06, 0xE3, // payload_len crc
    0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, // op_count
    0x01, 0x00, 0x00, 0x00, 0xEF, 0xBE, 0xAD, 0xDE, // op_desc op_arg
  };
  for (std::size_t i = 0; i < header_size; ++i)
    EXPECT_EQ(b[i], want[i]) << "byte " << i;
}

TEST(frame, round_trip_every_kind) {
  for (auto kind : all_kinds) {
    auto h = sample(kind);
    for (uint16_t flags : {uint16_t{0}, uint16_t{flag_crc}}) {
      h.flags = flags;
      auto b = encoded(h);
      auto r = decode_header(b.data(), b.size(), cfg_max);
      ASSERT_EQ(r.status, decode_status::ok) << to_string(kind) << ": " << r.reason;
      EXPECT_TRUE(r.reason.empty());
      EXPECT_EQ(r.header.kind, kind);
      EXPECT_EQ(r.header.flags, flags);
      EXPECT_EQ(r.header.comm_id, h.comm_id);
      EXPECT_EQ(r.header.aux, h.aux);
      EXPECT_EQ(r.header.seq, h.seq);
      EXPECT_EQ(r.header.step, h.step);
      EXPECT_EQ(r.header.chunk, h.chunk);
      EXPECT_EQ(r.header.payload_len, h.payload_len);
      EXPECT_EQ(r.header.op_count, h.op_count);
      EXPECT_EQ(r.header.op_desc, h.op_desc);
      EXPECT_EQ(r.header.op_arg, h.op_arg);
      EXPECT_EQ(r.header.crc, h.crc);
    }
  }
  EXPECT_STREQ(to_string(frame_kind::hello_ack), "hello_ack");
  EXPECT_STREQ(to_string(static_cast<frame_kind>(0)), "unknown");
}

TEST(frame, round_trip_extreme_values) {
  frame_header h;
  h.comm_id = 0xFFFFFFFF;
  h.aux = 0xFFFFFFFF;
  h.seq = ~0ull;
  h.step = 0xFFFFFFFF;
  h.chunk = 0xFFFFFFFF;
  h.payload_len = max_payload_limit;
  h.crc = 0xFFFFFFFF;
  auto b = encoded(h);
  auto r = decode_header(b.data(), b.size(), 0xFFFFFFFF);
  ASSERT_EQ(r.status, decode_status::ok) << r.reason;
  EXPECT_EQ(r.header.seq, ~0ull);
  EXPECT_EQ(r.header.payload_len, max_payload_limit);
}

TEST(frame, truncated_header_needs_more) {
  auto b = encoded(sample(frame_kind::data));
  for (std::size_t n = 0; n < header_size; ++n) {
    auto r = decode_header(b.data(), n, cfg_max);
    EXPECT_EQ(r.status, decode_status::need_more) << "available " << n;
  }
  EXPECT_EQ(decode_header(nullptr, 0, cfg_max).status, decode_status::need_more);
  // Extra bytes after the header (the payload) are not the header's concern.
  b.resize(100);
  EXPECT_EQ(decode_header(b.data(), b.size(), cfg_max).status, decode_status::ok);
}

TEST(frame, bad_magic_version_kind_flags_rejected_with_reason) {
  auto good = encoded(sample(frame_kind::data));

  auto b = good;
  b[0] = 'G';
  auto r = decode_header(b.data(), b.size(), cfg_max);
  EXPECT_EQ(r.status, decode_status::bad_magic);
  EXPECT_NE(r.reason.find("magic"), std::string::npos) << r.reason;

  b = good;
  b[4] = 1;
  r = decode_header(b.data(), b.size(), cfg_max);
  EXPECT_EQ(r.status, decode_status::bad_version);
  EXPECT_NE(r.reason.find("version 1"), std::string::npos) << r.reason;

  for (uint8_t kind : {uint8_t{0}, uint8_t{11}, uint8_t{255}}) {
    b = good;
    b[5] = kind;
    r = decode_header(b.data(), b.size(), cfg_max);
    EXPECT_EQ(r.status, decode_status::bad_kind);
    EXPECT_NE(r.reason.find("kind " + std::to_string(kind)), std::string::npos) << r.reason;
  }

  for (uint16_t flags : {uint16_t{32}, uint16_t{63}, uint16_t{0x8000}, uint16_t{0xFFFF}}) {
    b = good;
    b[6] = static_cast<uint8_t>(flags);
    b[7] = static_cast<uint8_t>(flags >> 8);
    r = decode_header(b.data(), b.size(), cfg_max);
    EXPECT_EQ(r.status, decode_status::bad_flags) << flags;
    EXPECT_NE(r.reason.find("flags"), std::string::npos) << r.reason;
  }
}

TEST(frame, oversized_payload_rejected_without_allocating_it) {
  auto h = sample(frame_kind::data);
  h.payload_len = 0xFFFFFFFF;
  auto b = encoded(h);
  for (uint32_t max : {cfg_max, 0xFFFFFFFFu}) {
    std::size_t largest;
    decode_result r{decode_status::ok, {}, {}};
    {
      alloc_probe probe;
      r = decode_header(b.data(), b.size(), max);
      largest = probe.largest();
    }
    EXPECT_EQ(r.status, decode_status::too_large);
    EXPECT_NE(r.reason.find("payload_len 4294967295"), std::string::npos) << r.reason;
    // Only the reason string may be allocated.
    EXPECT_LT(largest, 256u);
  }

  // Configured limit, and the hard cap above it.
  h.payload_len = cfg_max + 1;
  b = encoded(h);
  EXPECT_EQ(decode_header(b.data(), b.size(), cfg_max).status, decode_status::too_large);
  h.payload_len = cfg_max;
  b = encoded(h);
  EXPECT_EQ(decode_header(b.data(), b.size(), cfg_max).status, decode_status::ok);
  h.payload_len = max_payload_limit + 1;
  b = encoded(h);
  EXPECT_EQ(decode_header(b.data(), b.size(), 0xFFFFFFFF).status, decode_status::too_large);
}

TEST(frame, control_and_heartbeat_payload_caps) {
  for (auto kind : {frame_kind::hello, frame_kind::hello_ack, frame_kind::refuse,
                    frame_kind::abort, frame_kind::bye}) {
    auto h = sample(kind);
    h.payload_len = max_control_payload;
    auto b = encoded(h);
    EXPECT_EQ(decode_header(b.data(), b.size(), cfg_max).status, decode_status::ok);
    h.payload_len = max_control_payload + 1;
    b = encoded(h);
    auto r = decode_header(b.data(), b.size(), cfg_max);
    EXPECT_EQ(r.status, decode_status::too_large) << to_string(kind);
    EXPECT_NE(r.reason.find(to_string(kind)), std::string::npos) << r.reason;
  }
  auto h = sample(frame_kind::heartbeat);
  h.payload_len = 1;
  auto b = encoded(h);
  EXPECT_EQ(decode_header(b.data(), b.size(), cfg_max).status, decode_status::too_large);
}

TEST(frame, hello_round_trip) {
  for (std::string token : {std::string(), std::string("s3cret"), std::string(64, 'x')}) {
    hello h{3, 7, 8, token};
    auto bytes = encode_hello(h);
    EXPECT_EQ(bytes.size(), 14 + token.size());
    std::string why;
    auto d = decode_hello(bytes.data(), bytes.size(), &why);
    ASSERT_TRUE(d.has_value()) << why;
    EXPECT_EQ(d->from_rank, 3u);
    EXPECT_EQ(d->to_rank, 7u);
    EXPECT_EQ(d->world_size, 8u);
    EXPECT_EQ(d->token, token);
  }
  auto bytes = encode_hello({0x01020304, 0x05060708, 0x7FFFFFFF, "ab"});
  const uint8_t want[] = {4, 3, 2, 1, 8, 7, 6, 5, 0xFF, 0xFF, 0xFF, 0x7F, 2, 0, 'a', 'b'};
  ASSERT_EQ(bytes.size(), sizeof(want));
  for (std::size_t i = 0; i < sizeof(want); ++i)
    EXPECT_EQ(bytes[i], want[i]) << "byte " << i;
}

TEST(frame, encode_hello_rejects_bad_input) {
  EXPECT_THROW(encode_hello({0, 1, 2, std::string(65, 'x')}), mccl::error);
  EXPECT_THROW(encode_hello({2, 1, 2, "t"}), mccl::error);
  EXPECT_THROW(encode_hello({0, 0, 0, "t"}), mccl::error);
}

TEST(frame, hello_truncated_oversized_inconsistent) {
  auto good = encode_hello({1, 2, 4, "token"});
  std::string why;
  for (std::size_t n = 0; n < good.size(); ++n) {
    why.clear();
    EXPECT_FALSE(decode_hello(good.data(), n, &why).has_value()) << "len " << n;
    EXPECT_FALSE(why.empty());
  }
  auto longer = good;
  longer.push_back('!');
  EXPECT_FALSE(decode_hello(longer.data(), longer.size(), &why).has_value());
  EXPECT_NE(why.find("token_len 5"), std::string::npos) << why;

  auto bad = good;
  bad[8] = 2; // world_size 2 < to_rank + 1
  EXPECT_FALSE(decode_hello(bad.data(), bad.size(), &why).has_value());
  bad = good;
  bad[8] = 0; // world_size 0
  EXPECT_FALSE(decode_hello(bad.data(), bad.size(), &why).has_value());
  EXPECT_FALSE(decode_hello(nullptr, 0, nullptr).has_value());
}

TEST(frame, hello_token_len_beyond_payload_allocates_nothing_large) {
  // token_len claims 65535 bytes; 20 follow.
  std::vector<uint8_t> p = {1, 0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 0xFF, 0xFF};
  p.resize(p.size() + 20, 'a');
  std::string why;
  std::size_t largest;
  bool decoded;
  {
    alloc_probe probe;
    decoded = decode_hello(p.data(), p.size(), &why).has_value();
    largest = probe.largest();
  }
  EXPECT_FALSE(decoded);
  EXPECT_NE(why.find("65535"), std::string::npos) << why;
  EXPECT_LT(largest, 256u);

  // token_len within the 64-byte cap but past the end: refused the same way.
  p.resize(14 + 10);
  p[12] = 60;
  p[13] = 0;
  EXPECT_FALSE(decode_hello(p.data(), p.size(), &why).has_value());
  EXPECT_NE(why.find("token_len 60"), std::string::npos) << why;
}

TEST(frame, text_round_trip) {
  for (std::string s : {std::string(), std::string("rank 3 timed out in allreduce seq 17"),
                        std::string("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
                        std::string(max_text_size, 'r')}) {
    auto bytes = encode_text(s);
    std::string why;
    auto d = decode_text(bytes.data(), bytes.size(), &why);
    ASSERT_TRUE(d.has_value()) << why;
    EXPECT_EQ(*d, s);
  }
}

TEST(frame, encode_text_never_fails) {
  // Too long: cut at a sequence boundary under the cap.
  std::string s(max_text_size - 1, 'a');
  s += "\xE2\x82\xAC";
  auto bytes = encode_text(s);
  EXPECT_EQ(bytes.size(), max_text_size - 1);
  EXPECT_TRUE(decode_text(bytes.data(), bytes.size(), nullptr).has_value());
  // Invalid bytes become '?'.
  bytes = encode_text(std::string("a\xFF" "b\xC3"));
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "a?b?");
}

TEST(frame, text_oversized_or_invalid_rejected) {
  std::vector<uint8_t> big(max_text_size + 1, 'x');
  std::string why;
  std::size_t largest;
  bool decoded;
  {
    alloc_probe probe;
    decoded = decode_text(big.data(), big.size(), &why).has_value();
    largest = probe.largest();
  }
  EXPECT_FALSE(decoded);
  EXPECT_NE(why.find("1025"), std::string::npos) << why;
  EXPECT_LT(largest, 256u);
  // A claimed length far past the buffer is refused before p is touched.
  EXPECT_FALSE(decode_text(big.data(), 0xFFFFFFFF, &why).has_value());

  for (std::string bad : {std::string("\xFF"), std::string("\xC3"), std::string("\xC0\x80"),
                          std::string("\xED\xA0\x80"), std::string("\xF4\x90\x80\x80")}) {
    std::vector<uint8_t> b(bad.begin(), bad.end());
    EXPECT_FALSE(decode_text(b.data(), b.size(), &why).has_value());
    EXPECT_NE(why.find("UTF-8"), std::string::npos) << why;
  }
}

TEST(frame, crc_covers_header_and_payload) {
  frame_header h;
  h.kind = frame_kind::data;
  h.flags = flag_crc;
  h.seq = 7;
  h.step = 2;
  h.chunk = 3;
  std::vector<uint8_t> payload(1000, 0x5A);
  h.payload_len = static_cast<uint32_t>(payload.size());
  auto crc = frame_crc(h, payload.data(), payload.size());
  h.crc = crc; // the crc field itself is not covered
  EXPECT_EQ(frame_crc(h, payload.data(), payload.size()), crc);
  auto other = h;
  other.chunk = 4;
  EXPECT_NE(frame_crc(other, payload.data(), payload.size()), crc);
  payload[999] ^= 1;
  EXPECT_NE(frame_crc(h, payload.data(), payload.size()), crc);
}

TEST(frame, crc_ack_and_nack_carry_no_payload) {
  for (auto kind : {frame_kind::crc_ack, frame_kind::crc_nack}) {
    frame_header h;
    h.kind = kind;
    h.seq = 12;
    uint8_t b[header_size];
    encode_header(h, b);
    auto r = decode_header(b, sizeof b, 1u << 20);
    EXPECT_EQ(r.status, decode_status::ok) << r.reason;
    EXPECT_EQ(r.header.seq, 12u);
    h.payload_len = 1;
    encode_header(h, b);
    EXPECT_EQ(decode_header(b, sizeof b, 1u << 20).status, decode_status::too_large);
  }
}
