"""The Auth gRPC service (spurctld): ``MintToken`` for ``scontrol token`` and ``spur token``.

Contracts: the caller must have a verified identity (a credential, e.g. from the local broker), so a
token is never minted for a merely claimed identity. Without ``username`` the token is for the caller.
A token for another user, or one with the admin claim, needs :func:`spur.auth.admin.is_admin`. The other
user's uid comes from the controller's password database (NOT_FOUND when unknown). ``lifespan_secs`` 0
means ``[auth] token_ttl_secs``. Without a key: FAILED_PRECONDITION.
"""

from __future__ import annotations

import logging
import pwd
from typing import Any

from spur.auth.admin import is_admin, permission_denied
from spur.auth.guard import ServerAuth
from spur.rpc.proto import auth_pb2
from spur.rpc.status import RpcError, StatusCode

__all__ = ["AuthService", "MAX_LIFESPAN_SECS"]

log = logging.getLogger("spur.auth")

MAX_LIFESPAN_SECS = 10 * 365 * 86400


class AuthService:
    def __init__(self, auth: ServerAuth, *, state: Any = None) -> None:
        self.auth = auth
        self.state = state

    async def MintToken(self, request: auth_pb2.MintTokenRequest, context: Any) -> auth_pb2.MintTokenResponse:
        ident = context.identity
        if ident is None or not ident.verified:
            raise RpcError(
                StatusCode.UNAUTHENTICATED,
                "minting a token needs a verified identity: present a credential (SLURM_JWT, "
                "~/.spur/token or the local credential broker) to a controller with auth.mode "
                "permissive or required",
            )
        if not self.auth.settings.has_key:
            raise RpcError(
                StatusCode.FAILED_PRECONDITION, "no auth key is configured (auth.jwt_key / auth.jwt_key_file)"
            )
        name = request.username or ident.user
        admin = is_admin(ident, self.state)
        if name != ident.user and not admin:
            raise RpcError(StatusCode.PERMISSION_DENIED, permission_denied(f"a token for user {name}"))
        if request.admin and not admin:
            raise RpcError(StatusCode.PERMISSION_DENIED, permission_denied("an admin token"))
        lifespan = request.lifespan_secs or self.auth.settings.token_ttl_secs
        if lifespan > MAX_LIFESPAN_SECS:
            raise RpcError(
                StatusCode.INVALID_ARGUMENT, f"lifespan must be at most {MAX_LIFESPAN_SECS} seconds"
            )
        if name == ident.user:
            uid, gid = ident.uid, ident.gid
        else:
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                raise RpcError(StatusCode.NOT_FOUND, f"user {name} not found") from None
            uid, gid = entry.pw_uid, entry.pw_gid
        token = self.auth.mint_for(name, uid, ttl_secs=lifespan, admin=request.admin, gid=gid)
        log.info(
            "token minted for %s (uid %s, %ss%s) by %s",
            name,
            uid,
            lifespan,
            ", admin" if request.admin else "",
            ident.user,
        )
        return auth_pb2.MintTokenResponse(
            token=token, username=name, uid=uid, expires_at=int(self.auth.clock() + lifespan)
        )
