"""The REST layer's only way into the controller: call a ControllerService method as gRPC would.

:meth:`ServiceAdapter.call` builds the same :class:`CallContext` the gRPC server builds (the
method path, the metadata from the HTTP auth headers, the peer), runs the controller gRPC server's
interceptor on it (the ``[auth]`` policy, when one is installed) and then the ControllerService
method itself. So every rule (identity, permissions, validation, leader forwarding, linearizable
reads) is the gRPC path's; refusals come back as :class:`RestError` with Slurm's error numbers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from spur.rest.errors import RestError, from_rpc_error
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError

if TYPE_CHECKING:
    from spur.rest.host import RestHost

SERVICE_PATH = "/spur.v1.Controller/"
CALL_TIMEOUT_SECS = 30.0


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class ServiceAdapter:
    """Calls ControllerService methods for REST views (see the module docstring)."""

    def __init__(self, ctl: RestHost, service: Any, service_path: str = SERVICE_PATH) -> None:
        """``service_path``: the gRPC service prefix of ``service`` (``/spur.v1.Accounting/`` for the
        accounting service), so the interceptor sees the method name gRPC would carry."""
        self.ctl = ctl
        self.service = service
        self.service_path = service_path

    def context(self, method: str, metadata: dict[str, str], peer: str) -> CallContext:
        deadline = trio.current_time() + CALL_TIMEOUT_SECS
        return CallContext(self.service_path + method, dict(metadata), peer, deadline)

    async def authorize(self, ctx: CallContext, source: str) -> None:
        """Run the gRPC server's interceptor (the auth policy) on ``ctx``; refusals -> 401/403."""
        server = getattr(self.ctl, "grpc_server", None)
        interceptor = getattr(server, "interceptor", None)
        if interceptor is None:
            return
        try:
            await interceptor(ctx)
        except RpcError as exc:
            raise from_rpc_error(exc, source) from None

    async def call(self, method: str, request: Any, metadata: dict[str, str], peer: str, source: str) -> Any:
        """Authorize, then run ``ControllerService.<method>(request, ctx)``; RpcError -> RestError."""
        return await self._served(getattr(self.service, method), method, request, metadata, peer, source)

    async def read(
        self, reader: str, method: str, request: Any, metadata: dict[str, str], peer: str, source: str
    ) -> Any:
        """``ControllerService.<reader>(request, ctx)``, authorized as ``method``: an in-process read
        that answers what ``method`` would (or None where ``method`` would forward to the leader).
        None too when the service has no such reader; then the caller calls ``method``."""
        found = getattr(self.service, reader, None)
        if found is None:
            return None
        return await self._served(found, method, request, metadata, peer, source)

    async def _served(
        self,
        fn: Callable[[Any, CallContext], Awaitable[Any]],
        method: str,
        request: Any,
        metadata: dict[str, str],
        peer: str,
        source: str,
    ) -> Any:
        """``fn(request, ctx)`` authorized as ``method``, within CALL_TIMEOUT_SECS (else 504); an
        RpcError it raises becomes the RestError REST answers with."""
        ctx = self.context(method, metadata, peer)
        await self.authorize(ctx, source)
        try:
            with trio.fail_after(CALL_TIMEOUT_SECS):
                return await fn(request, ctx)
        except trio.TooSlowError:
            raise RestError(504, -1, f"{method} did not answer within {CALL_TIMEOUT_SECS:.0f} s", source) from None
        except BaseException as exc:
            inner = _unwrap(exc)
            if isinstance(inner, RpcError):
                raise from_rpc_error(inner, source) from None
            raise
