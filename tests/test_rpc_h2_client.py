"""The client-side HTTP/2 engine alone (spur.rpc.h2_client) and its HPACK encoder
(spur.rpc.hpack_codec.Encoder), sans-I/O: the ``h2`` library plays the server (an independent
implementation, validating what we send), raw frames play a broken or hostile one, and the ``hpack``
package decodes what the encoder writes."""

from __future__ import annotations

import functools
import struct

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import h2_helpers
import hpack
import pytest
from h2_helpers import (
    connection_error,
    exchange,
    frame,
    frames,
    of,
    request_with_trailers,
    resets,
    stream_error,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from spur.rpc import hpack_codec
from spur.rpc.h2_client import ClientH2Connection, ClientProtocolError
from spur.rpc.h2_engine import (
    CONTINUATION,
    DATA,
    ENHANCE_YOUR_CALM,
    FLOW_CONTROL_ERROR,
    FRAME_SIZE_ERROR,
    HEADERS,
    PING,
    PREFACE,
    PROTOCOL_ERROR,
    RST_STREAM,
    SETTINGS,
    STREAM_CLOSED,
    WINDOW_UPDATE,
)
from spur.rpc.hpack_codec import Decoder, Encoder, HpackError, encode_block
from spur.rpc.transport import client_engine

SC = h2.settings.SettingCodes
TOKEN = "Bearer " + "eyJhbGciOiJFZERTQSJ9." + "t" * 900
REQUEST = [
    (":method", "POST"),
    (":scheme", "http"),
    (":path", "/spur.Test/Call"),
    (":authority", "localhost:6817"),
    ("content-type", "application/grpc"),
    ("te", "trailers"),
    ("authorization", TOKEN),
]
RESPONSE = [(":status", "200"), ("content-type", "application/grpc")]
OK = [("grpc-status", "0")]
BLOCK = encode_block(RESPONSE)
# What a client reads of a whole answer: response headers, a message, trailers.
ANSWERED = [
    h2.events.ResponseReceived,
    h2.events.DataReceived,
    h2.events.TrailersReceived,
    h2.events.StreamEnded,
]

goaway_code = functools.partial(h2_helpers.goaway_code, error=ClientProtocolError)


def make_client(**settings: int) -> ClientH2Connection:
    values = {SC.MAX_CONCURRENT_STREAMS: 100, SC.MAX_HEADER_LIST_SIZE: 8192, SC.INITIAL_WINDOW_SIZE: 65535}
    values.update({getattr(SC, k.upper()): v for k, v in settings.items()})
    client = ClientH2Connection({int(k): v for k, v in values.items()})
    client.initiate_connection()
    return client


def make_server(**settings: int) -> h2.connection.H2Connection:
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
    server.local_settings = h2.settings.Settings(
        client=False, initial_values={getattr(SC, k.upper()): v for k, v in settings.items()}
    )
    server.initiate_connection()
    return server


def pair(**settings: int) -> tuple[ClientH2Connection, h2.connection.H2Connection]:
    """A client and an h2 server, prefaces exchanged; ``settings`` are the server's."""
    client = make_client()
    server = make_server(**settings)
    exchange(client, server)
    return client, server


def call(client: ClientH2Connection, body: bytes = b"\0\0\0\0\x03abc", **extra: str) -> int:
    """Open a stream with a request and its body (END_STREAM); its id."""
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, REQUEST + list(extra.items()))
    client.send_data(sid, body, end_stream=True)
    return sid


def answer(server: h2.connection.H2Connection, sid: int, body: bytes = b"\0\0\0\0\x02ok") -> None:
    server.send_headers(sid, RESPONSE)
    server.send_data(sid, body)
    server.send_headers(sid, OK, end_stream=True)


def raw_client(**settings: int) -> ClientH2Connection:
    """A client that has read a raw server's empty SETTINGS and opened stream 1 (output discarded)."""
    client = make_client(**settings)
    events = client.receive_data(frame(SETTINGS, 0, 0))
    assert [type(e) for e in events] == [h2.events.RemoteSettingsChanged]
    client.send_headers(1, REQUEST, end_stream=True)
    client.data_to_send()
    return client


