"""One bounded channel from the operator to spurctld (the job controller and the node watcher each
keep one).

Bounds (:class:`Bounds`, the defaults are the documented ones): connect timeout 10 s; an HTTP/2
keepalive PING every 10 s, and a PING without an answer in 5 s closes the connection; 30 s on each
request. A *transport error* -- UNAVAILABLE (cannot connect, connection lost, ping unanswered) or a
request reaching its bound (DEADLINE_EXCEEDED) -- drops the connection, so the next call opens a new
one; :meth:`ControllerLink.call` retries it (``attempts`` in all, with a short backoff) and raises
:class:`TransportError` when every attempt failed. Any other status (NOT_FOUND, PERMISSION_DENIED, ...)
is the controller's answer: it is raised as :class:`spur.rpc.status.RpcError` and the connection stays.

With several controller addresses (``--controller a,b,c``, e.g. the StatefulSet's pods instead of its
Service), one channel is kept per address and a transport error also moves the next attempt to the
next address; followers forward to the leader, so any reachable controller will do.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message

from spur.rpc.channel import Channel, open_channel
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import Stub

if TYPE_CHECKING:
    from spur.rpc.tls import ClientTLS

__all__ = ["Bounds", "ControllerLink", "TransportError", "open_link", "is_transport_error"]

log = logging.getLogger("spur.k8s.operator.link")

TRANSPORT_CODES = frozenset({StatusCode.UNAVAILABLE, StatusCode.DEADLINE_EXCEEDED})


def is_transport_error(exc: RpcError) -> bool:
    """True for the statuses the operator treats as transport errors (module docstring)."""
    return exc.code in TRANSPORT_CODES


class TransportError(RpcError):
    """Every attempt of a call failed with a transport error; the last one's status and message."""


@dataclass(frozen=True)
class Bounds:
    """The channel bounds, in seconds (tests scale them down)."""

    connect_timeout: float = 10.0
    keepalive_interval: float = 10.0
    keepalive_timeout: float = 5.0
    request_timeout: float = 30.0
    attempts: int = 3
    retry_backoff: float = 1.0


class ControllerLink:
    """Calls on one channel with the operator's bounds and retry rule (made by :func:`open_link`)."""

    def __init__(self, name: str, channels: list[Channel], bounds: Bounds) -> None:
        if not channels:
            raise ValueError("at least one controller address is required")
        self.name = name
        self.channels = channels
        self.bounds = bounds
        self.transport_errors = 0
        self.on_transport_error: Callable[[str], None] = lambda name: None
        self._current = 0
        self._stubs: dict[tuple[int, str], Stub] = {}

    @property
    def channel(self) -> Channel:
        """The channel the next call uses."""
        return self.channels[self._current]

    def stub(self, service: ServiceDescriptor) -> Stub:
        key = (self._current, service.full_name)
        stub = self._stubs.get(key)
        if stub is None:
            stub = self._stubs[key] = Stub(self.channel, service)
        return stub

    async def call(
        self,
        service: ServiceDescriptor,
        method: str,
        request: Message,
        *,
        attempts: int | None = None,
        metadata: dict[str, str] | None = None,
    ) -> Any:
        """``method`` of ``service``; retried on transport errors (module docstring)."""
        tries = attempts or self.bounds.attempts
        last: RpcError | None = None
        for attempt in range(tries):
            rpc = getattr(self.stub(service), method)
            try:
                return await rpc(request, timeout=self.bounds.request_timeout, metadata=metadata)
            except RpcError as exc:
                if not is_transport_error(exc):
                    raise
                last = exc
                self.transport_errors += 1
                self.on_transport_error(self.name)
                self.channel.drop(f"transport error: {exc.message}")
                self._current = (self._current + 1) % len(self.channels)
                log.warning(
                    "%s: %s to the controller failed (%s); connection dropped%s",
                    self.name,
                    method,
                    exc,
                    ", retrying" if attempt + 1 < tries else "",
                )
                if attempt + 1 < tries:
                    await trio.sleep(self.bounds.retry_backoff)
        assert last is not None
        raise TransportError(last.code, last.message)


@contextlib.asynccontextmanager
async def open_link(
    name: str,
    target: str | list[str],
    bounds: Bounds,
    *,
    metadata_provider: Callable[[], dict[str, str]] | None = None,
    tls: ClientTLS | None = None,
) -> AsyncIterator[ControllerLink]:
    """A :class:`ControllerLink` named ``name`` (for logs) to ``target`` (``host:port``, or several);
    ``tls``: spur.rpc.tls.ClientTLS (None: plaintext)."""
    targets = [target] if isinstance(target, str) else list(target)
    async with contextlib.AsyncExitStack() as stack:
        channels = [
            await stack.enter_async_context(
                open_channel(
                    t,
                    connect_timeout=bounds.connect_timeout,
                    keepalive_interval=bounds.keepalive_interval,
                    keepalive_timeout=bounds.keepalive_timeout,
                    metadata_provider=metadata_provider,
                    tls=tls,
                )
            )
            for t in targets
        ]
        yield ControllerLink(name, channels, bounds)
