"""srun's PMI fence server for a direct-launched step (``srun --mpi=pmi2``).

As in Slurm, srun is the root of the step's key-value exchange: the shim on every node of the step
connects here (the address and a fresh secret token travel in ``LaunchStepRequest``), sends its
ranks' puts at each fence, and gets the merged KVS once every rank of the step entered that fence
(:class:`spur.core.pmi.FenceCoordinator`). Nothing of this goes through the controller.

A node that reports an abort (a rank called ``PMI_Abort``/``MPI_Abort``) makes ``on_abort`` run;
srun ends the step on the other nodes.
"""

from __future__ import annotations

import hmac
import secrets
import socket
from collections.abc import Callable

import trio

from spur.core.pmi import FenceCoordinator, PmiError, decode_node_message, encode_node_message

__all__ = ["PmiServer", "local_address_towards"]

# A node's message is one line; the largest is a fence's puts of all its ranks.
MAX_LINE = 64 * 1024 * 1024


def local_address_towards(host: str) -> str:
    """This host's address on the route to ``host`` (no packet is sent)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect((host, 9))
        return str(probe.getsockname()[0])


class PmiServer:
    """The fence server of one step of ``size`` ranks; run :meth:`serve` with ``nursery.start``."""

    def __init__(self, size: int, on_abort: Callable[[int, int, str], None]) -> None:
        self.coordinator = FenceCoordinator(size)
        self.token = secrets.token_hex(16)
        self.on_abort = on_abort
        self.address = ""
        self._nodes: list[trio.SocketStream] = []

    async def serve(self, host: str, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on ``host`` (an address of this machine the nodes reach); started: ``host:port``."""
        [listener] = await trio.open_tcp_listeners(0, host=host)
        port = listener.socket.getsockname()[1]
        self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        async with trio.open_nursery() as nursery:
            task_status.started(self.address)
            await trio.serve_listeners(self._node, [listener], handler_nursery=nursery)

    async def _node(self, stream: trio.SocketStream) -> None:
        buffer = b""
        authorized = False
        try:
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    return
                buffer += data
                if len(buffer) > MAX_LINE:
                    return
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    message = decode_node_message(line)
                    if not authorized:
                        token = message.get("token")
                        if not isinstance(token, str) or not hmac.compare_digest(token, self.token):
                            return
                        authorized = True
                        self._nodes.append(stream)
                        continue
                    await self._handle(message)
        except (PmiError, trio.BrokenResourceError, trio.ClosedResourceError):
            return
        finally:
            if stream in self._nodes:
                self._nodes.remove(stream)
            await stream.aclose()

    async def _handle(self, message: dict[str, object]) -> None:
        if "abort" in message:
            code, rank, text = message.get("abort"), message.get("rank"), message.get("message", "")
            if not isinstance(code, int) or not isinstance(rank, int):
                raise PmiError("fence: malformed abort")
            self.on_abort(rank, code, str(text))
            return
        fence, ranks, puts = message.get("fence"), message.get("ranks"), message.get("puts")
        if not isinstance(fence, int) or not isinstance(ranks, int) or not isinstance(puts, dict):
            raise PmiError("fence: malformed fence message")
        merged = self.coordinator.arrive(fence, ranks, {str(k): str(v) for k, v in puts.items()})
        if merged is None:
            return
        reply = encode_node_message({"fence": fence, "kvs": merged})
        for node in list(self._nodes):
            try:
                await node.send_all(reply)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                continue