# ---------------------------------------------------------------------------------------------- calls


def test_preface_carries_our_settings_and_no_push() -> None:
    client = make_client(initial_window_size=1 << 20)
    out = client.data_to_send()
    assert out.startswith(PREFACE)
    [(kind, flags, sid, payload)] = frames(out[len(PREFACE) :])
    assert (kind, flags, sid) == (SETTINGS, 0, 0)
    sent = dict(struct.unpack_from(">HI", payload, i) for i in range(0, len(payload), 6))
    assert sent[SC.ENABLE_PUSH] == 0 and sent[SC.INITIAL_WINDOW_SIZE] == 1 << 20
    server = make_server()
    got = server.receive_data(out)
    assert of(got, h2.events.RemoteSettingsChanged)
    assert server.remote_settings.enable_push == 0


def test_unary_call_with_trailers() -> None:
    client, server = pair()
    sid = call(client)
    assert sid == 1
    got, _ = exchange(client, server)
    assert [type(e) for e in got] == [
        h2.events.RequestReceived,
        h2.events.DataReceived,
        h2.events.StreamEnded,
    ]
    assert got[0].headers == [(n.encode(), v.encode()) for n, v in REQUEST]
    assert got[1].data == b"\0\0\0\0\x03abc"
    assert client.open_outbound_streams == 1

    answer(server, sid)
    _, events = exchange(client, server)
    assert [type(e) for e in events] == ANSWERED
    assert dict(events[0].headers)[b":status"] == b"200"
    assert events[1].data == b"\0\0\0\0\x02ok" and events[1].flow_controlled_length == 7
    assert dict(events[2].headers) == {b"grpc-status": b"0"}
    assert events[2].stream_ended is events[3]
    assert sid not in client.streams and client.open_outbound_streams == 0
    with pytest.raises(h2.exceptions.StreamClosedError):
        client.send_data(sid, b"x")
    with pytest.raises(h2.exceptions.StreamClosedError):
        client.local_flow_control_window(sid)


def test_trailers_only_response_and_client_trailers() -> None:
    client, server = pair()
    sid = request_with_trailers(client, server)
    server.send_headers(sid, RESPONSE + [("grpc-status", "5")], end_stream=True)
    _, events = exchange(client, server)
    assert [type(e) for e in events] == [h2.events.ResponseReceived, h2.events.StreamEnded]
    assert events[0].stream_ended is events[1]
    assert not client.streams


def test_informational_response_comes_before_the_response() -> None:
    client, server = pair()
    sid = call(client)
    exchange(client, server)
    server.send_headers(sid, [(":status", "100")])
    answer(server, sid)
    _, events = exchange(client, server)
    assert [type(e) for e in events][:2] == [
        h2.events.InformationalResponseReceived,
        h2.events.ResponseReceived,
    ]


def test_stream_ids_open_in_order() -> None:
    client, server = pair()
    assert client.get_next_available_stream_id() == 1
    assert client.get_next_available_stream_id() == 1  # unchanged until used
    ids = [call(client) for _ in range(3)]
    assert ids == [1, 3, 5]
    assert client.get_next_available_stream_id() == 7
    with pytest.raises(h2.exceptions.StreamClosedError):
        client.send_headers(1, REQUEST)  # ended by us: no second request on it
    with pytest.raises(h2.exceptions.StreamClosedError):
        client.send_headers(3, REQUEST)
    with pytest.raises(h2.exceptions.ProtocolError):
        client.send_headers(8, REQUEST)
    got, _ = exchange(client, server)
    assert [e.stream_id for e in of(got, h2.events.RequestReceived)] == [1, 3, 5]


def test_byte_at_a_time_gives_the_same_events() -> None:
    client = make_client()
    client.send_headers(1, REQUEST, end_stream=True)
    stream = frame(SETTINGS, 0, 0) + frame(HEADERS, 0x4, 1, BLOCK) + frame(DATA, 0, 1, b"hello")
    stream += frame(HEADERS, 0x5, 1, encode_block(OK))
    events: list = []
    for i in range(len(stream)):
        events += client.receive_data(stream[i : i + 1])
    assert [type(e) for e in events] == [h2.events.RemoteSettingsChanged, *ANSWERED]


