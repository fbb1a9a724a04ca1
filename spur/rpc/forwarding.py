"""Serving a controller RPC on the Raft leader, and forwarding it there from a follower.

Every service spurctld serves on its client port (Controller, Accounting, AccountingDb, Admission,
Inventory, Mesh, K8sCluster) follows one rule: the leader answers, once it has proposed its
configuration (see ``Controller.leader_ready``); a follower forwards the call unchanged to the
leader's same service, with the caller's metadata (so the leader authenticates the caller itself)
and what is left of the caller's deadline.

The rule belongs to the RPC layer, beside the server and stubs it uses: the services of every package
(spur.controller, spur.accounting's, spur.k8s.cluster's) share it. What it needs of the controller is
:class:`LeaderGate`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from google.protobuf.descriptor import ServiceDescriptor

from spur.rpc.server import CallContext

if TYPE_CHECKING:
    from spur.rpc.stub import Stub

__all__ = ["LeaderGate", "forward_to_leader", "served_by_leader"]

DEFAULT_FORWARD_TIMEOUT = 30.0

_Servicer = TypeVar("_Servicer", bound="GatedServicer")
_Request = TypeVar("_Request")
_Response = TypeVar("_Response")


class LeaderGate(Protocol):
    """What serving on the leader needs of spurctld's controller (``spur.controller.app.Controller``)."""

    @property
    def is_leader(self) -> bool: ...

    async def leader_ready(self) -> None: ...

    async def read_barrier(self) -> None: ...

    async def leader_stub(self) -> Stub: ...


class GatedServicer(Protocol):
    """A servicer whose methods :func:`served_by_leader` wraps: it holds the controller it serves for."""

    @property
    def ctl(self) -> LeaderGate: ...


async def forward_to_leader(
    ctl: LeaderGate,
    service: ServiceDescriptor,
    method: str,
    request: Any,
    context: CallContext,
    *,
    timeout: float = DEFAULT_FORWARD_TIMEOUT,
) -> Any:
    """Call ``service.method`` on the leader with the caller's metadata; UNAVAILABLE when no leader is
    known (the client retries)."""
    from spur.rpc.stub import Stub

    leader = await ctl.leader_stub()
    remaining = context.time_remaining() if context.deadline is not None else None
    return await getattr(Stub(leader.channel, service), method)(
        request, timeout=remaining or timeout, metadata=dict(context.metadata)
    )


def served_by_leader(
    service: ServiceDescriptor, *, read_barrier: bool = False, timeout: float = DEFAULT_FORWARD_TIMEOUT
) -> Callable[
    [Callable[[_Servicer, _Request, CallContext], Awaitable[_Response]]],
    Callable[[_Servicer, _Request, CallContext], Coroutine[Any, Any, _Response]],
]:
    """Decorate a servicer method (of an object whose ``ctl`` is a :class:`LeaderGate`) to run on the
    leader only.

    On the leader the call waits for ``ctl.leader_ready()`` and, with ``read_barrier``, for a ReadIndex
    barrier (a linearizable read); on a follower it is forwarded with :func:`forward_to_leader`.
    """

    def wrap(
        method: Callable[[_Servicer, _Request, CallContext], Awaitable[_Response]],
    ) -> Callable[[_Servicer, _Request, CallContext], Coroutine[Any, Any, _Response]]:
        @functools.wraps(method)
        async def serve(self: _Servicer, request: _Request, context: CallContext) -> _Response:
            if self.ctl.is_leader:
                await self.ctl.leader_ready()
                if read_barrier:
                    await self.ctl.read_barrier()
                return await method(self, request, context)
            answer: _Response = await forward_to_leader(
                self.ctl, service, method.__name__, request, context, timeout=timeout
            )
            return answer

        return serve

    return wrap
