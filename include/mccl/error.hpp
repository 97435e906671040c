#pragma once
/// mccl's one error type. Every failure a caller can see is an mccl::error
/// carrying a code (what kind of failure) and a message that names the
/// setting, rank, peer, op, sequence or phase involved.

#include <cstdint>
#include <stdexcept>
#include <string>

namespace mccl {

/// What went wrong, coarsely; the message says exactly what.
enum class errc : uint8_t {
  none = 0,
  invalid_config,     ///< a setting or environment variable has a bad value
  invalid_argument,   ///< a call's arguments make no sense (null buffer, bad root)
  unsupported,        ///< a valid request mccl does not implement (yet)
  rendezvous_failed,  ///< the key-value store could not be reached or answered badly
  connect_failed,     ///< a peer could not be reached before the connect timeout
  handshake_refused,  ///< a connection was refused (token, version, rank, comm id)
  timeout,            ///< an op passed its deadline
  peer_lost,          ///< a peer's connection closed or failed
  aborted,            ///< the communicator was aborted (by this or another rank)
  protocol_error,     ///< a malformed or unexpected frame
  finalized,          ///< the communicator or runtime was already shut down
  internal,           ///< a bug in mccl: please report it
  desync,             ///< ranks issued different ops at the same sequence number
  revoked,            ///< the communicator was revoked: only shrink, split and finalize are accepted
};

/// Stable lower-case name of an error code ("peer_lost").
const char* to_string(errc code) noexcept;

/// One line on what an error code means, for documentation and tools
/// (docs/c-api.md's table is printed from it by mccl-docgen).
const char* describe(errc code) noexcept;

/// `text` in double quotes for an error message, with quotes, backslashes
/// and control bytes escaped, so a stray newline or escape sequence in an
/// environment variable cannot garble the log.
std::string quoted(const std::string& text);

/// The exception mccl throws; what() is "mccl: <code>: <message>".
class error : public std::runtime_error {
public:
  error(errc code, const std::string& message);

  errc code() const noexcept { return code_; }

  /// The message without the "mccl: <code>: " prefix.
  const std::string& message() const noexcept { return message_; }

private:
  errc code_;
  std::string message_;
};

} // namespace mccl
