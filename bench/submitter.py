"""A pipelined load generator: SubmitJob at a steady rate, from its own process, for little CPU.

    python -m bench.submitter --address 127.0.0.1:6817 --rate 2000 --duration 60 [--connections 4]
                              [--drain 30] [--per-call 1] [--linger-ms 20] [--out stats.json]

The benchmark's own client (``bench.fleet``'s trio/h2 stub) spends about as much CPU per call as the
controller does, so on two cores it competed with what it measured. This one is open-loop and
sans-coroutine: blocking sockets under one ``selectors`` loop, the client HTTP/2 codec the CLI uses
(:class:`spur.rpc.h2_unary.H2Connection`), one header block and one request body encoded once and
written for every call, up to the server's 128 concurrent streams per connection. Submission ``i`` is
due at ``i / rate`` s; its latency runs from that moment to the response's trailers (time waiting for a
free stream counts). A refusal (RESOURCE_EXHAUSTED) is retried after ``attempt * U(0.5, 1.5)`` s, as
Spur's sbatch backs off, at most 15 attempts. After ``--duration`` it waits up to ``--drain`` s for
the calls in flight, then prints one JSON object (and writes it to ``--out``): counts, latency
percentiles, and its own CPU seconds.

With ``--per-call N`` (N > 1) it submits as a workflow engine with a bulk client would: the
submissions due are sent in ``spur.batch.v1.ControllerBatch/SubmitJobs`` calls of up to N, a call
leaving when N are waiting or the oldest has waited ``--linger-ms``; each item's outcome counts as its
own submission (a refused item is retried alone, in a later call).
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import selectors
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from spur.rpc.h2_unary import Data, H2Connection, Headers, Reset
from spur.rpc.hpack_codec import encode_block
from spur.rpc.proto import batch_pb2
from spur.rpc.proto import spur_pb2 as pb

SUBMIT_PATH = "/spur.v1.Controller/SubmitJob"
SUBMIT_MANY_PATH = "/spur.batch.v1.ControllerBatch/SubmitJobs"
MAX_STREAMS = 128  # spur.rpc.server's SETTINGS_MAX_CONCURRENT_STREAMS
MAX_ATTEMPTS = 15
RESOURCE_EXHAUSTED = 8
SPEC = pb.JobSpec(name="fleet", script="#!/bin/sh\ntrue\n", work_dir="/tmp", cpus_per_task=1)


@dataclass
class Tally:
    """What the run saw; ``latencies`` are seconds from due time to the answer of accepted calls."""

    submitted: int = 0
    refused: int = 0
    errors: int = 0
    gave_up: int = 0
    latencies: list[float] = field(default_factory=list)
    error_samples: list[str] = field(default_factory=list)

    def error(self, text: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(text)


def request_headers(
    authority: str, metadata: dict[str, str], path: str = SUBMIT_PATH
) -> list[tuple[str, str]]:
    return [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", authority),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        *sorted(metadata.items()),
    ]


def grpc_body(message: bytes) -> bytes:
    return b"\x00" + len(message).to_bytes(4, "big") + message


class _Conn:
    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.h2 = H2Connection()
        # stream -> its submissions, (due time, attempt) each (one, unless --per-call)
        self.open: dict[int, list[tuple[float, int]]] = {}
        self.status: dict[int, int] = {}
        self.body: dict[int, bytes] = {}  # a SubmitJobs answer's bytes so far

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            self.sock.setblocking(True)
            try:
                self.sock.sendall(data)
            finally:
                self.sock.setblocking(False)


def run(
    address: str,
    rate: float,
    duration: float,
    connections: int,
    drain: float,
    per_call: int = 1,
    linger: float = 0.02,
) -> dict[str, object]:
    host, _, port = address.rpartition(":")
    from spur.auth.identity import identity_metadata

    metadata = identity_metadata()
    item = pb.SubmitJobRequest(spec=SPEC).SerializeToString()
    bulk = per_call > 1
    block = encode_block(request_headers(address, metadata, SUBMIT_MANY_PATH if bulk else SUBMIT_PATH))
    # the request body of a call carrying n submissions
    bodies = (
        {
            n: grpc_body(batch_pb2.SubmitJobsRequest(submissions=[item] * n).SerializeToString())
            for n in range(1, per_call + 1)
        }
        if bulk
        else {1: grpc_body(item)}
    )
    calls = 0
    conns = [_Conn((host, int(port))) for _ in range(connections)]
    selector = selectors.DefaultSelector()
    for conn in conns:
        conn.flush()  # preface and SETTINGS
        selector.register(conn.sock, selectors.EVENT_READ, conn)
    tally = Tally()
    total = int(rate * duration)
    retries: list[tuple[float, float, int]] = []  # heap of (when, due, attempt)
    waiting: list[tuple[float, int]] = []  # due calls without a free stream: (due, attempt)
    cpu0, t0 = time.process_time(), time.monotonic()
    issued = 0
    end = t0 + duration

    def outcome(due: float, attempt: int, status: int, now: float) -> None:
        if status == 0:
            tally.submitted += 1
            tally.latencies.append(now - due)
        elif status == RESOURCE_EXHAUSTED:
            tally.refused += 1
            if attempt >= MAX_ATTEMPTS:
                tally.gave_up += 1
            else:
                heapq.heappush(retries, (now + attempt * (0.5 + random.random()), due, attempt + 1))
        else:
            tally.error(f"grpc-status {status}")

    def finish(conn: _Conn, stream_id: int, status: int, now: float) -> None:
        items = conn.open.pop(stream_id)
        conn.status.pop(stream_id, None)
        answer = conn.body.pop(stream_id, b"")
        conn.h2.forget(stream_id)
        if not bulk or status != 0:
            for due, attempt in items:
                outcome(due, attempt, status, now)
            return
        outcomes = batch_pb2.BatchOutcomes.FromString(answer[5:]).outcomes
        for (due, attempt), result in zip(items, outcomes, strict=True):
            outcome(due, attempt, result.code, now)

    while True:
        now = time.monotonic()
        while issued < total and t0 + issued / rate <= now:
            waiting.append((t0 + issued / rate, 1))
            issued += 1
        while retries and retries[0][0] <= now:
            _, due, attempt = heapq.heappop(retries)
            waiting.append((due, attempt))
        # --per-call: a bulk call leaves when it is full or its oldest submission has lingered enough
        ready = bool(waiting) and (not bulk or len(waiting) >= per_call or min(waiting)[0] + linger <= now)
        if ready:
            for conn in conns:
                room = MAX_STREAMS - len(conn.open)
                if room <= 0:
                    continue
                if bulk:
                    groups = [waiting[i : i + per_call] for i in range(0, len(waiting), per_call)][:room]
                    waiting = waiting[sum(len(g) for g in groups) :]
                else:
                    groups, waiting = [[w] for w in waiting[:room]], waiting[room:]
                for group in groups:
                    sid = conn.h2.start_encoded(block)
                    conn.h2.send_data(sid, bodies[len(group)])
                    conn.open[sid] = group
                    calls += 1
                conn.flush()
                if not waiting:
                    break
        in_flight = any(conn.open for conn in conns) or waiting or retries
        if issued >= total and not in_flight:
            break
        if now > end + drain:
            break
        next_due = t0 + issued / rate if issued < total else now + 0.05
        if retries:
            next_due = min(next_due, retries[0][0])
        if waiting and bulk:
            next_due = min(next_due, min(waiting)[0] + linger)
        timeout = max(0.0, min(next_due - now, 0.05))
        for key, _ in selector.select(timeout):
            conn = key.data
            try:
                data = conn.sock.recv(1 << 20)
            except BlockingIOError:
                continue
            if not data:
                raise SystemExit(f"bench.submitter: the controller at {address} closed the connection")
            now = time.monotonic()
            for event in conn.h2.receive_data(data):
                if isinstance(event, Headers):
                    for name, value in event.headers:
                        if name == b"grpc-status":
                            conn.status[event.stream_id] = int(value)
                    if event.end_stream and event.stream_id in conn.open:
                        finish(conn, event.stream_id, conn.status.get(event.stream_id, 2), now)
                elif isinstance(event, Data) and event.stream_id in conn.open:
                    conn.body[event.stream_id] = conn.body.get(event.stream_id, b"") + bytes(event.data)
                elif isinstance(event, Reset) and event.stream_id in conn.open:
                    for _ in conn.open.pop(event.stream_id):
                        tally.error(f"stream reset ({event.error_code})")
                    conn.body.pop(event.stream_id, None)
                    conn.h2.forget(event.stream_id)
            conn.flush()  # SETTINGS acks, PING answers, window updates
    elapsed = time.monotonic() - t0
    cpu = time.process_time() - cpu0
    for conn in conns:
        conn.sock.close()
    lat = sorted(tally.latencies)

    def pct(q: float) -> float:
        return 1000 * lat[min(len(lat) - 1, int(q * len(lat)))] if lat else 0.0

    return {
        "offered": total,
        "rate": rate,
        "submitted": tally.submitted,
        "refused": tally.refused,
        "gave_up": tally.gave_up,
        "errors": tally.errors,
        "error_samples": tally.error_samples,
        "unanswered": sum(len(g) for c in conns for g in c.open.values()) + len(waiting) + len(retries),
        "per_call": per_call,
        "calls": calls,
        "submit_p50_ms": pct(0.5),
        "submit_p99_ms": pct(0.99),
        "elapsed_s": elapsed,
        "cpu_s": cpu,
        "cpu_share": cpu / duration,  # its CPU for the offered window, drain included
        "cpu_us_per_call": 1e6 * cpu / max(1, tally.submitted + tally.refused),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.submitter", description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", required=True, help="the controller, HOST:PORT")
    parser.add_argument("--rate", type=float, required=True, help="submissions per second")
    parser.add_argument("--duration", type=float, required=True, help="seconds of submissions")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--drain", type=float, default=30.0, help="seconds to wait for calls in flight")
    parser.add_argument(
        "--per-call", type=int, default=1, help="submissions per SubmitJobs call (1: SubmitJob)"
    )
    parser.add_argument(
        "--linger-ms", type=float, default=20.0, help="--per-call: longest wait to fill a call"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.duration <= 0 or args.connections < 1 or args.per_call < 1:
        parser.error("--rate and --duration must be positive, --connections and --per-call at least 1")
    result = run(
        args.address,
        args.rate,
        args.duration,
        args.connections,
        args.drain,
        args.per_call,
        args.linger_ms / 1000,
    )
    text = json.dumps(result)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
