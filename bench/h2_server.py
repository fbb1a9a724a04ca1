"""Server-side HTTP/2 CPU per unary gRPC call: h2's ``H2Connection`` vs :mod:`spur.rpc.h2_server`.

One h2 client (configured as spur.rpc.channel configured it before spur.rpc.h2_client, so the figures
stay comparable with earlier runs) encodes N calls once (HEADERS with a bearer token and a grpc-timeout,
a 100-byte DATA with END_STREAM; its HPACK dynamic table in use, as a real client's is). Each engine,
configured as :class:`spur.rpc.transport.H2Transport` configures it, is fed that same byte stream one call at a time
and answers every call as the gRPC server does (response HEADERS, one DATA message, trailers with
END_STREAM), crediting received DATA on the connection as the transport does. Timed with
``time.process_time`` over the whole loop (receive_data + send_headers/send_data/trailers +
data_to_send); rounds alternate between the engines; figures are medians of the rounds.

Usage: ``.venv/bin/python -m bench.h2_server [--calls 20000] [--rounds 7]``

:mod:`bench.h2_client` measures the client side with the same calls and helpers.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import h2.config
import h2.connection
import h2.events
import h2.settings

from bench.common import median, print_table
from spur.rpc.h2_engine import H2Engine
from spur.rpc.transport import CONNECTION_WINDOW, STREAM_WINDOW, server_engine

_MAX_STREAMS = 128
REQUEST = [
    (":method", "POST"),
    (":scheme", "http"),
    (":path", "/spur.v1.Controller/SubmitJob"),
    (":authority", "127.0.0.1:6817"),
    ("te", "trailers"),
    ("content-type", "application/grpc"),
    ("grpc-accept-encoding", "identity,gzip"),
    ("user-agent", "spur-python"),
    ("authorization", "Bearer " + "eyJhbGciOiJFZERTQSJ9." + "x" * 260),
    ("grpc-timeout", "30S"),
]
BODY = b"\0\0\0\0\x5f" + b"m" * 95
RESPONSE = [("grpc-status", "0")]
ANSWER_HEADERS = [
    (":status", "200"),
    ("content-type", "application/grpc"),
    ("grpc-accept-encoding", "identity,gzip"),
]
ANSWER = b"\0\0\0\0\x10" + b"r" * 16

Engine = h2.connection.H2Connection | H2Engine


def h2_engine(client_side: bool, max_concurrent_streams: int) -> h2.connection.H2Connection:
    """h2's connection, configured as spur.rpc.transport configured it before spur.rpc.h2_server
    (server) and spur.rpc.h2_client (client)."""
    config = h2.config.H2Configuration(
        client_side=client_side,
        header_encoding=None,
        normalize_outbound_headers=not client_side,
        validate_outbound_headers=False,
        validate_inbound_headers=False,
        normalize_inbound_headers=False,
    )
    conn = h2.connection.H2Connection(config=config)
    conn.local_settings = h2.settings.Settings(
        client=client_side,
        initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: max_concurrent_streams,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 64 * 1024,
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
        },
    )
    return conn


def h2_server() -> h2.connection.H2Connection:
    return h2_engine(False, _MAX_STREAMS)


def h2_client() -> h2.connection.H2Connection:
    return h2_engine(True, 100)


def start(engine: Engine) -> None:
    engine.initiate_connection()
    engine.increment_flow_control_window(CONNECTION_WINDOW - 65535)


def encode_calls(calls: int) -> tuple[bytes, list[bytes]]:
    """The client's preface and the bytes of each call (the client hears our engine's answers)."""
    client = h2_client()
    client.initiate_connection()
    server = server_engine(_MAX_STREAMS)
    start(server)
    preface = client.data_to_send()
    server.receive_data(preface)
    client.receive_data(server.data_to_send())
    replies = client.data_to_send()  # its SETTINGS ACK: sent with the first call
    per_call: list[bytes] = []
    unacked = [0]
    for _ in range(calls):
        sid = client.get_next_available_stream_id()
        client.send_headers(sid, REQUEST)
        client.send_data(sid, BODY, end_stream=True)
        data = replies + client.data_to_send()
        per_call.append(data)
        serve(server, data, unacked)
        for event in client.receive_data(server.data_to_send()):
            if isinstance(event, h2.events.DataReceived):  # as spur.rpc.channel credits what it read
                client.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        replies = client.data_to_send()
    return preface, per_call


def credit(engine: Engine, event: h2.events.DataReceived, unacked: list[int]) -> None:
    """Credit received DATA on the connection as H2Transport does (in quarter-window steps)."""
    unacked[0] += event.flow_controlled_length or 0
    if unacked[0] >= CONNECTION_WINDOW // 4:
        engine.increment_flow_control_window(unacked[0])
        unacked[0] = 0


def serve(engine: Engine, data: bytes, unacked: list[int] | None = None) -> None:
    """What the gRPC server does with one call's bytes (events, answer, connection credit)."""
    for event in engine.receive_data(data):
        if isinstance(event, h2.events.DataReceived) and unacked is not None:
            credit(engine, event, unacked)
        elif isinstance(event, h2.events.StreamEnded):
            sid = event.stream_id
            engine.send_headers(sid, ANSWER_HEADERS, end_stream=False)
            engine.send_data(sid, ANSWER)
            engine.send_headers(sid, RESPONSE, end_stream=True)


def run(make: Callable[[], Engine], preface: bytes, calls: list[bytes]) -> float:
    """CPU seconds per call for one engine over the whole stream."""
    engine = make()
    start(engine)
    engine.receive_data(preface)
    engine.data_to_send()
    unacked = [0]
    began = time.process_time()
    for data in calls:
        serve(engine, data, unacked)
        engine.data_to_send()
    return (time.process_time() - began) / len(calls)


def compare(engines: dict[str, Callable[[], float]], rounds: int, title: str) -> None:
    """Run each engine's measurement (CPU seconds per call) ``rounds`` times, taking turns; print the
    medians and minimums (us) and the ratio of the first engine's median to the second's."""
    results: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(rounds):
        for name, measure in engines.items():
            results[name].append(measure())
    medians = {name: median(values) * 1e6 for name, values in results.items()}
    rows = [[name, medians[name], min(values) * 1e6] for name, values in results.items()]
    print_table(["engine", "us CPU/call (median)", "min"], rows, title)
    base, ours = list(medians)[:2]
    print(f"\n{base.split('.')[0]} / {ours}: {medians[base] / medians[ours]:.1f}x")


def arguments(doc: str | None) -> argparse.Namespace:
    """``--calls`` and ``--rounds``, with ``doc`` as the help."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    return parser.parse_args()


def main() -> None:
    args = arguments(__doc__)
    preface, calls = encode_calls(args.calls)
    compare(
        {
            "h2.connection.H2Connection": lambda: run(h2_server, preface, calls),
            "spur.rpc.h2_server": lambda: run(lambda: server_engine(_MAX_STREAMS), preface, calls),
        },
        args.rounds,
        f"server HTTP/2 CPU per unary call, {args.calls} calls x {args.rounds} rounds",
    )


if __name__ == "__main__":
    main()
