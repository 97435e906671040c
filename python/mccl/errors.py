"""mccl's exceptions. Every failure is an MCCLError whose `code` is the C++
error code (mccl::errc, the C API's mccl_status_t) and whose message names
the op, rank, peer or setting involved; each code has its own subclass, so

    try:
        md.all_sum(x)
    except mccl.PeerLostError as e:      # or mccl.MCCLError, e.code == 8
        ...

The torch backend raises the same classes.
"""

import builtins


class MCCLError(RuntimeError):
    """Any mccl failure. `code` is the numeric error code, `code_name` its name."""

    code = 12
    code_name = "internal"

    def __init__(self, message, code=None):
        super().__init__(message)
        if code is not None and code != type(self).code:
            self.code = code
            self.code_name = _NAMES.get(code, "unknown")


class InvalidConfigError(MCCLError, ValueError):
    """A setting or environment variable has a bad value."""
    code, code_name = 1, "invalid_config"


class InvalidArgumentError(MCCLError, ValueError):
    """A call's arguments make no sense (shape, dtype, root, peer)."""
    code, code_name = 2, "invalid_argument"


class UnsupportedError(MCCLError):
    """A valid request mccl does not implement."""
    code, code_name = 3, "unsupported"


class RendezvousFailedError(MCCLError):
    """The rendezvous store could not be reached or answered badly."""
    code, code_name = 4, "rendezvous_failed"


class ConnectFailedError(MCCLError):
    """A peer could not be reached before the connect timeout."""
    code, code_name = 5, "connect_failed"


class HandshakeRefusedError(MCCLError):
    """A connection was refused (token, version, rank, communicator)."""
    code, code_name = 6, "handshake_refused"


class TimeoutError(MCCLError, builtins.TimeoutError):  # noqa: A001  (mccl.TimeoutError)
    """An op passed its deadline (MCCL_TIMEOUT_MS)."""
    code, code_name = 7, "timeout"


class PeerLostError(MCCLError):
    """A peer's connection closed or failed."""
    code, code_name = 8, "peer_lost"


class AbortedError(MCCLError):
    """The communicator was aborted, by this or another rank."""
    code, code_name = 9, "aborted"


class ProtocolError(MCCLError):
    """A malformed or unexpected frame arrived."""
    code, code_name = 10, "protocol_error"


class FinalizedError(MCCLError):
    """The group or runtime was already shut down."""
    code, code_name = 11, "finalized"


class InternalError(MCCLError):
    """A bug in mccl: please report it."""
    code, code_name = 12, "internal"


class DesyncError(MCCLError):
    """Ranks issued different ops at the same sequence number."""
    code, code_name = 13, "desync"


class RevokedError(MCCLError):
    """The communicator was revoked: only shrink, split and finalize are accepted."""
    code, code_name = 14, "revoked"


_BY_CODE = {cls.code: cls for cls in (
    InvalidConfigError, InvalidArgumentError, UnsupportedError, RendezvousFailedError,
    ConnectFailedError, HandshakeRefusedError, TimeoutError, PeerLostError, AbortedError,
    ProtocolError, FinalizedError, InternalError, DesyncError, RevokedError)}
_NAMES = {code: cls.code_name for code, cls in _BY_CODE.items()}


def from_code(code, message):
    """The exception for an error code and message (the C++ what())."""
    cls = _BY_CODE.get(code)
    return cls(message) if cls is not None else MCCLError(message, code)


__all__ = ["MCCLError", "from_code"] + [cls.__name__ for cls in _BY_CODE.values()]
