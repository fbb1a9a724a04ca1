"""Shared pieces for the sans-I/O HTTP/2 engine tests (spur.rpc.h2_server, spur.rpc.h2_client): raw
frames in and out, two connections exchanging bytes in memory, and the connection errors every role
must detect (what spur.rpc.h2_engine checks for both)."""

from __future__ import annotations

import struct
from typing import Protocol

import h2.connection
import h2.events
import h2.exceptions
import pytest

from spur.rpc.h2_engine import (
    COMPRESSION_ERROR,
    CONTINUATION,
    DATA,
    ENHANCE_YOUR_CALM,
    FLOW_CONTROL_ERROR,
    FRAME_SIZE_ERROR,
    GOAWAY,
    HEADERS,
    INITIAL_WINDOW_SIZE,
    MAX_QUEUED_CONTROL,
    PING,
    PRIORITY,
    PROTOCOL_ERROR,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    H2Engine,
    PeerProtocolError,
)
from spur.rpc.hpack_codec import encode_block

REQUEST = [
    (":method", "POST"),
    (":scheme", "http"),
    (":path", "/spur.Test/Call"),
    (":authority", "localhost"),
    ("content-type", "application/grpc"),
    ("te", "trailers"),
]
BLOCK = encode_block(REQUEST)


class Peer(Protocol):
    """Either end of a connection: ours or h2's."""

    def data_to_send(self) -> bytes: ...

    def receive_data(self, data: bytes) -> list[h2.events.Event]: ...


def exchange(client: Peer, server: Peer) -> tuple[list[h2.events.Event], list[h2.events.Event]]:
    """Move bytes both ways until both are quiet; (server events, client events)."""
    server_events: list[h2.events.Event] = []
    client_events: list[h2.events.Event] = []
    while True:
        to_server = client.data_to_send()
        if to_server:
            server_events += server.receive_data(to_server)
        to_client = server.data_to_send()
        if to_client:
            client_events += client.receive_data(to_client)
        if not to_server and not to_client:
            return server_events, client_events


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return struct.pack(">IBI", (len(payload) << 8) | kind, flags, stream_id) + payload


def frames(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """(type, flags, stream id, payload) of every frame in ``data``."""
    out, pos = [], 0
    while pos < len(data):
        head, flags, sid = struct.unpack_from(">IBI", data, pos)
        length = head >> 8
        out.append((head & 0xFF, flags, sid, data[pos + 9 : pos + 9 + length]))
        pos += 9 + length
    return out


def goaway_code(engine: H2Engine, data: bytes, error: type[PeerProtocolError] = PeerProtocolError) -> int:
    """Feed ``data``, which must be a connection error (raising ``error``); the code of the one GOAWAY."""
    with pytest.raises(error) as info:
        engine.receive_data(data)
    sent = [f for f in frames(engine.data_to_send()) if f[0] == GOAWAY]
    assert len(sent) == 1
    code = struct.unpack_from(">II", sent[0][3])[1]
    assert int(info.value.error_code) == code
    return code


def resets(engine: H2Engine) -> list[tuple[int, int]]:
    """(stream id, error code) of the RST_STREAMs queued."""
    return [
        (sid, struct.unpack(">I", p)[0])
        for kind, _, sid, p in frames(engine.data_to_send())
        if kind == RST_STREAM
    ]


def of(events: list[h2.events.Event], cls: type) -> list:
    return [e for e in events if isinstance(e, cls)]


def request_with_trailers(client: h2.connection.H2Connection | H2Engine, server: Peer) -> int:
    """The client sends a request whose body ends with trailers; its stream id (the server has read it)."""
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, REQUEST)
    client.send_data(sid, b"abc")
    client.send_headers(sid, [("x-trailer", "1")], end_stream=True)
    got, _ = exchange(client, server)
    assert [type(e) for e in got] == [
        h2.events.RequestReceived,
        h2.events.DataReceived,
        h2.events.TrailersReceived,
        h2.events.StreamEnded,
    ]
    return sid


def _hpack_bomb() -> bytes:
    # One large literal added to the dynamic table, then indexed many times: small on the wire,
    # far above the header list limit once decoded.
    name = b"x-big"
    value = b"v" * 3000
    literal = bytes([0x40, len(name)]) + name + bytes([0x7F]) + _hpack_int_tail(len(value) - 127) + value
    return BLOCK + literal + bytes([0x80 | 62]) * 10


