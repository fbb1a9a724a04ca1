"""Sans-I/O codec of WireGuard's cross-platform userspace API (the ``wireguard-go`` control socket).

The protocol (https://www.wireguard.com/xplatform/): a client writes ``get=1\\n\\n`` or ``set=1\\n``
followed by ``key=value`` lines and an empty line; the daemon answers ``key=value`` lines ending in
``errno=N`` and an empty line. Keys travel as lowercase hex. Only framing and translation live here;
:mod:`spur.net.backend` owns the socket.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import cast

from spur.net.model import PeerChange, PeerState

__all__ = [
    "DeviceState",
    "UapiError",
    "decode_get",
    "encode_get",
    "encode_set",
    "key_from_hex",
    "key_to_hex",
    "response_complete",
]


class UapiError(Exception):
    """The daemon answered with a non-zero errno, or the answer could not be parsed."""


def key_to_hex(key_b64: str) -> str:
    return base64.b64decode(key_b64).hex()


def key_from_hex(key_hex: str) -> str:
    return base64.b64encode(bytes.fromhex(key_hex)).decode()


@dataclass
class DeviceState:
    """What ``get=1`` reported: device settings and peers by base64 public key."""

    listen_port: int = 0
    has_private_key: bool = False
    public_key_of_private: str = ""  # not in the protocol; filled by callers that know the key
    peers: dict[str, PeerState] = field(default_factory=dict)


def encode_get() -> bytes:
    return b"get=1\n\n"


def encode_set(
    *,
    private_key_b64: str | None = None,
    listen_port: int | None = None,
    upsert: Iterable[PeerChange] = (),
    remove: Iterable[str] = (),
    replace_peers: bool = False,
) -> bytes:
    """One ``set=1`` request: device settings, then removals, then peers set exactly as given
    (``replace_allowed_ips``, so AllowedIPs are the given list and nothing else)."""
    lines = ["set=1"]
    if private_key_b64 is not None:
        lines.append(f"private_key={key_to_hex(private_key_b64)}")
    if listen_port is not None:
        lines.append(f"listen_port={listen_port}")
    if replace_peers:
        lines.append("replace_peers=true")
    for key in remove:
        lines += [f"public_key={key_to_hex(key)}", "remove=true"]
    for peer in upsert:
        lines.append(f"public_key={key_to_hex(peer.public_key)}")
        if peer.endpoint:
            lines.append(f"endpoint={peer.endpoint}")
        lines.append(f"persistent_keepalive_interval={peer.keepalive}")
        lines.append("replace_allowed_ips=true")
        lines += [f"allowed_ip={ip}" for ip in peer.allowed_ips]
    return ("\n".join(lines) + "\n\n").encode()


def response_complete(buffer: bytes) -> bool:
    """True once ``buffer`` holds a whole answer (it ends with an empty line)."""
    return buffer.endswith(b"\n\n") or buffer == b"\n"


def _errno(pairs: list[tuple[str, str]]) -> None:
    for key, value in pairs:
        if key == "errno":
            if value != "0":
                raise UapiError(f"wireguard-go refused the request (errno {value})")
            return
    raise UapiError("wireguard-go's answer has no errno line")


def _pairs(data: bytes) -> list[tuple[str, str]]:
    out = []
    for line in data.decode("utf-8", "replace").split("\n"):
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise UapiError(f"malformed UAPI line {line!r}")
        out.append((key, value))
    return out


def check_set_response(data: bytes) -> None:
    """Raise UapiError unless a ``set`` answer says errno=0."""
    _errno(_pairs(data))


def decode_get(data: bytes) -> DeviceState:
    """Parse a ``get=1`` answer; raises UapiError for errno != 0 or malformed lines."""
    pairs = _pairs(data)
    _errno(pairs)
    state = DeviceState()
    cur: dict[str, object] | None = None
    peers: list[dict[str, object]] = []
    for key, value in pairs:
        if key == "public_key":
            cur = {"public_key": key_from_hex(value), "allowed_ips": [], "sec": 0, "nsec": 0}
            peers.append(cur)
        elif cur is None:
            if key == "listen_port":
                state.listen_port = int(value)
            elif key == "private_key":
                state.has_private_key = bool(value.strip("0"))
        elif key == "endpoint":
            cur["endpoint"] = value
        elif key == "allowed_ip":
            cast(list[str], cur["allowed_ips"]).append(value)
        elif key == "last_handshake_time_sec":
            cur["sec"] = int(value)
        elif key == "last_handshake_time_nsec":
            cur["nsec"] = int(value)
        elif key == "rx_bytes":
            cur["rx"] = int(value)
        elif key == "tx_bytes":
            cur["tx"] = int(value)
        elif key == "persistent_keepalive_interval":
            cur["keepalive"] = int(value)
    for p in peers:
        key = str(p["public_key"])
        state.peers[key] = PeerState(
            public_key=key,
            endpoint=str(p.get("endpoint", "")),
            allowed_ips=tuple(p["allowed_ips"]),  # type: ignore[arg-type]
            keepalive=int(p.get("keepalive", 0)),  # type: ignore[call-overload]
            last_handshake=int(p["sec"]) + int(p["nsec"]) / 1e9,  # type: ignore[call-overload]
            rx_bytes=int(p.get("rx", 0)),  # type: ignore[call-overload]
            tx_bytes=int(p.get("tx", 0)),  # type: ignore[call-overload]
        )
    return state
