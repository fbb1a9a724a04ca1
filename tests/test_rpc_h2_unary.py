"""spur.rpc.hpack_codec and spur.rpc.h2_unary (the blocking client's own HTTP/2), checked against the
``h2``/``hpack`` packages the server uses: every byte goes through a real h2 server connection."""

from __future__ import annotations

import struct
import subprocess
import sys

import h2.config
import h2.connection
import h2.events
import h2.settings
import hpack
import pytest
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH
from hpack.table import HeaderTable

from spur.rpc import hpack_codec
from spur.rpc.h2_unary import Data, GoAway, H2Connection, H2Error, Headers, Reset
from spur.rpc.hpack_codec import Decoder, HpackError, encode_block

# ---------------------------------------------------------------------------------------- HPACK


def test_tables_are_rfc_7541s() -> None:
    assert list(hpack_codec._HUFFMAN_CODES) == list(REQUEST_CODES)
    assert list(hpack_codec._HUFFMAN_LENGTHS) == list(REQUEST_CODES_LENGTH)
    assert hpack_codec.STATIC_TABLE == tuple(HeaderTable.STATIC_TABLE)


@pytest.mark.parametrize("huffman", [True, False])
def test_decoder_follows_hpacks_encoder_across_blocks(huffman: bool) -> None:
    enc, dec = hpack.Encoder(), Decoder()
    for i in range(60):  # repeated names/values exercise the dynamic table, long values its eviction
        headers = [
            (":status", "200"),
            ("content-type", "application/grpc"),
            ("grpc-status", str(i % 17)),
            ("grpc-message", f"job {i}: ünicode % and spaces"),
            ("x-long", "v" * (i * 41)),
        ]
        if i == 30:
            enc.header_table_size = 256  # emits a dynamic table size update
        got = dec.decode(enc.encode(headers, huffman=huffman))
        assert got == [(n.encode(), v.encode()) for n, v in headers]


def test_never_indexed_literals_decode() -> None:
    block = hpack.Encoder().encode([hpack.NeverIndexedHeaderTuple("authorization", "Bearer x")])
    assert Decoder().decode(block) == [(b"authorization", b"Bearer x")]


def test_our_literals_decode_in_hpack() -> None:
    headers = [(":method", "POST"), (":path", "/spur.v1.Controller/GetJobs"), ("x-spur-user", "zoë"), ("x", "")]
    decoded = hpack.Decoder().decode(encode_block(headers), raw=True)
    assert decoded == [(n.encode(), v.encode()) for n, v in headers]
    big = [("x-big", "y" * 200)]  # a length past the 7-bit prefix
    assert hpack.Decoder().decode(encode_block(big)) == big


@pytest.mark.parametrize(
    "block",
    [
        b"\x80",  # index 0
        b"\xff\xff\xff\xff\xff\xff\x01",  # index past every table / integer too large
        b"\x00\x05ab",  # truncated name
        b"\x00\x81\x00\x00",  # Huffman name whose padding is not all ones
        b"\x3f\xe2\x1f",  # table size update to 4097, above the 4096 we allow
    ],
)
def test_malformed_blocks_are_hpack_errors(block: bytes) -> None:
    with pytest.raises(HpackError):
        Decoder().decode(block)


# ---------------------------------------------------------------------------------------- HTTP/2


class Peer:
    """An h2 server connection wired to our client connection in memory."""

    def __init__(self, **settings: int) -> None:
        """``settings``: h2 SettingCodes names -> values the server announces."""
        self.server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
        self.server.initiate_connection()
        if settings:
            self.server.update_settings({h2.settings.SettingCodes[k]: v for k, v in settings.items()})
        self.client = H2Connection()
        self.server_events: list[h2.events.Event] = []

    def pump(self) -> list:
        """Move bytes both ways until neither side has anything to send; the client's events."""
        events = []
        while True:
            to_server, to_client = self.client.data_to_send(), self.server.data_to_send()
            if not to_server and not to_client:
                return events
            if to_server:
                self.server_events += self.server.receive_data(to_server)
            if to_client:
                events += self.client.receive_data(to_client)

    def request_body(self, stream_id: int) -> bytes:
        body = b""
        for ev in self.server_events:
            if isinstance(ev, h2.events.DataReceived) and ev.stream_id == stream_id:
                self.server.acknowledge_received_data(ev.flow_controlled_length, stream_id)
                body += ev.data
        return body


