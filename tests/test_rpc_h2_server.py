"""The server-side HTTP/2 engine alone (spur.rpc.h2_server), sans-I/O: the ``h2`` library plays the
client (an independent implementation), raw frames play a broken or hostile one."""

from __future__ import annotations

import functools
import struct

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import h2_helpers
import pytest
from h2_helpers import (
    BLOCK,
    REQUEST,
    connection_error,
    exchange,
    frame,
    frames,
    of,
    request_with_trailers,
    resets,
    stream_error,
)

from spur.rpc.h2_engine import (
    CONTINUATION,
    DATA,
    ENHANCE_YOUR_CALM,
    FLOW_CONTROL_ERROR,
    HEADERS,
    PREFACE,
    PROTOCOL_ERROR,
    REFUSED_STREAM,
    RST_STREAM,
    SETTINGS,
    STREAM_CLOSED,
    WINDOW_UPDATE,
)
from spur.rpc.h2_server import ServerH2Connection, ServerProtocolError
from spur.rpc.hpack_codec import encode_block

SC = h2.settings.SettingCodes


def make_server(**settings: int) -> ServerH2Connection:
    values = {SC.MAX_CONCURRENT_STREAMS: 4, SC.MAX_HEADER_LIST_SIZE: 8192, SC.INITIAL_WINDOW_SIZE: 65535}
    values.update({getattr(SC, k.upper()): v for k, v in settings.items()})
    server = ServerH2Connection({int(k): v for k, v in values.items()})
    server.initiate_connection()
    return server


def make_client() -> h2.connection.H2Connection:
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    client.initiate_connection()
    return client


def pair(**settings: int) -> tuple[h2.connection.H2Connection, ServerH2Connection]:
    server = make_server(**settings)
    client = make_client()
    exchange(client, server)
    return client, server


def raw_server(**settings: int) -> ServerH2Connection:
    """A server that has read a raw client's preface and empty SETTINGS (output discarded)."""
    server = make_server(**settings)
    events = server.receive_data(PREFACE + frame(SETTINGS, 0, 0))
    assert [type(e) for e in events] == [h2.events.RemoteSettingsChanged]
    server.data_to_send()
    return server


goaway_code = functools.partial(h2_helpers.goaway_code, error=ServerProtocolError)


# ---------------------------------------------------------------------------------------------- calls


def test_unary_call_with_trailers() -> None:
    client, server = pair()
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, REQUEST)
    client.send_data(sid, b"\0\0\0\0\x03abc", end_stream=True)
    got, _ = exchange(client, server)
    assert [type(e) for e in got] == [
        h2.events.RequestReceived,
        h2.events.DataReceived,
        h2.events.StreamEnded,
    ]
    assert dict(got[0].headers)[b":path"] == b"/spur.Test/Call"
    assert got[1].data == b"\0\0\0\0\x03abc" and got[1].flow_controlled_length == 8
    assert got[1].stream_ended is got[2]

    server.send_headers(sid, [(":status", "200"), ("content-type", "application/grpc")])
    server.send_data(sid, b"\0\0\0\0\x02ok")
    server.send_headers(sid, [("grpc-status", "0")], end_stream=True)
    _, answer = exchange(client, server)
    kinds = [type(e) for e in answer]
    assert kinds[:3] == [h2.events.ResponseReceived, h2.events.DataReceived, h2.events.TrailersReceived]
    assert h2.events.StreamEnded in kinds
    assert answer[1].data == b"\0\0\0\0\x02ok"
    assert dict(answer[2].headers)[b"grpc-status"] == b"0"
    assert sid not in server.streams  # closed both ways: forgotten
    with pytest.raises(h2.exceptions.StreamClosedError):
        server.send_data(sid, b"x")


def test_client_trailers_end_the_request() -> None:
    client, server = pair()
    sid = request_with_trailers(client, server)
    assert server.streams[sid].remote_ended


def test_byte_at_a_time_gives_the_same_events() -> None:
    server = make_server()
    stream = PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, 0x4, 1, BLOCK) + frame(DATA, 0x1, 1, b"hello")
    events: list = []
    for i in range(len(stream)):
        events += server.receive_data(stream[i : i + 1])
    assert [type(e) for e in events] == [
        h2.events.RemoteSettingsChanged,
        h2.events.RequestReceived,
        h2.events.DataReceived,
        h2.events.StreamEnded,
    ]
    assert events[2].data == b"hello"


