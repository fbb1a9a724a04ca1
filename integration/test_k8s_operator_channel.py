"""The operator's channel to spurctld, bound by bound (scaled down so the tests are fast):

- a controller that accepts TCP but never answers: the request bound ends the call, which is a
  transport error: the connection is dropped, the call retried on a new one;
- the same silent peer with a request bound longer than the keepalive: the unanswered PING closes it;
- an address that drops SYNs (a network namespace with a DROP rule): the connect timeout ends it;
- a real spurctld stopped (SIGSTOP) in the middle of a stream: the keepalive ends the stream, and
  after SIGCONT the next call opens a new connection;
- a refusal (NOT_FOUND) is an answer: the connection is kept.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio

from integration.ha_harness import netns_available
from integration.harness import Cluster
from spur.auth.identity import identity_metadata
from spur.k8s.operator.link import Bounds, TransportError, open_link
from spur.rpc.proto import inventory_pb2 as ipb
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode

CONTROLLER = pb.DESCRIPTOR.services_by_name["Controller"]
INVENTORY = ipb.DESCRIPTOR.services_by_name["Inventory"]


class SilentController:
    """Accepts TCP connections and reads whatever comes, never writing a byte."""

    def __init__(self) -> None:
        self.accepted = 0
        self.port = 0

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started(self.port)

        async def handler(stream: trio.SocketStream) -> None:
            self.accepted += 1
            while await stream.receive_some(65536):
                pass

        await trio.serve_listeners(handler, listeners)


class CountingProxy:
    """Forwards TCP to ``target_port``, counting the connections clients open."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.accepted = 0

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])

        async def pipe(src: trio.abc.Stream, dst: trio.abc.Stream) -> None:
            try:
                while data := await src.receive_some(65536):
                    await dst.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            finally:
                await dst.aclose()

        async def handler(client: trio.SocketStream) -> None:
            self.accepted += 1
            server = await trio.open_tcp_stream("127.0.0.1", self.target_port)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pipe, client, server)
                nursery.start_soon(pipe, server, client)

        await trio.serve_listeners(handler, listeners)


async def test_a_silent_controller_hits_the_request_bound_and_the_call_is_retried_on_a_new_connection():
    silent = SilentController()
    bounds = Bounds(
        connect_timeout=1,
        keepalive_interval=30,
        keepalive_timeout=5,
        request_timeout=0.3,
        attempts=2,
        retry_backoff=0,
    )
    async with trio.open_nursery() as nursery:
        port = await nursery.start(silent.serve)
        async with open_link("job-controller", f"127.0.0.1:{port}", bounds) as link:
            began = trio.current_time()
            with pytest.raises(TransportError) as err:
                await link.call(CONTROLLER, "GetJobs", pb.GetJobsRequest())
            elapsed = trio.current_time() - began
        nursery.cancel_scope.cancel()
    assert err.value.code is StatusCode.DEADLINE_EXCEEDED
    assert 0.6 <= elapsed < 5.0  # two 0.3 s bounds, far from anything unbounded
    assert silent.accepted == 2  # the first connection was dropped; the retry opened a second
    assert link.transport_errors == 2


async def test_an_unanswered_keepalive_ping_closes_the_connection():
    silent = SilentController()
    bounds = Bounds(
        connect_timeout=1, keepalive_interval=0.2, keepalive_timeout=0.2, request_timeout=30, attempts=1
    )
    async with trio.open_nursery() as nursery:
        port = await nursery.start(silent.serve)
        async with open_link("node-watcher", f"127.0.0.1:{port}", bounds) as link:
            began = trio.current_time()
            with pytest.raises(TransportError) as err:
                await link.call(CONTROLLER, "GetNodes", pb.GetNodesRequest())
            elapsed = trio.current_time() - began
        nursery.cancel_scope.cancel()
    assert err.value.code is StatusCode.UNAVAILABLE
    assert "keepalive ping not acknowledged within 0.2s" in err.value.message
    assert elapsed < 5.0  # far below the 30 s request bound


def _firewall() -> list[str] | None:
    if shutil.which("nft"):
        return [
            "nft",
            "add table inet spur; add chain inet spur input { type filter hook input priority 0; };"
            " add rule inet spur input tcp dport 6817 drop",
        ]
    if shutil.which("iptables"):
        return ["iptables", "-A INPUT -p tcp --dport 6817 -j DROP"]
    return None


