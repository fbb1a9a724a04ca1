"""Pure gRPC-over-HTTP/2 wire helpers: message framing, grpc-timeout, metadata, header decoding.

No I/O here; the server and channel feed bytes in and take bytes out.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Iterable

from spur.rpc.status import RpcError, StatusCode, decode_grpc_message, status_from_http

__all__ = [
    "InvalidTarget",
    "parse_target",
    "response_status",
    "CONTENT_TYPE",
    "ACCEPT_ENCODING",
    "frame_message",
    "MessageDecoder",
    "encode_timeout",
    "parse_timeout",
    "decode_headers",
    "user_metadata",
    "validate_metadata",
]

CONTENT_TYPE = "application/grpc"
ACCEPT_ENCODING = "identity,gzip"
_PREFIX = struct.Struct(">BI")

# Header names that belong to the transport, never handed to applications as metadata.
_RESERVED = frozenset({"content-type", "te", "connection", "host", "grpc-timeout", "grpc-encoding"})
_METADATA_KEY = re.compile(r"^[0-9a-z_.\-]+$")
_TIMEOUT = re.compile(r"^(\d{1,8})([HMSmun])$")
_UNIT_SECONDS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


def frame_message(payload: bytes) -> bytes:
    """Length-prefix one serialized message (compressed flag 0)."""
    return _PREFIX.pack(0, len(payload)) + payload


class MessageDecoder:
    """Reassembles length-prefixed gRPC messages from a stream of DATA payloads.

    ``feed`` returns the complete messages it could cut (possibly none). It raises
    :class:`RpcError` with RESOURCE_EXHAUSTED when a message is larger than ``max_message_bytes``,
    UNIMPLEMENTED/INTERNAL for compression the peer did not declare or we do not speak.
    """

    def __init__(self, max_message_bytes: int, encoding: str = "identity") -> None:
        self.max_message_bytes = max_message_bytes
        self.encoding = encoding
        self._buf = bytearray()

    @property
    def pending(self) -> int:
        """Bytes of a partially received message held in the buffer."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        out: list[bytes] = []
        while len(self._buf) >= _PREFIX.size:
            flag, length = _PREFIX.unpack_from(self._buf)
            if length > self.max_message_bytes:
                raise RpcError(
                    StatusCode.RESOURCE_EXHAUSTED,
                    f"message of {length} bytes is larger than the limit of {self.max_message_bytes}",
                )
            if len(self._buf) < _PREFIX.size + length:
                break
            payload = bytes(self._buf[_PREFIX.size : _PREFIX.size + length])
            del self._buf[: _PREFIX.size + length]
            out.append(self._decompress(payload) if flag else payload)
        return out

    def _decompress(self, payload: bytes) -> bytes:
        if self.encoding in ("", "identity"):
            raise RpcError(StatusCode.INTERNAL, "compressed message received without grpc-encoding")
        if self.encoding != "gzip":
            raise RpcError(StatusCode.UNIMPLEMENTED, f"unsupported grpc-encoding {self.encoding!r}")
        import zlib  # only for a compressed message (an import a CLI call need not pay)

        inflater = zlib.decompressobj(wbits=31)
        try:
            data = inflater.decompress(payload, self.max_message_bytes + 1)
        except zlib.error as exc:
            raise RpcError(StatusCode.INTERNAL, f"corrupt gzip message: {exc}") from None
        if len(data) > self.max_message_bytes or inflater.unconsumed_tail:
            raise RpcError(
                StatusCode.RESOURCE_EXHAUSTED,
                f"decompressed message is larger than the limit of {self.max_message_bytes}",
            )
        return data


def encode_timeout(seconds: float) -> str:
    """Format a remaining time as a ``grpc-timeout`` value (at most 8 digits, finest unit that fits)."""
    seconds = max(seconds, 0.0)
    for unit in ("n", "u", "m", "S", "M", "H"):
        value = math.ceil(seconds / _UNIT_SECONDS[unit])
        if value < 10**8:
            return f"{max(value, 1)}{unit}"
    return "99999999H"


def parse_timeout(value: str) -> float:
    """Parse a ``grpc-timeout`` value into seconds; raises ValueError naming the bad value."""
    match = _TIMEOUT.match(value.strip())
    if match is None:
        raise ValueError(f"malformed grpc-timeout {value!r}")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


# Short header fields already decoded: (raw name, raw value) -> (lower-case name, value). Most of a
# call's fields repeat on every call (":method POST", "content-type application/grpc", "te trailers",
# "grpc-status 0", the user agent, ...). Only short values are kept, and never a field whose name
# speaks of a credential, so tokens and secrets are decoded each time and never held here.
_DECODED_FIELDS: dict[tuple[bytes | str, bytes | str], tuple[str, str]] = {}
_DECODED_FIELDS_MAX = 1024
_DECODED_VALUE_MAX = 40  # bytes
_SECRET_NAME = re.compile(r"auth|credential|token|secret|key|cookie|password", re.IGNORECASE)