# ---------------------------------------------------------------------------------------------- flow control


def test_send_window_opens_later() -> None:
    client = make_client()
    client.update_settings({SC.INITIAL_WINDOW_SIZE: 10})
    server = make_server()
    exchange(client, server)
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, REQUEST, end_stream=True)
    exchange(client, server)
    assert server.local_flow_control_window(sid) == 10
    server.send_headers(sid, [(":status", "200")])
    with pytest.raises(h2.exceptions.FlowControlError):
        server.send_data(sid, b"x" * 11)
    server.send_data(sid, b"x" * 10)
    assert server.local_flow_control_window(sid) == 0
    _, got = exchange(client, server)
    assert sum(len(e.data) for e in of(got, h2.events.DataReceived)) == 10
    client.increment_flow_control_window(5, stream_id=sid)
    events, _ = exchange(client, server)
    assert [(e.stream_id, e.delta) for e in of(events, h2.events.WindowUpdated)] == [(sid, 5)]
    assert server.local_flow_control_window(sid) == 5
    server.send_data(sid, b"y" * 5, end_stream=True)
    _, got = exchange(client, server)
    assert of(got, h2.events.StreamEnded)


def test_connection_send_window_limits_all_streams() -> None:
    client, server = pair()
    ids = []
    for _ in range(2):
        sid = client.get_next_available_stream_id()
        client.send_headers(sid, REQUEST, end_stream=True)
        ids.append(sid)
    exchange(client, server)
    server.send_data(ids[0], b"a" * 65535)
    assert server.local_flow_control_window(ids[1]) == 0
    with pytest.raises(h2.exceptions.FlowControlError):
        server.send_data(ids[1], b"b")
    server.receive_data(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 100)))
    assert server.local_flow_control_window(ids[1]) == 100


def test_data_is_split_at_the_peers_frame_size() -> None:
    client, server = pair()
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, REQUEST, end_stream=True)
    exchange(client, server)
    server.send_headers(sid, [(":status", "200")])
    server.send_data(sid, b"z" * 40000, end_stream=True)
    data = [f for f in frames(server.data_to_send()) if f[0] == DATA]
    assert [len(f[3]) for f in data] == [16384, 16384, 40000 - 32768]
    assert [f[1] & 1 for f in data] == [0, 0, 1]


def test_inbound_stream_window_violation_resets_the_stream() -> None:
    server = raw_server(initial_window_size=100)
    events = server.receive_data(frame(HEADERS, 0x4, 1, BLOCK) + frame(DATA, 0, 1, b"x" * 101))
    assert [type(e) for e in events] == [h2.events.RequestReceived, h2.events.StreamReset]
    assert events[1].remote_reset is False
    out = frames(server.data_to_send())
    assert (RST_STREAM, 1) in [(k, s) for k, _, s, _ in out]
    assert struct.unpack(">I", [p for k, _, s, p in out if k == RST_STREAM][0])[0] == FLOW_CONTROL_ERROR
    # The discarded DATA is credited back on the connection.
    assert [struct.unpack(">I", p)[0] for k, _, s, p in out if k == WINDOW_UPDATE and s == 0] == [101]


def test_inbound_connection_window_violation_is_a_connection_error() -> None:
    server = raw_server()
    data = frame(HEADERS, 0x4, 1, BLOCK)
    data += b"".join(frame(DATA, 0, 1, b"x" * 16384) for _ in range(4)) + frame(DATA, 0, 1, b"x" * 10)
    assert goaway_code(server, data) == FLOW_CONTROL_ERROR


def test_windows_we_open_later_are_granted_at_once() -> None:
    server = raw_server()
    server.receive_data(frame(HEADERS, 0x4, 1, BLOCK))
    server.update_settings({SC.INITIAL_WINDOW_SIZE: 1 << 20})
    server.increment_flow_control_window(1 << 20)
    assert server.streams[1].recv_window == 1 << 20
    out = frames(server.data_to_send())
    assert [k for k, *_ in out] == [SETTINGS, WINDOW_UPDATE]
    events = server.receive_data(b"".join(frame(DATA, 0, 1, b"x" * 16384) for _ in range(8)))
    assert len(of(events, h2.events.DataReceived)) == 8
    # The ACK of the first SETTINGS (smaller window) does not shrink it back.
    server.receive_data(frame(SETTINGS, 1, 0))
    assert server.streams[1].recv_window == (1 << 20) - 8 * 16384


