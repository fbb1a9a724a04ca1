"""One bounded channel from the operator to spurctld (the job controller and the node watcher each
keep one).

Bounds (:class:`Bounds`, the defaults are the documented ones): connect timeout 10 s; an HTTP/2
keepalive PING every 10 s, and a PING without an answer in 5 s closes the connection; 30 s on each
request. A *transport error* -- UNAVAILABLE (cannot connect, connection lost, ping unanswered) or a
request reaching its bound (DEADLINE_EXCEEDED) -- drops the connection, so the next call opens a new
one; :meth:`ControllerLink.call` retries it (``attempts`` in all, with a short backoff) and raises
:class:`TransportError` when every attempt failed. Any other status (NOT_FOUND, PERMISSION_DENIED, ...)
is the controller's answer: it is raised as :class:`spur.rpc.status.RpcError` and the connection stays.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import trio
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message

from spur.rpc.channel import Channel, open_channel
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import Stub

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

    def __init__(self, name: str, channel: Channel, bounds: Bounds) -> None:
        self.name = name
        self.channel = channel
        self.bounds = bounds
        self.transport_errors = 0
        self.on_transport_error: Callable[[str], None] = lambda name: None
        self._stubs: dict[str, Stub] = {}

    def stub(self, service: ServiceDescriptor) -> Stub:
        stub = self._stubs.get(service.full_name)
        if stub is None:
            stub = self._stubs[service.full_name] = Stub(self.channel, service)
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
        rpc = getattr(self.stub(service), method)
        last: RpcError | None = None
        for attempt in range(tries):
            try:
                return await rpc(request, timeout=self.bounds.request_timeout, metadata=metadata)
            except RpcError as exc:
                if not is_transport_error(exc):
                    raise
                last = exc
                self.transport_errors += 1
                self.on_transport_error(self.name)
                self.channel.drop(f"transport error: {exc.message}")
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
    target: str,
    bounds: Bounds,
    *,
    metadata_provider: Callable[[], dict[str, str]] | None = None,
) -> AsyncIterator[ControllerLink]:
    """A :class:`ControllerLink` named ``name`` (for logs) to ``target`` (``host:port``)."""
    async with open_channel(
        target,
        connect_timeout=bounds.connect_timeout,
        keepalive_interval=bounds.keepalive_interval,
        keepalive_timeout=bounds.keepalive_timeout,
        metadata_provider=metadata_provider,
    ) as channel:
        yield ControllerLink(name, channel, bounds)
