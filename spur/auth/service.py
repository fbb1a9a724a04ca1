"""The Auth gRPC service (spurctld): mint, revoke and list revoked tokens.

Contracts:

- ``MintToken``: the caller must have a verified user identity (a credential, e.g. from the local
  broker; never a daemon credential), so a token is never minted for a merely claimed identity.
  Without ``username`` the token is for the caller, with the caller's verified gid. A token for
  another user, or one with the admin claim, needs :func:`spur.auth.admin.is_admin` (a user admin).
  The other user's uid and gid come from the controller's password database (NOT_FOUND when
  unknown). ``lifespan_secs`` 0 means ``[auth] token_ttl_secs``; more than ``[auth]
  max_token_lifespan`` is INVALID_ARGUMENT. The response carries the token id (``jti``). Without a
  key: FAILED_PRECONDITION.
- ``RevokeToken``: an administrator revokes any token by id; anyone revokes a token it holds by
  passing the token itself, which must verify (signature, expiry) and be the caller's own (an admin
  may pass anyone's). The id goes on the replicated deny-list (``RevokeToken`` state command) until
  the token's expiry -- for an id alone, until no token issued now could still be valid (now +
  ``max_token_lifespan`` + the clock skew). A token without an id cannot be revoked:
  INVALID_ARGUMENT says so.
- ``ListRevoked``: the deny-list and its version for agents (an unchanged version answers
  ``changed = false`` with no entries).
"""

from __future__ import annotations

import logging
import pwd
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from spur.auth.admin import DomainSource, is_admin, permission_denied
from spur.auth.guard import ServerAuth
from spur.auth.identity import Identity
from spur.auth.tokens import DEFAULT_SKEW_SECS, Claims, TokenError, new_token_id
from spur.rpc.proto import auth_pb2
from spur.rpc.status import RpcError, StatusCode

if TYPE_CHECKING:
    from spur.rpc.server import CallContext

__all__ = ["AuthService"]

log = logging.getLogger("spur.auth")

Propose = Callable[[Any], Awaitable[Any]]


