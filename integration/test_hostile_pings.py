"""A raw HTTP/2 peer that floods PINGs (or SETTINGS) and never reads the acknowledgements, against a real
spurctld (CVE-2019-9512 / 9515): the controller ends the connection instead of queueing answers without
bound, its memory stays put, and it goes on serving its users. The peer first makes one call the
controller accepts, so the bounds on connections that have had none (spur.rpc.server.PreAuthLimits)
no longer apply to it: only the HTTP/2 engine's bound on queued control frames stands in the way.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from integration.floods import rss_kib
from integration.harness import Cluster
from spur.rpc.proto import spur_pb2 as pb

pytestmark = pytest.mark.integration

# RSS the flood may add to the controller: its queue is bounded by 10,000 frames of 17 bytes.
RSS_BOUND_KIB = 24 * 1024


def _frame(kind: int, flags: int, payload: bytes = b"") -> bytes:
    """One connection-level frame (stream 0)."""
    return struct.pack(">I", (len(payload) << 8) | kind) + bytes([flags]) + struct.pack(">I", 0) + payload


def _accepted_call(sock: socket.socket, address: str) -> None:
    """One GetJobs with this process's identity, read to its trailers, through the CLI's HTTP/2 codec
    (``spur.rpc.h2_unary``) on ``sock``; the flood then goes out on the same socket, raw."""
    from bench.submitter import grpc_body, request_headers
    from spur.auth.identity import identity_metadata
    from spur.rpc.h2_unary import H2Connection, Headers

    h2 = H2Connection()
    stream = h2.start_request(request_headers(address, identity_metadata(), "/spur.v1.Controller/GetJobs"))
    h2.send_data(stream, grpc_body(b""))
    sock.sendall(h2.data_to_send())
    while True:
        chunk = sock.recv(65536)
        assert chunk, "the controller closed the connection instead of answering"
        for event in h2.receive_data(chunk):
            if isinstance(event, Headers) and event.stream_id == stream and event.end_stream:
                return  # the trailers: the call was served


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("pings"))
    c.start_controller()
    try:
        yield c
    finally:
        c.stop()


def _flood_until_cut_off(address: str, burst: bytes, seconds: float = 30.0) -> float:
    """Send ``burst`` again and again on one connection, never reading; the seconds until the
    controller cut the connection off (AssertionError when it never did)."""
    host, _, port = address.rpartition(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # what we never read fills up soon
    sock.connect((host, int(port)))
    sock.settimeout(5.0)
    try:
        _accepted_call(sock, address)
        sock.settimeout(1.0)
        began = time.monotonic()
        while time.monotonic() - began < seconds:
            try:
                sock.sendall(burst)
            except TimeoutError:
                continue  # the controller is not reading just now: try again
            except (BrokenPipeError, ConnectionResetError):
                return time.monotonic() - began
        raise AssertionError(f"the controller still took the flood after {seconds:g} s")
    finally:
        sock.close()


@pytest.mark.parametrize(
    "name,frame",
    [("ping", _frame(6, 0, b"12345678")), ("settings", _frame(4, 0))],
)
def test_a_peer_that_never_reads_its_acknowledgements_is_cut_off(
    controller: Cluster, name: str, frame: bytes
) -> None:
    assert controller.controller is not None and controller.controller.popen is not None
    pid = controller.controller.popen.pid
    controller.call("GetJobs", pb.GetJobsRequest())  # warm the paths a user's call takes
    before = rss_kib(pid)
    _flood_until_cut_off(controller.address, frame * 2000)
    grown = rss_kib(pid) - before
    assert grown < RSS_BOUND_KIB, f"the controller's RSS grew by {grown} KiB under a {name} flood"
    assert controller.call("GetJobs", pb.GetJobsRequest(), timeout=5) is not None  # still serving
