"""Shared pieces for the sans-I/O HTTP/2 engine tests (spur.rpc.h2_server, spur.rpc.h2_client): raw
frames in and out, and two connections exchanging bytes in memory."""

from __future__ import annotations

import struct
from typing import Protocol

import h2.events
import pytest

from spur.rpc.h2_engine import GOAWAY, RST_STREAM, H2Engine, PeerProtocolError


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
