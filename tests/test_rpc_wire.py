"""What the server puts on the wire, checked with a bare h2 client, plus the pure wire helpers."""

from __future__ import annotations

import gzip

import h2.events
import pytest
import trio
from rpc_helpers import RawH2Client, grpc_frame, start_server

from spur.rpc.channel import InvalidTarget, parse_target
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode, decode_grpc_message, encode_grpc_message
from spur.rpc.wire import MessageDecoder, encode_timeout, frame_message, parse_timeout

SUBMIT = "/spur.v1.Controller/SubmitJob"


def submit_body(**spec) -> bytes:
    return grpc_frame(pb.SubmitJobRequest(spec=pb.JobSpec(**spec)).SerializeToString())


async def test_ok_response_has_headers_data_and_trailers(nursery):
    srv = await start_server(nursery)
    client = await RawH2Client.connect(srv.port)
    resp = await client.call(SUBMIT, submit_body(name="trailer", script="abcd"))
    headers, trailers = resp.header_blocks
    assert headers[":status"] == "200"
    assert headers["content-type"] == "application/grpc"
    assert resp.data == grpc_frame(pb.SubmitJobResponse(job_id=4).SerializeToString())
    assert trailers["grpc-status"] == "0"
    assert trailers["x-job-state"] == "PENDING"


async def test_error_is_trailers_only_with_percent_encoded_message(nursery):
    srv = await start_server(nursery)
    client = await RawH2Client.connect(srv.port)
    resp = await client.call(SUBMIT, submit_body(name="abort", comment="50% ünï\n"))
    assert len(resp.header_blocks) == 1 and resp.data == b""
    only = resp.header_blocks[0]
    assert only[":status"] == "200"
    assert only["content-type"] == "application/grpc"
    assert only["grpc-status"] == str(int(StatusCode.INVALID_ARGUMENT))
    assert only["grpc-message"] == "50%25 %C3%BCn%C3%AF%0A"


async def test_unknown_method_is_unimplemented_trailers_only(nursery):
    srv = await start_server(nursery)
    client = await RawH2Client.connect(srv.port)
    resp = await client.call("/spur.v1.Controller/Frobnicate", grpc_frame(b""))
    assert resp.header_blocks[0]["grpc-status"] == str(int(StatusCode.UNIMPLEMENTED))


async def test_compression(nursery):
    srv = await start_server(nursery)
    client = await RawH2Client.connect(srv.port)
    raw = pb.SubmitJobRequest(spec=pb.JobSpec(script="z" * 1000)).SerializeToString()
    # Compressed flag without a declared encoding is a protocol violation.
    resp = await client.call(SUBMIT, grpc_frame(gzip.compress(raw), compressed=True))
    assert resp.trailers["grpc-status"] == str(int(StatusCode.INTERNAL))
    # An encoding we do not speak is UNIMPLEMENTED.
    resp = await client.call(SUBMIT, grpc_frame(raw), [("grpc-encoding", "snappy")])
    assert resp.trailers["grpc-status"] == str(int(StatusCode.UNIMPLEMENTED))
    # gzip is understood.
    resp = await client.call(
        SUBMIT, grpc_frame(gzip.compress(raw), compressed=True), [("grpc-encoding", "gzip")]
    )
    assert resp.trailers["grpc-status"] == "0"
    assert pb.SubmitJobResponse.FromString(resp.data[5:]).job_id == 1000


async def test_non_grpc_content_type_is_415(nursery):
    srv = await start_server(nursery)
    client = await RawH2Client.connect(srv.port)
    stream_id = client.conn.get_next_available_stream_id()
    client.conn.send_headers(
        stream_id,
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", SUBMIT),
            (":authority", "t"),
            ("content-type", "text/plain"),
        ],
        end_stream=True,
    )
    await client.flush()
    with trio.fail_after(5):
        while True:
            got = [e for e in await client.events() if isinstance(e, h2.events.ResponseReceived)]
            if got:
                break
    assert dict(got[0].headers)[":status"] == "415"


async def test_server_answers_ping(nursery):
    srv = await start_server(nursery)
    client = await RawH2Client.connect(srv.port)
    client.conn.ping(b"spurping")
    await client.flush()
    with trio.fail_after(5):
        while True:
            acks = [e for e in await client.events() if isinstance(e, h2.events.PingAckReceived)]
            if acks:
                break
    assert acks[0].ping_data == b"spurping"


async def test_server_side_deadline(nursery, autojump_clock):
    srv = await start_server(nursery)
    client = await RawH2Client.connect(srv.port)
    resp = await client.call(SUBMIT, submit_body(name="deadline"), [("grpc-timeout", "1500m")])
    assert pb.SubmitJobResponse.FromString(resp.data[5:]).job_id == 1500  # ctx sees the remaining time
    # A client that does not enforce its own deadline still gets DEADLINE_EXCEEDED from the server.
    resp = await client.call(SUBMIT, submit_body(name="hang"), [("grpc-timeout", "2S")])
    assert resp.trailers["grpc-status"] == str(int(StatusCode.DEADLINE_EXCEEDED))
    assert srv.controller.cancelled.is_set()
    resp = await client.call(SUBMIT, submit_body(), [("grpc-timeout", "soon")])
    assert resp.trailers["grpc-status"] == str(int(StatusCode.INVALID_ARGUMENT))


