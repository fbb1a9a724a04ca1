"""spurd's client side of the Controller service, over one channel per configured controller.

Calls go to the controller that last answered; when it is unreachable (UNAVAILABLE) or does not answer
in time (DEADLINE_EXCEEDED) the next one is tried, once around the list, before the error is raised. Any other status is the controller's answer
and is raised as is. Followers forward writes to the leader, so any reachable controller will do.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

import trio
from google.protobuf.message import Message

from spur.rpc.channel import Channel, open_channel, parse_target
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import Stub, controller_stub

if TYPE_CHECKING:
    from google.protobuf.descriptor import ServiceDescriptor

    from spur.rpc.tls import ClientTLS

__all__ = ["ControllerLink", "local_address_towards", "normalize_controller", "open_controller_link"]


def normalize_controller(value: str) -> str:
    """``http://host:port`` or ``host:port`` (port defaults to 6817) -> ``host:port``.

    Raises ValueError naming the bad value.
    """
    text = value.strip()
    if text.startswith("http://"):
        text = text[len("http://") :]
    text = text.rstrip("/")
    if not text:
        raise ValueError(f"invalid controller address {value!r}: empty")
    if text.startswith("[") and "]:" not in text:
        text = f"{text}:6817"
    elif not text.startswith("[") and ":" not in text:
        text = f"{text}:6817"
    try:
        host, port = parse_target(text)
    except ValueError as e:
        raise ValueError(str(e)) from None
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class ControllerLink:
    def __init__(
        self, targets: Sequence[str], channels: Sequence[Channel], *, call_timeout: float = 10.0
    ) -> None:
        if not channels:
            raise ValueError("at least one controller is required")
        self.targets = list(targets)
        self._stubs: list[Stub] = [controller_stub(ch) for ch in channels]
        self._current = 0
        self.call_timeout = call_timeout
        # Headers sent with every call (the node credential once the agent holds one).
        self.metadata: dict[str, str] = {}

    @property
    def current_target(self) -> str:
        return self.targets[self._current]

    async def call(
        self, name: str, request: Message, *, timeout: float | None = None, service: ServiceDescriptor | None = None
    ) -> Any:
        """Call RPC ``name`` on a reachable controller; raises RpcError. ``service``: another
        service's descriptor served on the controller port (default: the Controller service)."""
        last: RpcError | None = None
        for step in range(len(self._stubs)):
            index = (self._current + step) % len(self._stubs)
            try:
                extra = {"metadata": dict(self.metadata)} if self.metadata else {}
                stub = self._stubs[index] if service is None else Stub(self._stubs[index].channel, service)
                response = await getattr(stub, name)(request, timeout=timeout or self.call_timeout, **extra)
            except RpcError as e:
                # An isolated or overloaded controller times out rather than refusing: move on too.
                # Every agent call (register, heartbeat, report) is idempotent, so a retry is safe.
                if e.code not in (StatusCode.UNAVAILABLE, StatusCode.DEADLINE_EXCEEDED):
                    raise
                last = e
                continue
            self._current = index
            return response
        assert last is not None
        raise last


@contextlib.asynccontextmanager
async def open_controller_link(
    targets: Sequence[str],
    *,
    connect_timeout: float = 5.0,
    call_timeout: float = 10.0,
    metadata_provider: Callable[[], dict[str, str]] | None = None,
    tls: ClientTLS | None = None,
) -> AsyncIterator[ControllerLink]:
    """``metadata_provider`` signs every call (spurd's daemon token); ``tls`` (spur.rpc.tls.ClientTLS)
    verifies the controllers and presents the node certificate."""
    async with contextlib.AsyncExitStack() as stack:
        channels = [
            await stack.enter_async_context(
                open_channel(t, connect_timeout=connect_timeout, metadata_provider=metadata_provider, tls=tls)
            )
            for t in targets
        ]
        yield ControllerLink(targets, channels, call_timeout=call_timeout)


async def local_address_towards(target: str) -> str:
    """This host's address on the route to ``target`` (``127.0.0.1`` for loopback or when unknown).

    Uses a connected UDP socket, which picks the source address without sending anything.
    """
    host, port = parse_target(target)
    try:
        infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    except OSError:
        return "127.0.0.1"
    for family, type_, proto, _canon, addr in infos:
        sock = trio.socket.socket(family, type_, proto)
        with sock:
            try:
                await sock.connect(addr)
            except OSError:
                continue
            local = sock.getsockname()[0]
            if local.startswith("127.") or local == "::1":
                return "127.0.0.1"
            return local
    return "127.0.0.1"
