"""Connection management: refused/timed-out connects, keepalive, reconnects, server shutdown."""

from __future__ import annotations

import functools
import socket

import pytest
import trio
import trio.testing
from rpc_helpers import start_server

import spur.rpc.channel
from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import controller_stub


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def submit(name: str = "", script: str = "") -> pb.SubmitJobRequest:
    return pb.SubmitJobRequest(spec=pb.JobSpec(name=name, script=script))


async def test_refused_connection_is_unavailable():
    port = free_port()
    async with open_channel(f"127.0.0.1:{port}") as channel:
        with pytest.raises(RpcError) as err:
            await controller_stub(channel).SubmitJob(submit())
    assert err.value.code == StatusCode.UNAVAILABLE
    assert err.value.message == f"cannot connect to 127.0.0.1:{port}: Connection refused"


async def test_connect_timeout_is_unavailable(monkeypatch, autojump_clock):
    async def never_connects(host: str, port: int) -> trio.SocketStream:
        await trio.sleep_forever()
        raise AssertionError

    monkeypatch.setattr(spur.rpc.channel, "_open_tcp_stream", never_connects)
    async with open_channel("10.1.2.3:6817", connect_timeout=5) as channel:
        start = trio.current_time()
        with pytest.raises(RpcError) as err:
            await controller_stub(channel).SubmitJob(submit())
        assert trio.current_time() - start == pytest.approx(5)
        assert err.value.code == StatusCode.UNAVAILABLE
        assert err.value.message == "cannot connect to 10.1.2.3:6817: timed out after 5s"
        # A call deadline shorter than the connect timeout wins.
        with pytest.raises(RpcError) as err:
            await controller_stub(channel).SubmitJob(submit(), timeout=1)
        assert err.value.code == StatusCode.DEADLINE_EXCEEDED


async def test_keepalive_detects_a_dead_peer(nursery, mock_clock):
    """A peer that accepts TCP but never speaks HTTP/2 (so never ACKs a PING) is declared dead."""
    got_request = trio.Event()

    async def black_hole(stream: trio.SocketStream) -> None:
        received = b""
        while data := await stream.receive_some(65536):
            received += data
            if b"SubmitJob" in received or len(received) > 200:
                got_request.set()

    listeners = await nursery.start(functools.partial(trio.serve_tcp, black_hole, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    outcome: list[RpcError] = []
    done = trio.Event()

    async with open_channel(f"127.0.0.1:{port}", keepalive_interval=30, keepalive_timeout=10) as channel:

        async def call() -> None:
            try:
                await controller_stub(channel).SubmitJob(submit())
            except RpcError as exc:
                outcome.append(exc)
            done.set()

        nursery.start_soon(call)
        with trio.fail_after(5):
            await got_request.wait()
        # Real I/O is done; from here only timers matter, so let virtual time run.
        start = trio.current_time()
        mock_clock.autojump_threshold = 0
        await done.wait()
        assert trio.current_time() - start == pytest.approx(40, abs=0.1)
    assert outcome[0].code == StatusCode.UNAVAILABLE
    assert "keepalive ping not acknowledged within 10s" in outcome[0].message


async def test_keepalive_keeps_a_live_connection(nursery, autojump_clock):
    srv = await start_server(nursery)
    async with open_channel(srv.target, keepalive_interval=1, keepalive_timeout=1) as channel:
        stub = controller_stub(channel)
        await stub.SubmitJob(submit())
        # Many keepalive rounds pass while this call is in flight; the server ACKs every PING.
        with pytest.raises(RpcError) as err:
            await stub.SubmitJob(submit("hang"), timeout=20)
        assert err.value.code == StatusCode.DEADLINE_EXCEEDED


async def test_reconnects_after_server_restart(nursery):
    srv = await start_server(nursery)
    async with open_channel(srv.target) as channel:
        stub = controller_stub(channel)
        assert (await stub.SubmitJob(submit(script="a"))).job_id == 1
        srv.scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(RpcError) as err:
            await stub.SubmitJob(submit())
        assert err.value.code == StatusCode.UNAVAILABLE
        await start_server(nursery, port=srv.port)
        assert (await stub.SubmitJob(submit(script="abc"))).job_id == 3


async def test_server_shutdown_fails_in_flight_calls_unavailable(nursery):
    srv = await start_server(nursery)
    async with open_channel(srv.target) as channel:
        stub = controller_stub(channel)
        outcome: list[RpcError] = []

        async def call() -> None:
            try:
                await stub.SubmitJob(submit("hang"))
            except RpcError as exc:
                outcome.append(exc)

        async with trio.open_nursery() as calls:
            calls.start_soon(call)
            with trio.fail_after(5):
                await srv.controller.started.wait()
            srv.scope.cancel()
    assert outcome[0].code == StatusCode.UNAVAILABLE


async def test_many_connections_to_one_server(nursery):
    srv = await start_server(nursery)
    peers: set[str] = set()

    async def client(i: int) -> None:
        async with open_channel(srv.target) as channel:
            reply = await channel.unary("/spur.v1.Agent/Status", pb.Empty(), pb.AgentStatus)
            peers.add(reply.name)

    with trio.fail_after(10):
        async with trio.open_nursery() as clients:
            for i in range(20):
                clients.start_soon(client, i)
    assert len(peers) == 20