# ---------------------------------------------------------------------------------------------- HPACK


def header_blocks(data: bytes) -> list[bytes]:
    return [p for kind, _, _, p in frames(data) if kind == HEADERS]


def test_repeated_headers_are_sent_once_then_indexed() -> None:
    client, server = pair()
    sizes = []
    for timeout in ("5S", "4999m", "4998m"):
        sid = client.get_next_available_stream_id()
        client.send_headers(sid, REQUEST + [("grpc-timeout", timeout)], end_stream=True)
        out = client.data_to_send()
        [block] = header_blocks(out)
        sizes.append(len(block))
        [request] = of(server.receive_data(out), h2.events.RequestReceived)
        assert dict(request.headers)[b"grpc-timeout"] == timeout.encode()
        assert dict(request.headers)[b"authorization"] == TOKEN.encode()
    assert sizes[0] > len(TOKEN)
    # Every later block: one byte per indexed header, the timeout as a literal (never indexed).
    assert sizes[1] == sizes[2] < 40
    assert not any(name == b"grpc-timeout" for name, _ in server.decoder.header_table.dynamic_entries)


def test_header_table_size_changes_from_the_server() -> None:
    client, server = pair()
    call(client)
    exchange(client, server)
    server.update_settings({SC.HEADER_TABLE_SIZE: 0})
    exchange(client, server)
    sid = call(client)
    out = client.data_to_send()
    [block] = header_blocks(out)
    assert block[0] == 0x20  # dynamic table size update to 0 first
    assert len(block) > len(TOKEN)  # nothing can be indexed now
    got = server.receive_data(out)
    assert dict(of(got, h2.events.RequestReceived)[0].headers)[b"authorization"] == TOKEN.encode()
    server.update_settings({SC.HEADER_TABLE_SIZE: 8192})
    exchange(client, server)
    assert sid in client.streams
    call(client)
    out = client.data_to_send()
    [block] = header_blocks(out)
    assert block[:3] == b"\x3f\xe1\x3f"  # size update to 8192
    assert of(server.receive_data(out), h2.events.RequestReceived)


def test_large_header_blocks_use_continuation_both_ways() -> None:
    client, server = pair(max_header_list_size=1 << 20)
    sid = client.get_next_available_stream_id()
    big = [("x-big", "v" * 40000)]
    client.send_headers(sid, REQUEST + big, end_stream=True)
    out = client.data_to_send()
    assert [kind for kind, *_ in frames(out)] == [HEADERS, CONTINUATION, CONTINUATION]
    [request] = of(server.receive_data(out), h2.events.RequestReceived)
    assert dict(request.headers)[b"x-big"] == b"v" * 40000

    client = raw_client(max_header_list_size=1 << 20)
    block = encode_block(RESPONSE + [("x-big", "w" * 40000)])
    data = frame(HEADERS, 0, 1, block[:16384]) + frame(CONTINUATION, 0, 1, block[16384:32768])
    data += frame(CONTINUATION, 0x4, 1, block[32768:])
    [response] = client.receive_data(data)
    assert dict(response.headers)[b"x-big"] == b"w" * 40000


# ---------------------------------------------------------------------------------------------- flow control


def test_request_larger_than_frames_and_windows() -> None:
    client, server = pair()
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, REQUEST)
    body = bytes(range(256)) * 1000  # 256,000 bytes: four times the initial windows
    sent = 0
    received = b""
    while sent < len(body):
        window = client.local_flow_control_window(sid)
        assert window > 0
        chunk = body[sent : sent + window]
        client.send_data(sid, chunk, end_stream=sent + len(chunk) == len(body))
        sent += len(chunk)
        out = client.data_to_send()
        assert max(len(p) for kind, _, _, p in frames(out) if kind == DATA) <= 16384
        for event in of(server.receive_data(out), h2.events.DataReceived):
            received += event.data
            server.acknowledge_received_data(event.flow_controlled_length, sid)
        exchange(client, server)
    assert received == body
    with pytest.raises(h2.exceptions.StreamClosedError):
        client.send_data(sid, b"more")