@pytest.mark.skipif(
    not netns_available() or _firewall() is None, reason="needs root, ip netns and nft or iptables"
)
def test_an_address_that_drops_syns_hits_the_connect_timeout(tmp_path: Path):
    ns = f"spurop{secrets.token_hex(4)}"
    tool, rule = _firewall()
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        if tool == "nft":
            subprocess.run(["ip", "netns", "exec", ns, "nft", rule], check=True)
        else:
            subprocess.run(["ip", "netns", "exec", ns, "iptables", *rule.split()], check=True)
        probe = textwrap.dedent(
            """
            import trio
            from spur.k8s.operator.link import Bounds, TransportError, open_link
            from spur.rpc.proto import spur_pb2 as pb

            async def main():
                bounds = Bounds(connect_timeout=0.5, keepalive_interval=10, keepalive_timeout=5,
                                request_timeout=30, attempts=1)
                async with open_link("job-controller", "127.0.0.1:6817", bounds) as link:
                    began = trio.current_time()
                    try:
                        await link.call(pb.DESCRIPTOR.services_by_name["Controller"], "GetJobs",
                                        pb.GetJobsRequest())
                    except TransportError as exc:
                        print(exc.code.name, round(trio.current_time() - began, 1), exc.message)

            trio.run(main)
            """
        )
        out = subprocess.run(
            ["ip", "netns", "exec", ns, sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=Path(__file__).resolve().parent.parent,
        )
        code, elapsed, message = out.stdout.strip().split(" ", 2)
        assert code == "UNAVAILABLE", out.stderr
        assert float(elapsed) < 3.0  # the kernel alone would retry SYNs for minutes
        assert message == "cannot connect to 127.0.0.1:6817: timed out after 0.5s"
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def test_a_stopped_controller_ends_the_stream_by_keepalive_and_a_refusal_keeps_the_connection(tmp_path: Path):
    cluster = Cluster(tmp_path)
    try:
        cluster.start_controller()
        job_id = cluster.submit_spec(name="waits", script="#!/bin/sh\ntrue\n")  # no nodes: stays PENDING
        outcome: dict[str, object] = {}

        async def main() -> None:
            proxy = CountingProxy(cluster.port)
            bounds = Bounds(
                connect_timeout=1,
                keepalive_interval=0.3,
                keepalive_timeout=0.3,
                request_timeout=5,
                attempts=1,
            )
            async with trio.open_nursery() as nursery:
                port = await nursery.start(proxy.serve)
                async with open_link(
                    "job-controller",
                    f"127.0.0.1:{port}",
                    bounds,
                    metadata_provider=lambda: identity_metadata(),
                ) as link:
                    for _ in range(2):  # a refusal is an answer: the connection stays
                        with pytest.raises(RpcError) as err:
                            await link.call(INVENTORY, "RemoveNode", ipb.RemoveNodeRequest(name="nope"))
                        assert err.value.code is StatusCode.NOT_FOUND
                    outcome["after_refusals"] = proxy.accepted
                    stream = link.stub(CONTROLLER).WatchJob(pb.GetJobsRequest(job_ids=[job_id]), timeout=60)
                    first = await stream.__anext__()
                    assert first.state == "PENDING"
                    os.kill(cluster.controller.popen.pid, signal.SIGSTOP)
                    began = trio.current_time()
                    try:
                        with pytest.raises(RpcError) as err:
                            await stream.__anext__()
                        outcome["stream_end"] = (
                            err.value.code,
                            err.value.message,
                            trio.current_time() - began,
                        )
                    finally:
                        os.kill(cluster.controller.popen.pid, signal.SIGCONT)
                    await stream.aclose()
                    answer = await link.call(CONTROLLER, "GetJobs", pb.GetJobsRequest(job_ids=[job_id]))
                    outcome["after"] = ([j.job_id for j in answer.jobs], proxy.accepted)
                nursery.cancel_scope.cancel()

        trio.run(main)
    finally:
        cluster.stop()
    assert outcome["after_refusals"] == 1
    code, message, elapsed = outcome["stream_end"]
    assert code is StatusCode.UNAVAILABLE and "keepalive ping not acknowledged" in message
    assert elapsed < 5.0  # far below the stream's 60 s deadline
    assert outcome["after"] == ([job_id], 2)


def test_the_documented_bounds_are_the_defaults():
    assert Bounds() == Bounds(
        connect_timeout=10,
        keepalive_interval=10,
        keepalive_timeout=5,
        request_timeout=30,
        attempts=3,
        retry_backoff=1.0,
    )