def test_peer_initial_window_change_applies_to_open_streams() -> None:
    client, server = pair()
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, REQUEST, end_stream=True)
    exchange(client, server)
    server.send_headers(sid, [(":status", "200")])
    server.send_data(sid, b"x" * 1000)
    assert server.local_flow_control_window(sid) == 64535
    client.update_settings({SC.INITIAL_WINDOW_SIZE: 500})
    events, _ = exchange(client, server)
    assert of(events, h2.events.RemoteSettingsChanged)
    assert server.local_flow_control_window(sid) == -500
    client.update_settings({SC.INITIAL_WINDOW_SIZE: 2000})
    exchange(client, server)
    assert server.local_flow_control_window(sid) == 1000


# ---------------------------------------------------------------------------------------------- frames


def test_continuation_padding_and_priority() -> None:
    server = raw_server()
    big = encode_block(REQUEST + [("x-big", "v" * 5000)])
    padded = bytes([3]) + struct.pack(">IB", 0, 16) + big[:2000] + b"\0\0\0"
    data = frame(HEADERS, 0x8 | 0x20, 1, padded)
    data += frame(CONTINUATION, 0, 1, big[2000:4000]) + frame(CONTINUATION, 0x4, 1, big[4000:])
    data += frame(DATA, 0x8 | 0x1, 1, bytes([4]) + b"body" + b"\0" * 4)
    events = server.receive_data(data)
    assert [type(e) for e in events] == [
        h2.events.RequestReceived,
        h2.events.DataReceived,
        h2.events.StreamEnded,
    ]
    assert dict(events[0].headers)[b"x-big"] == b"v" * 5000
    assert events[1].data == b"body" and events[1].flow_controlled_length == 9


def test_ping_priority_and_unknown_frames() -> None:
    server = raw_server()
    events = server.receive_data(
        frame(6, 0, 0, b"12345678") + frame(2, 0, 3, b"\0\0\0\0\x10") + frame(0xEE, 0, 0, b"whatever")
    )
    assert events == []
    assert frames(server.data_to_send()) == [(6, 1, 0, b"12345678")]


def test_ping_ack_through_h2() -> None:
    client, server = pair()
    client.ping(b"abcdefgh")
    _, got = exchange(client, server)
    assert [e.ping_data for e in of(got, h2.events.PingAckReceived)] == [b"abcdefgh"]


def test_client_reset() -> None:
    client, server = pair()
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, REQUEST)
    exchange(client, server)
    client.reset_stream(sid, 8)
    events, _ = exchange(client, server)
    assert [(type(e), e.stream_id, int(e.error_code), e.remote_reset) for e in events] == [
        (h2.events.StreamReset, sid, 8, True)
    ]
    assert sid not in server.streams
    with pytest.raises(h2.exceptions.StreamClosedError):
        server.send_headers(sid, [(":status", "200")])
    with pytest.raises(h2.exceptions.StreamClosedError):
        server.local_flow_control_window(sid)


def test_goaway_both_ways() -> None:
    client, server = pair()
    client.close_connection(error_code=0)
    events, _ = exchange(client, server)
    assert [(type(e), int(e.error_code)) for e in events] == [(h2.events.ConnectionTerminated, 0)]

    client, server = pair()
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, REQUEST, end_stream=True)
    exchange(client, server)
    server.close_connection(error_code=ENHANCE_YOUR_CALM, additional_data=b"go away")
    _, got = exchange(client, server)
    ended = of(got, h2.events.ConnectionTerminated)
    assert [(int(e.error_code), e.last_stream_id, e.additional_data) for e in ended] == [
        (ENHANCE_YOUR_CALM, sid, b"go away")
    ]
    with pytest.raises(h2.exceptions.ProtocolError):
        server.send_headers(sid, [(":status", "200")])
    server.close_connection()  # a second GOAWAY is not sent
    assert server.data_to_send() == b""


def test_reset_stream_discards_later_data_and_credits_it() -> None:
    server = raw_server()
    server.receive_data(frame(HEADERS, 0x4, 1, BLOCK))
    server.reset_stream(1, 0)
    assert resets(server) == [(1, 0)]
    events = server.receive_data(frame(DATA, 0, 1, b"x" * 1000) + frame(HEADERS, 0x5, 1, BLOCK))
    assert events == []
    out = frames(server.data_to_send())
    assert [(k, s, struct.unpack(">I", p)[0]) for k, _, s, p in out] == [(WINDOW_UPDATE, 0, 1000)]


