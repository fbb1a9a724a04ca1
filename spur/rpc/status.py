"""gRPC status codes and the error type every RPC failure is reported as.

Both sides of the wire use :class:`RpcError`: a server handler raises it to answer with a status, and
the client raises it when a call ends with a non-OK status (or cannot be made at all).
"""

from __future__ import annotations

import enum

__all__ = ["StatusCode", "RpcError", "status_from_http", "encode_grpc_message", "decode_grpc_message"]


class StatusCode(enum.IntEnum):
    """The canonical gRPC status codes (numeric values are the wire values of ``grpc-status``)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class RpcError(Exception):
    """A call that ended with a non-OK status.

    ``metadata`` holds the trailing metadata sent with the status (client side) or to be sent with it
    (server side). ``str(err)`` is ``"<CODE NAME>: <message>"``.
    """

    def __init__(self, code: StatusCode, message: str = "", metadata: dict[str, str] | None = None) -> None:
        self.code = StatusCode(code)
        self.message = message
        self.metadata: dict[str, str] = dict(metadata or {})
        super().__init__(code, message)

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"

    def __repr__(self) -> str:
        return f"RpcError({self.code.name}, {self.message!r})"


# HTTP status -> gRPC status, for responses that carry no grpc-status (per the gRPC HTTP/2 spec).
_HTTP_TO_GRPC = {
    400: StatusCode.INTERNAL,
    401: StatusCode.UNAUTHENTICATED,
    403: StatusCode.PERMISSION_DENIED,
    404: StatusCode.UNIMPLEMENTED,
    429: StatusCode.UNAVAILABLE,
    502: StatusCode.UNAVAILABLE,
    503: StatusCode.UNAVAILABLE,
    504: StatusCode.UNAVAILABLE,
}


def status_from_http(http_status: int) -> StatusCode:
    """Map an HTTP status of a non-gRPC response to the gRPC code a client should report."""
    return _HTTP_TO_GRPC.get(http_status, StatusCode.UNKNOWN)


def encode_grpc_message(message: str) -> str:
    """Percent-encode a status message for the ``grpc-message`` trailer (UTF-8, RFC 3986 style)."""
    out = []
    for byte in message.encode("utf-8"):
        if 0x20 <= byte <= 0x7E and byte != 0x25:  # printable ASCII except '%'
            out.append(chr(byte))
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def decode_grpc_message(value: str) -> str:
    """Decode a ``grpc-message`` value; malformed escapes are kept literally, bad UTF-8 is replaced."""
    raw = value.encode("utf-8", errors="surrogateescape")
    out = bytearray()
    i = 0
    while i < len(raw):
        if raw[i] == 0x25 and i + 2 < len(raw) and _is_hex(raw[i + 1 : i + 3]):
            out.append(int(raw[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", errors="replace")


def _is_hex(pair: bytes) -> bool:
    return len(pair) == 2 and all(c in b"0123456789abcdefABCDEF" for c in pair)
