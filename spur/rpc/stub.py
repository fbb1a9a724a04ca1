"""Typed-by-descriptor client stubs: one awaitable/iterable attribute per RPC of a service.

``stub.SubmitJob(req, timeout=..., metadata=...)`` is a coroutine (unary RPCs);
``stub.WatchJob(req, timeout=...)`` is an async iterator (server-streaming RPCs). A request of the
wrong message type raises TypeError before anything is sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message

from spur.rpc.channel import Channel

__all__ = ["Stub", "controller_stub", "agent_stub"]


class _Rpc:
    def __init__(self, channel: Channel, method: MethodDescriptor) -> None:
        self.channel = channel
        self.path = f"/{method.containing_service.full_name}/{method.name}"
        self.request_type = message_factory.GetMessageClass(method.input_type)
        self.response_type = message_factory.GetMessageClass(method.output_type)

    def _check(self, request: Message) -> None:
        if not isinstance(request, self.request_type):
            raise TypeError(
                f"{self.path} takes {self.request_type.DESCRIPTOR.full_name}, got {type(request).__name__}"
            )


class _UnaryRpc(_Rpc):
    async def __call__(
        self, request: Message, *, timeout: float | None = None, metadata: dict[str, str] | None = None
    ) -> Any:
        self._check(request)
        return await self.channel.unary(
            self.path, request, self.response_type, timeout=timeout, metadata=metadata
        )


class _StreamRpc(_Rpc):
    def __call__(
        self, request: Message, *, timeout: float | None = None, metadata: dict[str, str] | None = None
    ) -> AsyncIterator[Any]:
        self._check(request)
        return self.channel.stream(self.path, request, self.response_type, timeout=timeout, metadata=metadata)


class Stub:
    """Client for every RPC of ``service`` over ``channel`` (client-streaming RPCs are not offered).

    Making one costs nothing per method (stubs are made per call on some paths, such as each batch of
    launches): an RPC's callable is made the first time its name is read, and kept as an attribute."""

    def __init__(self, channel: Channel, service: ServiceDescriptor) -> None:
        self.channel = channel
        self.service = service

    def __getattr__(self, name: str) -> Any:
        # Only reached for names not set yet: the RPC's first use on this stub, or no such RPC.
        service = self.__dict__.get("service")
        method = service.methods_by_name.get(name) if service is not None else None
        if method is None or method.client_streaming:
            where = service.full_name if service is not None else "this stub"
            raise AttributeError(f"service {where} has no RPC named {name!r}")
        rpc = _StreamRpc(self.channel, method) if method.server_streaming else _UnaryRpc(self.channel, method)
        self.__dict__[name] = rpc
        return rpc


def _service(name: str) -> ServiceDescriptor:
    from spur.rpc.proto import spur_pb2

    return spur_pb2.DESCRIPTOR.services_by_name[name]


def controller_stub(channel: Channel) -> Stub:
    """Stub for ``spur.v1.Controller``."""
    return Stub(channel, _service("Controller"))


def agent_stub(channel: Channel) -> Stub:
    """Stub for ``spur.v1.Agent``."""
    return Stub(channel, _service("Agent"))
