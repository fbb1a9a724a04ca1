"""H2Transport.flush_now: a burst handed to the socket at once must never reorder or lose bytes.

The transport is driven over a real socket pair with a small send buffer, so the direct write is
partial and the writer task has to finish it while more bytes are queued behind it. The engine is a
byte queue: what the transport hands out is exactly what must reach the peer, in order.
"""

from __future__ import annotations

import socket
from typing import Any, cast

import trio

from spur.rpc.transport import H2Transport


class _Queue:
    """Just enough of an HTTP/2 engine for the transport's I/O: a byte queue, nothing parsed."""

    def __init__(self) -> None:
        self.out = bytearray()

    def data_to_send(self, amount: int | None = None) -> bytes:
        data = bytes(self.out)
        self.out.clear()
        return data

    def receive_data(self, data: bytes) -> list[object]:
        return []


class _Transport(H2Transport[Any]):
    def handle_event(self, event: object) -> None:
        raise AssertionError("no events expected")


def _pair(sndbuf: int) -> tuple[_Transport, _Queue, socket.socket]:
    """A transport on one end of a socket pair (small send buffer); the other end stays a plain
    non-blocking socket, so the test can read from it without yielding to the transport's tasks."""
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    b.setblocking(False)
    engine = _Queue()
    return _Transport(trio.SocketStream(trio.socket.from_stdlib_socket(a)), cast(Any, engine)), engine, b


def _read_now(sock: socket.socket, limit: int) -> bytes:
    """What ``sock`` holds now, up to ``limit`` bytes, without waiting."""
    got = bytearray()
    while len(got) < limit:
        try:
            chunk = sock.recv(min(65536, limit - len(got)))
        except BlockingIOError:
            break
        if not chunk:
            break
        got += chunk
    return bytes(got)


async def _read_all(sock: socket.socket, size: int) -> bytes:
    got = bytearray()
    with trio.fail_after(10):
        while len(got) < size:
            await trio.lowlevel.wait_readable(sock)
            chunk = _read_now(sock, size - len(got))
            assert chunk, "peer closed early"
            got += chunk
    return bytes(got)


async def test_partial_direct_write_is_finished_by_the_writer_in_order() -> None:
    transport, engine, peer = _pair(4096)
    bursts = [bytes([i]) * 300_000 for i in range(1, 6)]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(transport.run_io)
        await trio.testing.wait_all_tasks_blocked()  # the writer is idle
        for burst in bursts:
            engine.out += burst
            transport.flush_now()  # the first goes out partly at once; the rest wait behind it
        received = await _read_all(peer, sum(map(len, bursts)))
        assert received == b"".join(bursts)
        transport.close("done")
    peer.close()


async def test_direct_write_while_the_writer_is_busy_keeps_order() -> None:
    transport, engine, peer = _pair(4096)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(transport.run_io)
        await trio.testing.wait_all_tasks_blocked()
        engine.out += b"a" * 500_000
        transport.flush_soon()
        await trio.testing.wait_all_tasks_blocked()  # the writer is now blocked in send_all
        head = _read_now(peer, 100_000)  # room in the socket, the writer not yet scheduled
        assert head
        engine.out += b"b" * 1000
        transport.flush_now()  # must not write into that room ahead of the writer's bytes
        rest = await _read_all(peer, 501_000 - len(head))
        assert head + rest == b"a" * 500_000 + b"b" * 1000
        transport.close("done")
    peer.close()


async def test_direct_write_to_a_vanished_peer_closes_the_connection() -> None:
    transport, engine, peer = _pair(4096)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(transport.run_io)
        await trio.testing.wait_all_tasks_blocked()
        peer.close()
        engine.out += b"x" * 100_000
        transport.flush_now()
        with trio.fail_after(5):
            while not transport.closed:
                await trio.sleep(0.01)
    assert "connection" in transport.close_reason