def test_send_beyond_the_windows_is_refused() -> None:
    client, server = pair(initial_window_size=10)
    sid = call(client, body=b"0123456789")
    with pytest.raises(h2.exceptions.StreamClosedError):
        client.send_data(sid, b"x")
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, REQUEST)
    client.send_data(sid, b"01234")
    with pytest.raises(h2.exceptions.FlowControlError):
        client.send_data(sid, b"0123456")
    assert client.local_flow_control_window(sid) == 5
    exchange(client, server)
    server.increment_flow_control_window(100, stream_id=sid)
    _, events = exchange(client, server)
    assert [(e.stream_id, e.delta) for e in of(events, h2.events.WindowUpdated)] == [(sid, 100)]
    assert client.local_flow_control_window(sid) == 105


def test_response_larger_than_our_windows() -> None:
    client = make_client(initial_window_size=1000)
    server = make_server()
    exchange(client, server)
    sid = call(client)
    exchange(client, server)
    server.send_headers(sid, RESPONSE)
    body = b"r" * 5000
    sent = received = 0
    while received < len(body):
        window = server.local_flow_control_window(sid)
        if window and sent < len(body):
            chunk = min(window, len(body) - sent)
            server.send_data(sid, body[sent : sent + chunk])
            sent += chunk
        _, events = exchange(client, server)
        for event in of(events, h2.events.DataReceived):
            received += len(event.data)
            client.increment_flow_control_window(event.flow_controlled_length, stream_id=sid)
            client.increment_flow_control_window(event.flow_controlled_length)
    assert received == len(body)


def test_settings_change_initial_window_of_open_streams() -> None:
    client, server = pair()
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, REQUEST)
    client.send_data(sid, b"x" * 1000)
    assert client.local_flow_control_window(sid) == 64535
    server.update_settings({SC.INITIAL_WINDOW_SIZE: 500})
    _, events = exchange(client, server)
    [changed] = of(events, h2.events.RemoteSettingsChanged)
    assert changed.changed_settings[SC.INITIAL_WINDOW_SIZE].original_value == 65535
    assert client.local_flow_control_window(sid) == -500
    assert client.remote_settings.initial_window_size == 500
    server.update_settings({SC.INITIAL_WINDOW_SIZE: 2000, SC.MAX_FRAME_SIZE: 20000})
    exchange(client, server)
    assert client.local_flow_control_window(sid) == 1000
    assert client.max_outbound_frame_size == 20000


def test_max_concurrent_streams_is_respected() -> None:
    client, server = pair(max_concurrent_streams=2)
    assert client.remote_settings.max_concurrent_streams == 2
    first, second = call(client), call(client)
    assert client.open_outbound_streams == 2
    with pytest.raises(h2.exceptions.TooManyStreamsError):
        client.send_headers(client.get_next_available_stream_id(), REQUEST)
    exchange(client, server)
    answer(server, first)
    exchange(client, server)
    assert client.open_outbound_streams == 1 and second in client.streams
    assert call(client) == 5
    server.update_settings({SC.MAX_CONCURRENT_STREAMS: 10})
    _, events = exchange(client, server)
    assert of(events, h2.events.RemoteSettingsChanged)
    assert client.remote_settings.max_concurrent_streams == 10


def test_inbound_stream_window_violation_resets_the_stream() -> None:
    client = raw_client(initial_window_size=100)
    events = client.receive_data(frame(HEADERS, 0x4, 1, BLOCK) + frame(DATA, 0, 1, b"x" * 101))
    assert [type(e) for e in events] == [h2.events.ResponseReceived, h2.events.StreamReset]
    assert events[1].remote_reset is False
    out = frames(client.data_to_send())
    assert [(k, s, struct.unpack(">I", p)[0]) for k, _, s, p in out] == [
        (RST_STREAM, 1, FLOW_CONTROL_ERROR),
        (WINDOW_UPDATE, 0, 101),  # the discarded DATA is credited back on the connection
    ]


# ---------------------------------------------------------------------------------------------- resets, GOAWAY, PING