def test_large_response_in_big_frames_then_trailers() -> None:
    peer = Peer()
    peer.pump()
    sid = peer.client.start_request([(":method", "POST"), (":path", "/x"), (":scheme", "http"), (":authority", "a")])
    assert len(peer.client.send_data(sid, b"request")) == 0
    peer.pump()
    # the response: headers, 3 MB in frames up to our 1 MiB frame size, trailers
    peer.server.send_headers(sid, [(":status", "200"), ("content-type", "application/grpc")])
    payload = b"z" * 3_000_000
    view = memoryview(payload)
    events: list = []
    while view:
        room = min(peer.server.local_flow_control_window(sid), peer.server.max_outbound_frame_size)
        chunk, view = view[:room], view[room:]
        peer.server.send_data(sid, bytes(chunk))
        events += peer.pump()
    peer.server.send_headers(sid, [("grpc-status", "0")], end_stream=True)
    events += peer.pump()
    heads = [e for e in events if isinstance(e, Headers)]
    assert heads[0] == Headers(sid, [(b":status", b"200"), (b"content-type", b"application/grpc")], False)
    assert heads[-1] == Headers(sid, [(b"grpc-status", b"0")], True)
    assert b"".join(e.data for e in events if isinstance(e, Data)) == payload
    assert max(len(e.data) for e in events if isinstance(e, Data)) > 16_384  # our frame size was honoured


def test_whole_request_body_arrives() -> None:
    peer = Peer()
    peer.pump()
    sid = peer.client.start_request([(":method", "POST"), (":path", "/x"), (":scheme", "http"), (":authority", "a")])
    body = b"q" * 200_000
    rest = peer.client.send_data(sid, body)
    got = b""
    for _ in range(100):
        peer.pump()
        got += peer.request_body(sid)
        peer.server_events.clear()
        if not rest:
            break
        rest = peer.client.send_data(sid, rest)
    peer.pump()
    got += peer.request_body(sid)
    assert got == body


def test_ping_answered_settings_applied_reset_and_goaway_reported() -> None:
    peer = Peer(**{"MAX_FRAME_SIZE": 32_768, "INITIAL_WINDOW_SIZE": 1_000})
    peer.pump()
    assert peer.client.peer_max_frame == 32_768 and peer.client.peer_initial_window == 1_000
    peer.server.ping(b"12345678")
    peer.pump()
    assert any(isinstance(e, h2.events.PingAckReceived) for e in peer.server_events)
    sid = peer.client.start_request([(":method", "POST"), (":path", "/x"), (":scheme", "http"), (":authority", "a")])
    assert len(peer.client.send_data(sid, b"a" * 5_000)) == 4_000  # the stream window of 1,000
    peer.pump()
    peer.server.reset_stream(sid, error_code=8)
    assert peer.pump() == [Reset(sid, 8)]
    peer.server.close_connection(error_code=0, last_stream_id=sid)
    assert peer.pump() == [GoAway(sid, 0)]


def test_raw_frames_padding_priority_continuation_and_errors() -> None:
    def frame(kind: int, flags: int, sid: int, payload: bytes) -> bytes:
        return struct.pack(">I B I", (len(payload) << 8) | kind, flags, sid) + payload

    block = hpack.Encoder().encode([(":status", "200"), ("grpc-status", "0"), ("x", "y" * 50)])
    conn = H2Connection()
    conn.data_to_send()
    padded_priority = bytes([3]) + b"\x00\x00\x00\x00\x10" + block[:10] + b"\x00\x00\x00"
    data = frame(1, 0x8 | 0x20, 1, padded_priority) + frame(9, 0x4, 1, block[10:])
    data += frame(0, 0x8 | 0x1, 1, bytes([2]) + b"hello" + b"\x00\x00")
    events = []
    for i in range(len(data)):  # byte by byte: any split of the stream works
        events += conn.receive_data(data[i : i + 1])
    assert events == [
        Headers(1, [(b":status", b"200"), (b"grpc-status", b"0"), (b"x", b"y" * 50)], False),
        Data(1, b"hello", True),
    ]
    with pytest.raises(H2Error):
        H2Connection().receive_data(frame(9, 0x4, 1, b""))  # CONTINUATION out of nowhere
    with pytest.raises(H2Error):
        H2Connection().receive_data(frame(5, 0x4, 1, b"\x00\x00\x00\x02"))  # PUSH_PROMISE
    with pytest.raises(H2Error):
        H2Connection().receive_data(frame(1, 0x4, 1, b"\x80"))  # undecodable header block
    with pytest.raises(H2Error):
        H2Connection().receive_data(frame(0, 0x8, 1, b"\x09abc"))  # padding longer than the frame


def test_blocking_client_imports_neither_h2_nor_trio() -> None:
    code = (
        "import sys, spur.rpc.blocking; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('h2', 'hpack', 'hyperframe', 'trio')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