class AuthService:
    """``spur.v1.Auth``. ``propose`` puts a state command through Raft (the controller's, on the
    leader); None where revocation is not served."""

    def __init__(self, auth: ServerAuth, *, state: DomainSource | None = None, propose: Propose | None = None) -> None:
        self.auth = auth
        self.state = state
        self.propose = propose

    def _user(self, context: CallContext, what: str) -> Identity:
        ident = context.identity
        if ident is None or not ident.verified:
            raise RpcError(
                StatusCode.UNAUTHENTICATED,
                f"{what} needs a verified identity: present a credential (SLURM_JWT, "
                "~/.spur/token or the local credential broker) to a controller with auth.mode "
                "permissive or required",
            )
        if ident.daemon:
            raise RpcError(
                StatusCode.PERMISSION_DENIED,
                f"Access/permission denied: {what} needs a user's credential, not a daemon credential",
            )
        if not self.auth.settings.has_key:
            raise RpcError(
                StatusCode.FAILED_PRECONDITION, "no auth key is configured (auth.jwt_key / auth.jwt_key_file)"
            )
        assert isinstance(ident, Identity)
        return ident

    async def MintToken(self, request: auth_pb2.MintTokenRequest, context: CallContext) -> auth_pb2.MintTokenResponse:
        ident = self._user(context, "minting a token")
        name = request.username or ident.user
        admin = is_admin(ident, self.state)
        if name != ident.user and not admin:
            raise RpcError(StatusCode.PERMISSION_DENIED, permission_denied(f"a token for user {name}"))
        if request.admin and not admin:
            raise RpcError(StatusCode.PERMISSION_DENIED, permission_denied("an admin token"))
        settings = self.auth.settings
        lifespan = request.lifespan_secs or settings.token_ttl_secs
        if lifespan > settings.max_token_lifespan:
            raise RpcError(
                StatusCode.INVALID_ARGUMENT,
                f"lifespan {lifespan} seconds exceeds the maximum of {settings.max_token_lifespan} "
                "seconds (auth.max_token_lifespan)",
            )
        if name == ident.user:
            uid, gid = ident.uid, ident.gid
        else:
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                raise RpcError(StatusCode.NOT_FOUND, f"user {name} not found") from None
            uid, gid = entry.pw_uid, entry.pw_gid
        token_id = new_token_id()
        token = self.auth.mint_for(
            name, uid, ttl_secs=lifespan, admin=request.admin, gid=gid, token_id=token_id
        )
        log.info(
            "token %s minted for %s (uid %s, %ss%s) by %s",
            token_id,
            name,
            uid,
            lifespan,
            ", admin" if request.admin else "",
            ident.user,
        )
        return auth_pb2.MintTokenResponse(
            token=token,
            username=name,
            uid=uid,
            expires_at=int(self.auth.clock() + lifespan),
            token_id=token_id,
        )

    async def RevokeToken(
        self, request: auth_pb2.RevokeTokenRequest, context: CallContext
    ) -> auth_pb2.RevokeTokenResponse:
        ident = self._user(context, "revoking a token")
        if self.propose is None:
            raise RpcError(StatusCode.UNIMPLEMENTED, "this server does not keep a token deny-list")
        now = self.auth.clock()
        admin = is_admin(ident, self.state)
        token_id = request.token_id.strip()
        if request.token:
            claims = self._revocable(request.token.strip(), ident, admin)
            if token_id and token_id != claims.token_id:
                raise RpcError(StatusCode.INVALID_ARGUMENT, "the token id and the token disagree")
            assert claims.token_id is not None
            token_id, expires = claims.token_id, claims.expires_at
        elif token_id:
            if not admin:
                raise RpcError(
                    StatusCode.PERMISSION_DENIED,
                    permission_denied(f"revoking token {token_id[:64]} by its id")
                    + "; to revoke your own token pass the token itself (spur token revoke --token)",
                )
            if len(token_id) > 128:
                raise RpcError(StatusCode.INVALID_ARGUMENT, "a token id is at most 128 characters")
            expires = now + self.auth.settings.max_token_lifespan + DEFAULT_SKEW_SECS
        else:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "revoke needs a token id or the token itself")
        from spur.state.revocation import RevokeToken

        await self.propose(RevokeToken(token_id, expires, now, by=ident.user))
        log.info("token %s revoked by %s", token_id, ident.user)
        return auth_pb2.RevokeTokenResponse(token_id=token_id, expires_at=int(expires))

    def _revocable(self, token: str, ident: Identity, admin: bool) -> Claims:
        claims = self.auth.verify(token, check_revoked=False)
        if isinstance(claims, TokenError):
            raise RpcError(StatusCode.INVALID_ARGUMENT, f"the token to revoke does not verify: {claims}")
        if not admin and (claims.user != ident.user or claims.uid != ident.uid):
            raise RpcError(
                StatusCode.PERMISSION_DENIED,
                permission_denied(f"revoking a token of user {claims.user}"),
            )
        if claims.token_id is None:
            raise RpcError(
                StatusCode.INVALID_ARGUMENT,
                "the token carries no id (jti claim), so it cannot be revoked: it stays valid until it "
                "expires (or the cluster key changes)",
            )
        return claims

    async def ListRevoked(
        self, request: auth_pb2.ListRevokedRequest, context: CallContext
    ) -> auth_pb2.ListRevokedResponse:
        domain = getattr(self.state, "domains", {}).get("revocation")
        if domain is None:
            return auth_pb2.ListRevokedResponse(version=0, changed=request.since_version != 0)
        if request.since_version == domain.version:
            return auth_pb2.ListRevokedResponse(version=domain.version, changed=False)
        return auth_pb2.ListRevokedResponse(
            version=domain.version,
            changed=True,
            tokens=[
                auth_pb2.RevokedToken(token_id=t, expires_at=exp)
                for t, exp in sorted(domain.revoked().items())
            ],
        )