# ---------------------------------------------------------------- pure helpers


@pytest.mark.parametrize(
    ("seconds", "wire"), [(5.0, "5000000u"), (0.001, "1000000n"), (3600.0, "3600000m"), (10**9, "16666667M")]
)
def test_encode_timeout(seconds, wire):
    assert encode_timeout(seconds) == wire
    assert parse_timeout(wire) == pytest.approx(seconds, rel=1e-6)


def test_parse_timeout_rejects_garbage():
    for bad in ("", "5", "123456789S", "5s", "-1S"):
        with pytest.raises(ValueError, match="malformed grpc-timeout"):
            parse_timeout(bad)


def test_grpc_message_round_trip():
    text = "plain ascii; 100% ünïcode\r\n\t日本"
    encoded = encode_grpc_message(text)
    assert all(0x20 <= ord(c) <= 0x7E for c in encoded)
    assert decode_grpc_message(encoded) == text
    assert decode_grpc_message("bad %zz escape %") == "bad %zz escape %"


def test_decoder_reassembles_across_chunks_and_enforces_limit():
    wire = frame_message(b"hello") + frame_message(b"") + frame_message(b"x" * 100)
    decoder = MessageDecoder(max_message_bytes=100)
    out = []
    for i in range(len(wire)):
        out += decoder.feed(wire[i : i + 1])
    assert out == [b"hello", b"", b"x" * 100]
    assert decoder.pending == 0
    with pytest.raises(RpcError) as err:
        decoder.feed(frame_message(b"y" * 101))
    assert err.value.code == StatusCode.RESOURCE_EXHAUSTED


def test_parse_target():
    assert parse_target("ctl1:6817") == ("ctl1", 6817)
    assert parse_target("http://10.0.0.1:6817") == ("10.0.0.1", 6817)
    assert parse_target("[::1]:6818") == ("::1", 6818)
    for bad in ("ctl1", "::1:80", "https://x:1", ":80", "x:0", "x:99999"):
        with pytest.raises(InvalidTarget):
            parse_target(bad)


def test_rpc_error_str():
    err = RpcError(StatusCode.NOT_FOUND, "job 9 not found")
    assert str(err) == "NOT_FOUND: job 9 not found"
    assert err.metadata == {}


def test_header_blocks_decode_the_same_each_time_and_long_values_are_not_kept() -> None:
    from spur.rpc import wire

    token = b"Bearer " + b"t" * 200
    block = [(b":method", b"POST"), (b"Content-Type", b"application/grpc"), (b"x-a", b"1"), (b"X-A", b"2")]
    want = {":method": "POST", "content-type": "application/grpc", "x-a": "1,2"}
    assert wire.decode_headers(block) == want
    assert wire.decode_headers(block) == want  # now from the decoded fields
    assert wire.decode_headers([[b"x-b", b"3"], ("x-c", "4")]) == {"x-b": "3", "x-c": "4"}  # lists, text
    assert wire.decode_headers([(b"authorization", token)])["authorization"] == token.decode()
    assert (b"authorization", token) not in wire._DECODED_FIELDS  # a credential is never held
    assert wire.decode_headers([(b"x-spur-node-credential", b"c0ffee")]) == {"x-spur-node-credential": "c0ffee"}
    assert (b"x-spur-node-credential", b"c0ffee") not in wire._DECODED_FIELDS  # not even a short one
    assert wire.decode_headers([(b"x-bad", b"\xff")]) == {"x-bad": "\ufffd"}
    for i in range(2 * wire._DECODED_FIELDS_MAX):
        wire.decode_headers([(b"grpc-timeout", f"{i}u".encode())])
    assert len(wire._DECODED_FIELDS) <= wire._DECODED_FIELDS_MAX
    assert wire.decode_headers(block) == want


async def test_a_raw_peer_cannot_grow_the_decoded_fields_or_park_a_credential_in_them(nursery):
    from spur.rpc import wire

    srv = await start_server(nursery)
    client = await RawH2Client.connect(srv.port)
    for i in range(wire._DECODED_FIELDS_MAX + 200):  # a fresh short value on every call
        extra = [(f"x-junk-{i % 7}", f"v{i}"), ("x-api-key", f"k{i}")]
        resp = await client.call(SUBMIT, submit_body(name="flood", script="abcd"), extra)
        assert resp.header_blocks[-1]["grpc-status"] == "0"
    assert len(wire._DECODED_FIELDS) <= wire._DECODED_FIELDS_MAX
    assert not [name for name, _ in wire._DECODED_FIELDS.values() if "key" in name]
    resp = await client.call(SUBMIT, submit_body(name="after", script="abcd"))
    assert resp.header_blocks[0][":status"] == "200" and resp.header_blocks[-1]["grpc-status"] == "0"
