"""Unauthenticated floods against real controllers, for integration/test_hostile_floods.py and
bench/unauth_flood.py: oversize REST and gRPC requests without a credential, idle connections, and the
observers (RSS and CPU of a process from /proc, the group's leader and term over time).

Every client here is what an attacker with network access has: raw sockets and a stock gRPC channel,
no credential. Nothing waits on a fixed sleep except the observers' polling interval.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MIB = 1024 * 1024
SUBMIT_PATH = "/slurm/v0.0.38/job/submit"


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    """The resident set size of ``pid`` (KiB): now (VmRSS) or its peak (``field="VmHWM"``)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for pid {pid}")


def reset_peak_rss(pid: int) -> int:
    """Reset ``pid``'s peak RSS to its current RSS where Linux allows it (clear_refs 5); the peak now.

    A freed 60 MiB buffer goes straight back to the OS, so only the peak shows what a request cost."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return rss_kib(pid, "VmHWM")


def cpu_secs(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def heavy_json(nbytes: int) -> bytes:
    """A valid submit body of about ``nbytes``: many small environment entries, so a server that parses
    and validates it before authenticating pays for every element."""
    entry = '"SPUR_PAD=0123456789"'
    count = max(1, (nbytes - 100) // (len(entry) + 1))
    env = ",".join([entry] * count)
    return (
        '{"script": "#!/bin/sh\\ntrue\\n", "job": {"name": "flood", "environment": [' + env + "]}}"
    ).encode()


@dataclass
class RestResult:
    status: int | None  # None: no HTTP response at all
    body_sent: int
    seconds: float


def rest_post_unauthenticated(
    host: str, port: int, body: bytes, path: str = SUBMIT_PATH, user: str = "root", timeout: float = 30.0
) -> RestResult:
    """POST ``body`` naming ``user`` but with no token, as a client that streams its body while it
    watches for an early answer (curl does the same): returns the status and how much body went out."""
    began = time.monotonic()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"X-SLURM-USER-NAME: {user}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    sent = 0
    response = b""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(head)
        sock.setblocking(False)
        view = memoryview(body)
        deadline = began + timeout
        writing = True
        while time.monotonic() < deadline:
            want_write = [sock] if writing and sent < len(body) else []
            readable, writable, _ = select.select([sock], want_write, [], 0.5)
            if readable:
                try:
                    chunk = sock.recv(65536)
                except OSError:
                    chunk = b""
                response += chunk
                if not chunk or _complete(response):
                    break
            if writable:
                try:
                    sent += sock.send(view[sent : sent + 262144])
                except BlockingIOError:
                    pass
                except OSError:  # the server closed its side: read what it answered
                    writing = False
    status = int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else None
    return RestResult(status, sent, time.monotonic() - began)


def _complete(response: bytes) -> bool:
    head, sep, rest = response.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(rest) >= int(value.strip())
    return True


def grpc_submit_unauthenticated(address: str, nbytes: int, timeout: float = 60.0) -> str:
    """One SubmitJob of about ``nbytes`` with no credential (a stock spur channel): the status name."""
    import trio

    from spur.auth.identity import identity_metadata
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError
    from spur.rpc.stub import controller_stub

    request = pb.SubmitJobRequest(spec=pb.JobSpec(name="flood", script="x" * nbytes, work_dir="/tmp"))
    md = identity_metadata()

    async def run() -> str:
        async with open_channel(address, metadata_provider=lambda: md, max_message_bytes=128 * MIB) as ch:
            try:
                await controller_stub(ch).SubmitJob(request, timeout=timeout)
            except RpcError as exc:
                return exc.code.name
        return "OK"

    return trio.run(run)


def in_threads(count: int, fn: Callable[[int], Any]) -> list[Any]:
    """Run ``fn(i)`` for i in range(count) at once, each in a thread; their results in order."""
    results: list[Any] = [None] * count

    def one(i: int) -> None:
        try:
            results[i] = fn(i)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller as the result
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@dataclass
class LeaderWatch:
    """Polls every member's status from a thread: who leads at which term, and how long the leader
    went without answering (its event loop stalled: no heartbeats either)."""

    statuses: Callable[[], dict[int, Any]]
    interval: float = 0.05
    samples: list[tuple[float, dict[int, tuple[str, int]]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> LeaderWatch:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            st = self.statuses()
            self.samples.append((time.monotonic(), {i: (s.role, s.term) for i, s in st.items()}))
            self._stop.wait(self.interval)

    def leaders(self) -> set[tuple[int, int]]:
        """Every (member, term) seen leading."""
        return {(i, term) for _, st in self.samples for i, (role, term) in st.items() if role == "leader"}

    def terms(self) -> set[int]:
        return {term for _, st in self.samples for _, term in st.values()}

    def max_gap(self, node_id: int) -> float:
        """The longest time between two samples in which ``node_id`` answered (seconds)."""
        times = [t for t, st in self.samples if node_id in st]
        return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)


def open_idle_connections(host: str, port: int, count: int, preface: bool = True) -> list[socket.socket]:
    """``count`` TCP connections that never authenticate (each sends the HTTP/2 preface when asked)."""
    socks = []
    for _ in range(count):
        s = socket.create_connection((host, port), timeout=5)
        if preface:
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        s.setblocking(False)
        socks.append(s)
    return socks


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the server has closed ``sock`` (reads and drops what is waiting)."""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True