def test_max_concurrent_streams_refuses_one_past_the_limit() -> None:
    server = raw_server(max_concurrent_streams=2)
    events = server.receive_data(b"".join(frame(HEADERS, 0x4, sid, BLOCK) for sid in (1, 3, 5)))
    assert [e.stream_id for e in of(events, h2.events.RequestReceived)] == [1, 3]
    assert resets(server) == [(5, REFUSED_STREAM)]
    assert server.receive_data(frame(DATA, 1, 5, b"ignored")) == []
    server.reset_stream(1, 0)
    server.data_to_send()
    events = server.receive_data(frame(HEADERS, 0x4, 7, BLOCK))
    assert [e.stream_id for e in of(events, h2.events.RequestReceived)] == [7]


def test_max_concurrent_streams_through_h2() -> None:
    client, server = pair(max_concurrent_streams=1)
    assert client.remote_settings.max_concurrent_streams == 1


# ---------------------------------------------------------------------------------------------- errors


CONNECTION_ERRORS = h2_helpers.CONNECTION_ERRORS | {
    "headers on a closed stream": (
        frame(HEADERS, 0x5, 3, BLOCK) + frame(HEADERS, 0x5, 1, BLOCK),
        STREAM_CLOSED,
    ),
}


@pytest.mark.parametrize("name", sorted(CONNECTION_ERRORS))
def test_connection_errors(name: str) -> None:
    data, code = CONNECTION_ERRORS[name]
    assert connection_error(raw_server(), data, ServerProtocolError) == code


def test_bad_preface_and_first_frame() -> None:
    assert goaway_code(make_server(), b"GET / HTTP/1.1\r\n\r\n" + b"\0" * 20) == PROTOCOL_ERROR
    server = make_server()
    assert server.receive_data(PREFACE[:10]) == []
    assert goaway_code(server, PREFACE[10:] + frame(6, 0, 0, b"12345678")) == PROTOCOL_ERROR


STREAM_ERRORS = {
    "data after end of stream": (frame(HEADERS, 0x5, 1, BLOCK) + frame(DATA, 0, 1, b"x"), STREAM_CLOSED),
    "headers after end of stream": (
        frame(HEADERS, 0x5, 1, BLOCK) + frame(HEADERS, 0x5, 1, BLOCK),
        STREAM_CLOSED,
    ),
    "trailers without end of stream": (
        frame(HEADERS, 0x4, 1, BLOCK) + frame(HEADERS, 0x4, 1, BLOCK),
        PROTOCOL_ERROR,
    ),
    "zero window update on a stream": (
        frame(HEADERS, 0x4, 1, BLOCK) + frame(WINDOW_UPDATE, 0, 1, b"\0" * 4),
        PROTOCOL_ERROR,
    ),
    "stream window overflow": (
        frame(HEADERS, 0x4, 1, BLOCK) + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 2**31 - 1)),
        FLOW_CONTROL_ERROR,
    ),
}


@pytest.mark.parametrize("name", sorted(STREAM_ERRORS))
def test_stream_errors(name: str) -> None:
    data, code = STREAM_ERRORS[name]
    server = raw_server()
    assert stream_error(server, data) == [(1, code)]
    # The connection lives on.
    assert of(server.receive_data(frame(HEADERS, 0x5, 3, BLOCK)), h2.events.RequestReceived)


def test_data_on_a_stream_closed_both_ways_is_stream_closed() -> None:
    server = raw_server()
    server.receive_data(frame(HEADERS, 0x5, 1, BLOCK))
    server.send_headers(1, [(":status", "200")], end_stream=True)
    server.data_to_send()
    assert server.receive_data(frame(DATA, 0, 1, b"late")) == []
    assert resets(server) == [(1, STREAM_CLOSED)]


def test_a_peer_that_reads_its_answers_may_ping_without_end() -> None:
    """The bound on queued control frames counts only what the transport has not taken: a peer whose
    acknowledgements leave (data_to_send between reads) may send any number of PINGs."""
    from spur.rpc.h2_engine import MAX_QUEUED_CONTROL

    server = raw_server()
    burst = frame(6, 0, 0, b"12345678") * (MAX_QUEUED_CONTROL // 2)  # PING
    for _ in range(5):
        assert server.receive_data(burst) == []
        acks = frames(server.data_to_send())
        assert len(acks) == MAX_QUEUED_CONTROL // 2 and all(f[:2] == (6, 1) for f in acks)
