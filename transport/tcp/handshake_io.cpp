#include "transport/tcp/handshake_io.hpp"

#include <mccl/error.hpp>
#include "transport/wire/handshake.hpp"

#include <algorithm>

namespace mccl::transport {

std::string rank_str(int r) { return "rank " + std::to_string(r); }

uint32_t stripes_in(const wire::frame_header& h) { return std::max<uint32_t>(h.step, 1); }

std::string send_control(tcp::socket& s, wire::frame_kind kind, uint32_t comm_id,
                         const std::vector<uint8_t>& payload, clock::time_point deadline,
                         const stripe_tag& tag, uint32_t aux) {
  wire::frame_header h;
  h.kind = kind;
  h.comm_id = comm_id;
  h.aux = aux;
  h.seq = static_cast<uint64_t>(tag.setting);
  h.step = static_cast<uint32_t>(tag.count);
  h.chunk = static_cast<uint32_t>(tag.index);
  h.payload_len = static_cast<uint32_t>(payload.size());
  std::vector<uint8_t> bytes(wire::header_size + payload.size());
  wire::encode_header(h, bytes.data());
  std::copy(payload.begin(), payload.end(), bytes.begin() + wire::header_size);
  return write_all(s, bytes.data(), bytes.size(), deadline);
}

std::string read_control(tcp::socket& s, clock::time_point deadline, wire::frame_header& h,
                         std::vector<uint8_t>& payload) {
  uint8_t head[wire::header_size];
  auto err = read_exact(s, head, sizeof head, deadline);
  if (!err.empty())
    return err;
  auto res = wire::decode_header(head, sizeof head, max_handshake_payload);
  if (res.status != wire::decode_status::ok)
    return "malformed frame: " + res.reason;
  h = res.header;
  payload.resize(h.payload_len);
  return read_exact(s, payload.data(), payload.size(), deadline);
}

std::vector<std::pair<std::string, tcp::endpoint>> parse_endpoints(const std::string& text, int peer) {
  std::vector<std::pair<std::string, tcp::endpoint>> out;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    auto end = std::min(text.find(',', begin), text.size());
    auto item = text.substr(begin, end - begin);
    begin = end + 1;
    auto colon = item.rfind(':');
    if (colon == std::string::npos || colon + 1 == item.size())
      throw error(errc::rendezvous_failed, rank_str(peer) + " published a malformed endpoint \""
                                             + text + "\"");
    auto host = item.substr(0, colon);
    if (host.size() > 2 && host.front() == '[')
      host = host.substr(1, host.size() - 2);
    out.emplace_back(item, tcp::endpoint(resolve_host(host, "endpoint of " + rank_str(peer)),
                                         static_cast<unsigned short>(std::stoi(item.substr(colon + 1)))));
  }
  return out;
}

tcp::endpoint parse_endpoint(const std::string& text, int peer) {
  return parse_endpoints(text, peer).front().second;
}

} // namespace mccl::transport