def test_resets_both_ways() -> None:
    client, server = pair()
    for resetter, code in ((client, 8), (server, 7)):
        sid = call(client)
        exchange(client, server)
        resetter.reset_stream(sid, code)
        got, events = exchange(client, server)
        seen = got if resetter is client else events
        assert [(type(e), e.stream_id, int(e.error_code), e.remote_reset) for e in seen] == [
            (h2.events.StreamReset, sid, code, True)
        ]
        assert sid not in client.streams and client.open_outbound_streams == 0
        with pytest.raises(h2.exceptions.StreamClosedError):
            client.reset_stream(sid, 8)


def test_frames_on_a_stream_we_reset_are_ignored_and_credited() -> None:
    client = raw_client()
    client.reset_stream(1, 8)
    assert resets(client) == [(1, 8)]
    data = (
        frame(HEADERS, 0x4, 1, BLOCK) + frame(DATA, 0, 1, b"x" * 1000) + frame(RST_STREAM, 0, 1, b"\0\0\0\0")
    )
    assert client.receive_data(data) == []
    out = frames(client.data_to_send())
    assert [(k, s, struct.unpack(">I", p)[0]) for k, _, s, p in out] == [(WINDOW_UPDATE, 0, 1000)]


def test_goaway_from_the_server() -> None:
    client, server = pair()
    first, second = call(client), call(client)
    exchange(client, server)
    server.close_connection(error_code=0, additional_data=b"bye", last_stream_id=first)
    _, events = exchange(client, server)
    [ended] = of(events, h2.events.ConnectionTerminated)
    assert (int(ended.error_code), ended.last_stream_id, ended.additional_data) == (0, first, b"bye")
    with pytest.raises(h2.exceptions.ProtocolError):
        client.send_headers(client.get_next_available_stream_id(), REQUEST)
    # Streams already open may still end.
    events = client.receive_data(frame(HEADERS, 0x5, first, BLOCK))
    assert [type(e) for e in events] == [h2.events.ResponseReceived, h2.events.StreamEnded]
    assert second in client.streams


def test_goaway_from_the_client() -> None:
    client, server = pair()
    sid = call(client)
    exchange(client, server)
    client.close_connection(error_code=ENHANCE_YOUR_CALM, additional_data=b"enough")
    got, _ = exchange(client, server)
    [ended] = of(got, h2.events.ConnectionTerminated)
    assert (int(ended.error_code), ended.last_stream_id, ended.additional_data) == (
        ENHANCE_YOUR_CALM,
        0,
        b"enough",
    )
    for operation in (
        lambda: client.send_headers(client.get_next_available_stream_id(), REQUEST),
        lambda: client.send_data(sid, b"x"),
        lambda: client.increment_flow_control_window(10),
        lambda: client.ping(b"12345678"),
    ):
        with pytest.raises(h2.exceptions.ProtocolError):
            operation()
    client.close_connection()  # a second GOAWAY is not sent
    assert client.data_to_send() == b""
    assert client.receive_data(frame(HEADERS, 0x5, sid, BLOCK)) == []  # nothing more is read


def test_ping_both_ways() -> None:
    client, server = pair()
    client.ping(b"abcdefgh")
    _, events = exchange(client, server)
    assert [e.ping_data for e in of(events, h2.events.PingAckReceived)] == [b"abcdefgh"]
    server.ping(b"12345678")
    got, events = exchange(client, server)
    assert events == []  # answered, not reported
    assert [e.ping_data for e in of(got, h2.events.PingAckReceived)] == [b"12345678"]
    with pytest.raises(ValueError):
        client.ping(b"short")


def test_client_engine_is_ours_with_our_settings() -> None:
    client = client_engine(7)
    assert isinstance(client, ClientH2Connection)
    client.initiate_connection()
    server = make_server()
    server.receive_data(client.data_to_send())
    assert server.remote_settings.max_concurrent_streams == 7
    assert server.remote_settings.initial_window_size == 4 * 1024 * 1024


# ---------------------------------------------------------------------------------------------- errors


