"""The daemons' ``[auth]`` policy as the gRPC server's header-time gate.

:class:`HeaderGate` adapts :class:`spur.auth.guard.ServerAuth` to :class:`spur.rpc.server.Authenticator`:
``authenticate_call`` runs ``ServerAuth.authenticate`` (synchronous, headers only) when a call's HEADERS
arrive, sets ``context.identity`` or raises the refusal as an :class:`RpcError` (UNAUTHENTICATED /
PERMISSION_DENIED with the policy's message), exactly as the ``ServerAuth`` interceptor does;
``requires_credential`` is true in ``[auth] mode = "required"`` (read on every connection, so a
reconfigured mode applies to new connections). It lives outside spur.auth and spur.rpc because it joins
the two; it could become a method of ServerAuth.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spur.auth import policy
from spur.rpc.status import RpcError, StatusCode

if TYPE_CHECKING:
    from spur.auth.guard import ServerAuth
    from spur.rpc.server import CallContext

__all__ = ["HeaderGate"]


class HeaderGate:
    """``ServerAuth`` as a :class:`spur.rpc.server.Authenticator` (see the module docstring)."""

    def __init__(self, auth: ServerAuth) -> None:
        self.auth = auth

    @property
    def requires_credential(self) -> bool:
        return self.auth.mode == "required"

    def authenticate_call(self, context: CallContext) -> None:
        result = self.auth.authenticate(context.method, context.metadata, context.peer)
        if isinstance(result, policy.Refusal):
            raise RpcError(StatusCode[result.code], result.message)
        context.identity = result

    def __repr__(self) -> str:
        return f"HeaderGate(mode={self.auth.mode!r})"