def decode_headers(headers: Iterable[tuple[bytes | str, bytes | str]]) -> dict[str, str]:
    """Turn h2's header list into a dict with lower-case names; repeated names are joined with ','."""
    out: dict[str, str] = {}
    known = _DECODED_FIELDS
    for pair in headers:
        field = known.get(pair) if isinstance(pair, tuple) else None
        if field is None:
            raw_name, raw_value = pair
            field = (_text(raw_name).lower(), _text(raw_value))
            if (
                isinstance(pair, tuple)
                and max(len(raw_name), len(raw_value)) <= _DECODED_VALUE_MAX
                and not _SECRET_NAME.search(field[0])
            ):
                if len(known) >= _DECODED_FIELDS_MAX:
                    known.clear()
                known[pair] = field
        name, value = field
        out[name] = f"{out[name]},{value}" if name in out else value
    return out


def user_metadata(headers: dict[str, str]) -> dict[str, str]:
    """The application-visible part of a header block: no pseudo headers, no gRPC/transport headers."""
    return {
        k: v
        for k, v in headers.items()
        if not k.startswith(":") and not k.startswith("grpc-") and k not in _RESERVED
    }


def validate_metadata(metadata: dict[str, str]) -> list[tuple[str, str]]:
    """Check application metadata before it goes on the wire; returns ``(name, value)`` pairs.

    Raises ValueError naming the offending key: names must be ``[0-9a-z_.-]+`` (upper case is folded)
    and must not be reserved transport headers; values must not contain CR, LF or NUL. Surrounding
    whitespace is stripped from values (HTTP/2 peers refuse it; the clients do not let h2 normalize).
    """
    out = []
    for key, value in metadata.items():
        name = str(key).lower()
        if not _METADATA_KEY.match(name) or name.startswith("grpc-") or name in _RESERVED:
            raise ValueError(f"invalid metadata key {key!r}")
        text = str(value).strip()
        if any(c in text for c in "\r\n\0"):
            raise ValueError(f"invalid value for metadata key {key!r}: contains CR, LF or NUL")
        out.append((name, text))
    return out


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


class InvalidTarget(ValueError):
    """A channel target that is not ``host:port``, ``http://host:port`` or ``[v6addr]:port``."""


def parse_target(target: str) -> tuple[str, int]:
    """Split a target into ``(host, port)``; raises :class:`InvalidTarget` saying what is wrong."""
    rest = target.strip()
    for prefix in ("http://", "dns:///"):
        if rest.startswith(prefix):
            rest = rest[len(prefix) :]
    if rest.startswith("https://"):
        raise InvalidTarget(f"invalid target {target!r}: TLS (https://) is not supported")
    rest = rest.rstrip("/")
    if rest.startswith("["):
        host, sep, port_text = rest[1:].partition("]:")
        if not sep:
            raise InvalidTarget(f"invalid target {target!r}: expected [ipv6-address]:port")
    else:
        host, sep, port_text = rest.rpartition(":")
        if not sep or ":" in host:
            raise InvalidTarget(f"invalid target {target!r}: expected host:port")
    if not host:
        raise InvalidTarget(f"invalid target {target!r}: missing host")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise InvalidTarget(f"invalid target {target!r}: port must be a number from 1 to 65535")
    return host, int(port_text)


def response_status(
    headers: dict[str, str] | None, trailers: dict[str, str] | None, authority: str
) -> RpcError | None:
    """The outcome of a call from its response headers and trailers (None for OK).

    A trailers-only response passes its headers as ``trailers``. A missing grpc-status maps the HTTP
    status (or says the server sent none); an unknown grpc-status is UNKNOWN.
    """
    headers = headers or {}
    trailers = trailers or {}
    http_status = headers.get(":status", "")
    if "grpc-status" not in trailers:
        if http_status and http_status != "200":
            code = status_from_http(int(http_status)) if http_status.isdigit() else StatusCode.UNKNOWN
            return RpcError(code, f"HTTP status {http_status} from {authority}")
        if headers and not headers.get("content-type", "").startswith(CONTENT_TYPE):
            return RpcError(StatusCode.UNKNOWN, f"unexpected content-type {headers.get('content-type')!r}")
        return RpcError(StatusCode.INTERNAL, "server ended the stream without a grpc-status")
    raw = trailers["grpc-status"]
    try:
        code = StatusCode(int(raw))
    except ValueError:
        return RpcError(StatusCode.UNKNOWN, f"invalid grpc-status {raw!r}")
    if code == StatusCode.OK:
        return None
    message = decode_grpc_message(trailers.get("grpc-message", ""))
    return RpcError(code, message, user_metadata(trailers))