CONNECTION_ERRORS = h2_helpers.CONNECTION_ERRORS | {
    "headers on a stream we never opened": (frame(HEADERS, 0x4, 3, BLOCK), PROTOCOL_ERROR),
    "headers on a closed stream": (
        frame(HEADERS, 0x5, 1, BLOCK) + frame(HEADERS, 0x5, 1, BLOCK),
        STREAM_CLOSED,
    ),
    "settings ack with none in flight": (frame(SETTINGS, 1, 0) + frame(SETTINGS, 1, 0), PROTOCOL_ERROR),
}


@pytest.mark.parametrize("name", sorted(CONNECTION_ERRORS))
def test_connection_errors(name: str) -> None:
    data, code = CONNECTION_ERRORS[name]
    client = raw_client()
    assert connection_error(client, data, ClientProtocolError) == code
    with pytest.raises(h2.exceptions.ProtocolError):
        client.send_headers(client.get_next_available_stream_id(), REQUEST)


def test_first_frame_must_be_settings() -> None:
    client = make_client()
    client.data_to_send()
    assert goaway_code(client, frame(PING, 0, 0, b"12345678")) == PROTOCOL_ERROR
    client = make_client()
    client.data_to_send()
    # A server sends no preface string: read as a frame header, its length is far too large.
    assert goaway_code(client, PREFACE) == FRAME_SIZE_ERROR


STREAM_ERRORS = {
    "data before the response headers": (frame(DATA, 0, 1, b"x"), PROTOCOL_ERROR),
    "trailers without end of stream": (
        frame(HEADERS, 0x4, 1, BLOCK) + frame(HEADERS, 0x4, 1, encode_block(OK)),
        PROTOCOL_ERROR,
    ),
    "informational response ending the stream": (
        frame(HEADERS, 0x5, 1, encode_block([(":status", "103")])),
        PROTOCOL_ERROR,
    ),
    "zero window update on a stream": (frame(WINDOW_UPDATE, 0, 1, b"\0" * 4), PROTOCOL_ERROR),
    "stream window overflow": (frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 2**31 - 1)), FLOW_CONTROL_ERROR),
}


@pytest.mark.parametrize("name", sorted(STREAM_ERRORS))
def test_stream_errors(name: str) -> None:
    data, code = STREAM_ERRORS[name]
    client = raw_client()
    assert stream_error(client, data) == [(1, code)]
    # The connection lives on.
    client.send_headers(3, REQUEST, end_stream=True)
    client.data_to_send()
    assert of(client.receive_data(frame(HEADERS, 0x5, 3, BLOCK)), h2.events.ResponseReceived)


def test_data_after_the_server_ended_the_stream() -> None:
    client = make_client()
    client.receive_data(frame(SETTINGS, 0, 0))
    client.send_headers(1, REQUEST)  # our side still open
    client.data_to_send()
    events = client.receive_data(frame(HEADERS, 0x5, 1, BLOCK) + frame(DATA, 0, 1, b"late"))
    assert [type(e) for e in events] == [
        h2.events.ResponseReceived,
        h2.events.StreamEnded,
        h2.events.StreamReset,
    ]
    assert resets(client) == [(1, STREAM_CLOSED)]


# ---------------------------------------------------------------------------------------------- the encoder


def test_encoder_uses_the_static_table_and_indexes_new_pairs() -> None:
    encoder = Encoder()
    block = encoder.encode([(":method", "POST"), (":scheme", "http"), ("x-a", "1"), ("content-type", "grpc")])
    # Indexed 3 and 6; x-a as a new literal name with indexing; content-type by its static name (31).
    assert block == b"\x83\x86" + b"\x40\x03x-a\x011" + b"\x5f\x04grpc"
    assert encoder.size == (3 + 1 + 32) + (12 + 4 + 32)
    # Newest first from 62: content-type, then x-a (63, which takes a second byte as a 6-bit prefix).
    assert encoder.encode([("x-a", "1"), ("content-type", "grpc"), ("x-a", "2")]) == b"\xbf\xbe\x7f\x00\x012"
    assert Decoder().decode(block) == [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b"x-a", b"1"),
        (b"content-type", b"grpc"),
    ]


