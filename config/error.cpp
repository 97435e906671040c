#include <mccl/error.hpp>

#include <cstdio>

namespace mccl {

const char* to_string(errc code) noexcept {
  switch (code) {
    case errc::none: return "none";
    case errc::invalid_config: return "invalid_config";
    case errc::invalid_argument: return "invalid_argument";
    case errc::unsupported: return "unsupported";
    case errc::rendezvous_failed: return "rendezvous_failed";
    case errc::connect_failed: return "connect_failed";
    case errc::handshake_refused: return "handshake_refused";
    case errc::timeout: return "timeout";
    case errc::peer_lost: return "peer_lost";
    case errc::aborted: return "aborted";
    case errc::protocol_error: return "protocol_error";
    case errc::finalized: return "finalized";
    case errc::internal: return "internal";
    case errc::desync: return "desync";
    case errc::revoked: return "revoked";
  }
  return "unknown";
}

const char* describe(errc code) noexcept {
  switch (code) {
    case errc::none: return "success";
    case errc::invalid_config: return "a setting or environment variable has a bad value";
    case errc::invalid_argument:
      return "a call's arguments make no sense (null buffer, bad root, out-of-range dtype)";
    case errc::unsupported: return "a valid request mccl does not implement";
    case errc::rendezvous_failed:
      return "the rendezvous store could not be reached or answered badly";
    case errc::connect_failed: return "a peer could not be reached before the connect timeout";
    case errc::handshake_refused:
      return "a connection was refused (job token, protocol version, rank, communicator)";
    case errc::timeout: return "an op passed its deadline (MCCL_TIMEOUT_MS)";
    case errc::peer_lost:
      return "a peer's connection closed or failed, or the peer went silent past the heartbeat "
             "limit";
    case errc::aborted: return "the communicator was aborted, by this rank or another";
    case errc::protocol_error: return "a malformed or unexpected frame";
    case errc::finalized: return "the communicator or runtime was already shut down";
    case errc::internal: return "a bug in mccl: please report it";
    case errc::desync: return "ranks issued different ops at the same sequence number";
    case errc::revoked:
      return "the communicator was revoked, by this rank or another: only shrink, split and finalize "
             "are accepted on it";
  }
  return "unknown";
}

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

error::error(errc code, const std::string& message)
  : std::runtime_error(std::string("mccl: ") + to_string(code) + ": " + message),
    code_(code),
    message_(message) {
}

} // namespace mccl
