// libFuzzer target: the frame decoder (transport/wire/frame.hpp) on arbitrary
// bytes. Besides "no crash, no sanitizer report" it checks the decoder's
// promises: a header it accepts respects the payload bound and re-encodes to
// the same bytes; payload decoders that accept something round-trip it; and
// encode_text always yields what decode_text accepts.
#include "transport/wire/frame.hpp"

#include <cstdlib>
#include <cstring>

using namespace mccl;

namespace {

void require(bool ok) {
  if (!ok)
    std::abort(); // libFuzzer reports the input that broke a promise
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  // The first byte picks the receiver's data-frame limit, so small and large
  // chunk settings are both exercised.
  uint32_t max_payload = size > 0 ? (1u << (data[0] % 31)) : 4096;
  auto res = wire::decode_header(data, size, max_payload);
  if (size < wire::header_size) {
    require(res.status == wire::decode_status::need_more);
  } else if (res.status == wire::decode_status::ok) {
    require(res.header.payload_len <= wire::max_payload_limit);
    if (res.header.kind == wire::frame_kind::data)
      require(res.header.payload_len <= max_payload);
    else
      require(res.header.payload_len <= wire::max_control_payload);
    uint8_t again[wire::header_size];
    wire::encode_header(res.header, again);
    require(std::memcmp(again, data, wire::header_size) == 0);
  } else {
    require(!res.reason.empty());
  }

  const uint8_t* body = size > wire::header_size ? data + wire::header_size : data;
  std::size_t body_len = size > wire::header_size ? size - wire::header_size : size;
  std::string why;
  if (auto hi = wire::decode_hello(body, body_len, &why)) {
    auto bytes = wire::encode_hello(*hi);
    require(bytes.size() == body_len && std::memcmp(bytes.data(), body, body_len) == 0);
  } else {
    require(!why.empty());
  }
  why.clear();
  if (auto text = wire::decode_text(body, body_len, &why))
    require(text->size() == body_len);
  else
    require(!why.empty());
  auto encoded = wire::encode_text(std::string(reinterpret_cast<const char*>(body), body_len));
  require(encoded.size() <= wire::max_text_size);
  require(wire::decode_text(encoded.data(), encoded.size(), nullptr).has_value());
  return 0;
}