def _hpack_int_tail(value: int) -> bytes:
    out = bytearray()
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# Connection errors (bytes, GOAWAY code) for an engine with stream 1 open or never opened, stream 3
# never opened, and a max frame size of 16 KiB and header list of 8 KiB.
CONNECTION_ERRORS = {
    "frame larger than our max": (frame(DATA, 0, 1, b"x" * 16385), FRAME_SIZE_ERROR),
    "ping of the wrong size": (frame(PING, 0, 0, b"1234567"), FRAME_SIZE_ERROR),
    "ping on a stream": (frame(PING, 0, 1, b"12345678"), PROTOCOL_ERROR),
    "settings on a stream": (frame(SETTINGS, 0, 1), PROTOCOL_ERROR),
    "settings of the wrong size": (frame(SETTINGS, 0, 0, b"\0" * 5), FRAME_SIZE_ERROR),
    "settings ack with payload": (frame(SETTINGS, 1, 0, b"\0" * 6), FRAME_SIZE_ERROR),
    "initial window too large": (frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 2**31)), FLOW_CONTROL_ERROR),
    "max frame size too small": (frame(SETTINGS, 0, 0, struct.pack(">HI", 5, 100)), PROTOCOL_ERROR),
    "enable push 2": (frame(SETTINGS, 0, 0, struct.pack(">HI", 2, 2)), PROTOCOL_ERROR),
    "zero window update": (frame(WINDOW_UPDATE, 0, 0, b"\0\0\0\0"), PROTOCOL_ERROR),
    "window overflow": (frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 2**31 - 1)), FLOW_CONTROL_ERROR),
    "window update of the wrong size": (frame(WINDOW_UPDATE, 0, 0, b"\0\0\1"), FRAME_SIZE_ERROR),
    "window update on idle stream": (frame(WINDOW_UPDATE, 0, 9, b"\0\0\0\1"), PROTOCOL_ERROR),
    "data on stream 0": (frame(DATA, 0, 0, b"x"), PROTOCOL_ERROR),
    "data on an idle stream": (frame(DATA, 0, 9, b"x"), PROTOCOL_ERROR),
    "data on an even stream": (frame(DATA, 0, 2, b"x"), PROTOCOL_ERROR),
    "headers on stream 0": (frame(HEADERS, 0x4, 0, BLOCK), PROTOCOL_ERROR),
    "headers on an even stream": (frame(HEADERS, 0x4, 2, BLOCK), PROTOCOL_ERROR),
    "stream depends on itself": (frame(HEADERS, 0x24, 1, b"\0\0\0\1\x10" + BLOCK), PROTOCOL_ERROR),
    "continuation without headers": (frame(CONTINUATION, 0x4, 1, BLOCK), PROTOCOL_ERROR),
    "header block interrupted": (
        frame(HEADERS, 0, 1, BLOCK) + frame(PING, 0, 0, b"12345678"),
        PROTOCOL_ERROR,
    ),
    "continuation of another stream": (
        frame(HEADERS, 0, 1, BLOCK) + frame(CONTINUATION, 4, 3, b""),
        PROTOCOL_ERROR,
    ),
    "push promise": (frame(PUSH_PROMISE, 0x4, 1, b"\0\0\0\2" + BLOCK), PROTOCOL_ERROR),
    "undecodable header block": (frame(HEADERS, 0x4, 1, bytes([0x80 | 120])), COMPRESSION_ERROR),
    "padding longer than the frame": (frame(HEADERS, 0x4 | 0x8, 1, bytes([200]) + BLOCK), PROTOCOL_ERROR),
    "rst_stream on stream 0": (frame(RST_STREAM, 0, 0, b"\0\0\0\0"), PROTOCOL_ERROR),
    "rst_stream on an idle stream": (frame(RST_STREAM, 0, 7, b"\0\0\0\0"), PROTOCOL_ERROR),
    "rst_stream of the wrong size": (frame(RST_STREAM, 0, 1, b"\0\0\0"), FRAME_SIZE_ERROR),
    "priority of the wrong size": (frame(PRIORITY, 0, 1, b"\0\0\0"), FRAME_SIZE_ERROR),
    "goaway on a stream": (frame(GOAWAY, 0, 1, b"\0" * 8), PROTOCOL_ERROR),
    "header block over the list limit": (
        frame(HEADERS, 0, 1, BLOCK) + b"".join(frame(CONTINUATION, 0, 1, b"\0" * 4000) for _ in range(3)),
        ENHANCE_YOUR_CALM,
    ),
    "decoded header list over the limit": (frame(HEADERS, 0x4, 1, _hpack_bomb()), ENHANCE_YOUR_CALM),
    # a peer that never reads: each frame makes us queue an acknowledgement (CVE-2019-9512 / 9515)
    "ping flood, answers never taken": (
        frame(PING, 0, 0, b"12345678") * (MAX_QUEUED_CONTROL + 1),
        ENHANCE_YOUR_CALM,
    ),
    "settings flood, answers never taken": (
        frame(SETTINGS, 0, 0) * (MAX_QUEUED_CONTROL + 1),
        ENHANCE_YOUR_CALM,
    ),
}


def connection_error(engine: H2Engine, data: bytes, error: type[PeerProtocolError]) -> int:
    """:func:`goaway_code`; then the connection reads nothing more and sends nothing more."""
    code = goaway_code(engine, data, error)
    assert engine.receive_data(frame(PING, 0, 0, b"12345678")) == []
    with pytest.raises(h2.exceptions.ProtocolError):
        engine.update_settings({INITIAL_WINDOW_SIZE: 1})
    return code


def stream_error(engine: H2Engine, data: bytes) -> list[tuple[int, int]]:
    """Feed ``data``, which must reset streams (reported, RST_STREAM queued, forgotten); their
    (stream id, code)."""
    events = engine.receive_data(data)
    reported = [(e.stream_id, int(e.error_code)) for e in of(events, h2.events.StreamReset)]
    assert reported == resets(engine)
    assert not any(sid in engine.streams for sid, _ in reported)
    return reported
