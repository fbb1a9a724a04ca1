"""Client-side HTTP/2 CPU per unary gRPC call: h2's ``H2Connection`` vs :mod:`spur.rpc.h2_client`.

The calls of :mod:`bench.h2_server` (same headers, bearer token and 100-byte request), each with its own
``grpc-timeout`` as a real deadline gives. One driving client sends them to :mod:`spur.rpc.h2_server`,
which answers each (response HEADERS, one DATA message, trailers with END_STREAM); the server's bytes are
kept, call by call. Each client engine, configured as :func:`spur.rpc.transport.client_engine` configures
it (h2's as it was before spur.rpc.h2_client), then makes the same calls as spur.rpc.channel does (check
the stream limit, take the next stream id, send the headers, read its send window, send the request with
END_STREAM, take the bytes to send) and is fed the server's bytes for the call, crediting received DATA on
the connection as the transport does. Timed with ``time.process_time`` over the whole loop; rounds
alternate between the engines; figures are medians of the rounds.

Usage: ``.venv/bin/python -m bench.h2_client [--calls 20000] [--rounds 7]``
"""

from __future__ import annotations

import time
from collections.abc import Callable

import h2.connection
import h2.events

from bench.h2_server import _MAX_STREAMS, BODY, REQUEST, arguments, compare, credit, h2_client, serve, start
from spur.rpc.h2_client import ClientH2Connection
from spur.rpc.transport import client_engine, server_engine

ClientEngine = h2.connection.H2Connection | ClientH2Connection


def call_headers(calls: int) -> list[list[tuple[str, str]]]:
    """Each call's headers: :data:`bench.h2_server.REQUEST` with a deadline counting down."""
    base = [header for header in REQUEST if header[0] != "grpc-timeout"]
    return [base + [("grpc-timeout", f"{29_999_000 - 7 * i}u")] for i in range(calls)]


def encode_answers(headers: list[list[tuple[str, str]]]) -> tuple[bytes, list[bytes]]:
    """The server's preface and its bytes for each call (answers, SETTINGS ACK, connection credit)."""
    client = client_engine(100)
    start(client)
    server = server_engine(_MAX_STREAMS)
    start(server)
    server.receive_data(client.data_to_send())
    preface = server.data_to_send()
    client.receive_data(preface)
    client_unacked, server_unacked = [0], [0]
    per_call: list[bytes] = []
    for call in headers:
        serve(server, one_call(client, call, b"", client_unacked), server_unacked)
        answer = server.data_to_send()
        per_call.append(answer)
        one_call(client, [], answer, client_unacked)
    return preface, per_call


def one_call(
    engine: ClientEngine, headers: list[tuple[str, str]], answer: bytes, unacked: list[int]
) -> bytes:
    """What spur.rpc.channel's connection does with the engine for one unary call (see the module
    docstring): send a request with ``headers`` (none: send nothing), then read ``answer``; the bytes
    the request took."""
    sent = b""
    if headers:
        if engine.open_outbound_streams >= engine.remote_settings.max_concurrent_streams:
            raise RuntimeError("every stream of the bench ends before the next call")
        sid = engine.get_next_available_stream_id()
        engine.send_headers(sid, headers)
        stream = engine.streams.get(sid)  # H2Transport.stream_is_open, before each DATA
        assert stream is not None and not stream.closed
        size = min(engine.local_flow_control_window(sid), engine.max_outbound_frame_size, len(BODY))
        assert size == len(BODY)
        engine.send_data(sid, BODY, end_stream=True)
        sent = engine.data_to_send()
    if answer:
        for event in engine.receive_data(answer):
            if isinstance(event, h2.events.DataReceived):
                credit(engine, event, unacked)
    return sent


def run(
    make: Callable[[], ClientEngine],
    preface: bytes,
    headers: list[list[tuple[str, str]]],
    answers: list[bytes],
) -> float:
    """CPU seconds per call for one client engine over the whole stream."""
    engine = make()
    start(engine)
    engine.data_to_send()
    engine.receive_data(preface)
    engine.data_to_send()
    unacked = [0]
    began = time.process_time()
    for call, answer in zip(headers, answers, strict=True):
        one_call(engine, call, answer, unacked)
    return (time.process_time() - began) / len(headers)


def main() -> None:
    args = arguments(__doc__)
    headers = call_headers(args.calls)
    preface, answers = encode_answers(headers)
    compare(
        {
            "h2.connection.H2Connection": lambda: run(h2_client, preface, headers, answers),
            "spur.rpc.h2_client": lambda: run(lambda: client_engine(100), preface, headers, answers),
        },
        args.rounds,
        f"client HTTP/2 CPU per unary call, {args.calls} calls x {args.rounds} rounds",
    )


if __name__ == "__main__":
    main()