def test_encoder_does_not_index_large_or_listed_headers() -> None:
    encoder = Encoder(index_limit=100, unindexed=frozenset({"grpc-timeout"}))
    block = encoder.encode([("grpc-timeout", "1S"), ("x-big", "v" * 69), ("x-ok", "v" * 64)])
    assert block[0] == 0x00 and encoder.size == 4 + 64 + 32
    assert Decoder().decode(block)[1] == (b"x-big", b"v" * 69)


def test_encoder_evicts_oldest_first_and_signals_size_changes() -> None:
    encoder = Encoder(max_table_cap=8192)
    decoder = hpack.Decoder()
    ours = Decoder()
    pairs = [(f"x-{i}", "v" * 60) for i in range(100)]
    for start in range(0, 100, 10):
        block = encoder.encode(pairs[start : start + 10])
        assert decoder.decode(block, raw=True) == ours.decode(block)
        assert encoder.size <= 4096
        assert encoder.size == table_size(decoder) == ours.size
    encoder.set_max_table_size(100)
    encoder.set_max_table_size(50)
    encoder.set_max_table_size(1 << 20)  # capped at 8192
    decoder.max_allowed_table_size = ours.max_allowed = 1 << 20
    block = encoder.encode(pairs[:1])
    assert block.startswith(b"\x3f\x13\x3f\xe1\x3f")  # 50, then 8192
    assert decoder.decode(block, raw=True) == ours.decode(block) == [(b"x-0", b"v" * 60)]
    assert decoder.header_table.maxsize == ours.max_size == encoder.max_size == 8192


def test_decoder_remembers_only_blocks_that_use_no_table() -> None:
    literal = encode_block(RESPONSE + OK)  # static name, literal names and values: no table
    first, second = Decoder(), Decoder()
    assert (
        first.decode(literal)
        == second.decode(literal)
        == [
            (b":status", b"200"),
            (b"content-type", b"application/grpc"),
            (b"grpc-status", b"0"),
        ]
    )
    assert hpack_codec._DECODED[literal][0] == (b":status", b"200")
    indexing = Encoder().encode([("x-a", "1")])
    assert first.decode(indexing) == [(b"x-a", b"1")]
    referring = bytes([0x80 | 62])
    assert first.decode(referring) == [(b"x-a", b"1")]
    assert indexing not in hpack_codec._DECODED and referring not in hpack_codec._DECODED
    with pytest.raises(HpackError):
        second.decode(referring)  # its table is empty


def table_size(decoder: hpack.Decoder) -> int:
    return sum(len(name) + len(value) + 32 for name, value in decoder.header_table.dynamic_entries)


NAMES = st.sampled_from(["x-a", "x-b", "authorization", "content-type", ":path", "grpc-timeout", "x-é"])
VALUES = st.one_of(
    st.sampled_from(["", "1", "POST", "/", "application/grpc"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300),
)
BLOCKS = st.lists(
    st.tuples(
        st.lists(st.tuples(NAMES, VALUES), max_size=12),
        st.lists(st.integers(min_value=0, max_value=5000), max_size=3),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(BLOCKS, st.sampled_from([frozenset(), frozenset({"grpc-timeout"})]))
def test_encoder_interop_with_hpack_and_our_decoder(blocks: list, unindexed: frozenset[str]) -> None:
    """Any sequence of blocks and table size changes decodes to the same headers by an independent
    decoder and ours, whose tables stay the size the encoder thinks."""
    encoder = Encoder(index_limit=1024, unindexed=unindexed, max_table_cap=4096)
    theirs = hpack.Decoder(max_header_list_size=1 << 30)
    ours = Decoder()
    for headers, sizes in blocks:
        for size in sizes:  # the peer's SETTINGS_HEADER_TABLE_SIZE changes: its decoders allow the last
            encoder.set_max_table_size(size)
            theirs.max_allowed_table_size = ours.max_allowed = size
        block = encoder.encode(headers)
        want = [(n.encode(), v.encode()) for n, v in headers]
        assert theirs.decode(block, raw=True) == want
        assert ours.decode(block) == want
        assert encoder.size == ours.size == table_size(theirs) <= encoder.max_size
        assert encoder.max_size == ours.max_size == theirs.header_table.maxsize
