"""Who is calling a controller service: the verified identity, and the administrators' gate.

Shared by every gRPC service of spurctld (spur/controller/service.py and the services beside it, and
the K8sCluster service of spur.k8s.cluster); depends only on the auth layer and the RPC context.
"""

from __future__ import annotations

from spur.auth.admin import DomainSource, is_admin, permission_denied
from spur.auth.identity import Identity, IdentityError, require_identity
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode

__all__ = ["caller", "require_admin"]


def caller(context: CallContext) -> Identity:
    """The verified identity the auth interceptor set (the claimed headers on a server without one)."""
    try:
        return require_identity(context.identity, context.metadata)
    except IdentityError as exc:
        raise RpcError(StatusCode.UNAUTHENTICATED, str(exc)) from None


def require_admin(context: CallContext, what: str, state: DomainSource | None = None) -> Identity:
    """The verified caller if it is an administrator (see ``spur.auth.admin``), else PERMISSION_DENIED."""
    ident = caller(context)
    if not is_admin(ident, state):
        raise RpcError(StatusCode.PERMISSION_DENIED, permission_denied(what))
    return ident
