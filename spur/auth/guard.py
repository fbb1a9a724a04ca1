"""The daemons' side of authentication: the RPC interceptor, the verified-token cache, daemon signing.

Contracts:

- :class:`ServerAuth` is a :class:`spur.rpc.server.Server` interceptor: before every handler it
  authenticates the call (:func:`spur.auth.policy.authenticate`), authorizes the method
  (:func:`spur.auth.policy.authorize`) and stores the identity in ``context.identity``; a refusal ends the
  call with UNAUTHENTICATED or PERMISSION_DENIED and the policy's message. Malformed metadata is a
  refusal, never a crash.
- Verified tokens are cached by digest until they expire (at most ``cache_size`` entries), so a token is
  verified about once however many calls carry it. Every verification (cached or not) refuses a token
  whose id is on the deny-list (``denylist``: the replicated ``revocation`` domain on a controller,
  the list learnt from the controllers on an agent), a user token living longer than ``[auth]
  max_token_lifespan``, a daemon token living longer than :data:`MAX_DAEMON_TOKEN_SECS`, and a token
  issued in the future beyond the skew.
- In permissive mode with a key a call without a credential is logged (method and peer), at most once
  per ``log_interval`` seconds per method (without a key nobody can authenticate, so nothing is logged), with the number of such calls since the last line. Refusals are
  logged the same way. Tokens and keys are never logged.
- :meth:`ServerAuth.daemon_metadata` is the ``authorization`` header this daemon sends on its own calls
  (``sub`` = the daemon's name, audience ``daemon_audience`` -- ``controller`` on spurctld, ``agent``
  on spurd and the operator --, never admin, short TTL, renewed before it expires); empty without a key.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from spur.auth import policy
from spur.auth.admin import DomainSource
from spur.auth.audiences import AUD_AGENT, AUD_CLIENT
from spur.auth.keys import AuthSettings
from spur.auth.tokens import DEFAULT_SKEW_SECS, Claims, TokenError, mint, verify
from spur.rpc.status import RpcError, StatusCode

if TYPE_CHECKING:
    from spur.rpc.server import CallContext

__all__ = ["DAEMON_TOKEN_TTL_SECS", "DenyList", "MAX_DAEMON_TOKEN_SECS", "ServerAuth"]

log = logging.getLogger("spur.auth")

DAEMON_TOKEN_TTL_SECS = 300
# The longest lifetime a daemon credential may have (daemons mint DAEMON_TOKEN_TTL_SECS ones).
MAX_DAEMON_TOKEN_SECS = 3600


class DenyList(Protocol):
    """Revoked token ids (the controller's ``revocation`` domain, an agent's learnt copy)."""

    def is_revoked(self, token_id: str | None) -> bool: ...


class _VerifiedCache:
    """token digest -> claims, valid until the token's expiry."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: dict[bytes, Claims] = {}

    def get(self, digest: bytes, now: float) -> Claims | None:
        claims = self._entries.get(digest)
        if claims is not None and claims.expires_at <= now:
            del self._entries[digest]
            return None
        return claims

    def put(self, digest: bytes, claims: Claims, now: float) -> None:
        if len(self._entries) >= self.size:
            for key in [k for k, c in self._entries.items() if c.expires_at <= now]:
                del self._entries[key]
            while len(self._entries) >= self.size:
                del self._entries[next(iter(self._entries))]
        self._entries[digest] = claims


class _RateLimitedLog:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last: dict[str, tuple[float, int]] = {}

    def __call__(self, level: int, key: str, now: float, fmt: str, *args: Any) -> None:
        last, suppressed = self._last.get(key, (-1e18, 0))
        if now - last < self.interval:
            self._last[key] = (last, suppressed + 1)
            return
        self._last[key] = (now, 0)
        more = f" ({suppressed} more since the last message)" if suppressed else ""
        log.log(level, fmt + more, *args)


class ServerAuth:
    """Authenticates every call of a daemon's gRPC server (see the module docstring)."""

    def __init__(
        self,
        settings: AuthSettings,
        *,
        daemon_name: str,
        clock: Callable[[], float] = time.time,
        log_interval: float = 60.0,
        cache_size: int = 10000,
        state: DomainSource | None = None,
        daemon_audience: str = AUD_AGENT,
        groups: policy.GroupDirectory | None = None,
        denylist: DenyList | None = None,
    ) -> None:
        self.settings = settings
        # The cluster state on a controller (accounting Administrators are admins; its ``revocation``
        # domain is the deny-list); None on an agent.
        self.state = state
        self.daemon_name = daemon_name
        self.daemon_audience = daemon_audience
        if groups is None:
            from spur.auth.groups import SystemGroups

            groups = SystemGroups()
        self.groups = groups
        self._denylist = denylist
        self.clock = clock
        self._cache = _VerifiedCache(cache_size)
        self._log = _RateLimitedLog(log_interval)
        self._daemon_token: tuple[str, float] | None = None

    @property
    def mode(self) -> str:
        return self.settings.mode

    @property
    def denylist(self) -> DenyList | None:
        """The deny-list in force: the one given, else the controller state's ``revocation`` domain."""
        if self._denylist is not None:
            return self._denylist
        domains = getattr(self.state, "domains", None)
        return domains.get("revocation") if isinstance(domains, dict) else None

    @denylist.setter
    def denylist(self, value: DenyList | None) -> None:
        self._denylist = value

    def verify(self, token: str, *, check_revoked: bool = True) -> Claims | TokenError:
        """The claims of ``token`` (cached until it expires) or why it is refused (module docstring)."""
        now = self.clock()
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        claims = self._cache.get(digest, now)
        if claims is None:
            try:
                claims = verify(self.settings.key or b"", token, now=now, skew_secs=DEFAULT_SKEW_SECS)
            except TokenError as exc:
                return exc
            limit = (
                self.settings.max_token_lifespan if claims.audience == AUD_CLIENT else MAX_DAEMON_TOKEN_SECS
            )
            if claims.expires_at - claims.issued_at > limit:
                return TokenError(
                    f"token lifetime exceeds the maximum of {limit} seconds"
                    + (" (auth.max_token_lifespan)" if claims.audience == AUD_CLIENT else "")
                )
            self._cache.put(digest, claims, now)
        if check_revoked and claims.token_id is not None:
            denied = self.denylist
            if denied is not None and denied.is_revoked(claims.token_id):
                return TokenError("token has been revoked (scontrol token revoke)")
        return claims

    def authenticate(self, method: str, metadata: dict[str, str], peer: str) -> Any:
        """The verified identity for a call, or a :class:`spur.auth.policy.Refusal`."""
        mode = self.settings.mode
        verification: Claims | TokenError | None = None
        presented = False
        if mode != "disabled":
            token = policy.bearer_token(metadata)
            presented = token is not None
            if isinstance(token, TokenError):
                verification = token
            elif token is not None and self.settings.has_key:
                verification = self.verify(token)
        result = policy.authenticate(
            mode=mode,
            has_key=self.settings.has_key,
            presented=presented,
            verification=verification,
            claimed=metadata,
            groups=self.groups,
        )
        now = self.clock()
        if isinstance(result, policy.Refusal):
            self._log(
                logging.WARNING,
                f"refused {method}",
                now,
                "refused %s from %s: %s",
                method,
                peer,
                result.message,
            )
            return result
        if result.unauthenticated and self.settings.has_key:  # without a key nobody could authenticate
            self._log(
                logging.INFO,
                f"unauth {method}",
                now,
                "unauthenticated call to %s from %s as uid %s (auth.mode = permissive)",
                method,
                peer,
                result.identity.uid,
            )
        refusal = policy.authorize(method, result.identity, mode=mode, state=self.state)
        if refusal is not None:
            self._log(
                logging.WARNING,
                f"denied {method}",
                now,
                "denied %s from %s: %s",
                method,
                peer,
                refusal.message,
            )
            return refusal
        return result.identity

    @property
    def requires_credential(self) -> bool:
        """True in ``[auth] mode = "required"``: calls without a valid credential are refused (the gRPC
        server then bounds what a connection may cost before one of its calls is accepted)."""
        return self.settings.mode == "required"

    def authenticate_call(self, context: CallContext) -> None:
        """The header-time gate (spur.rpc.server.Authenticator): run when a call's HEADERS arrive, before
        its body is read; sets ``context.identity`` or raises RpcError with the refusal."""
        try:
            result = self.authenticate(context.method, context.metadata, context.peer)
        except Exception as exc:  # malformed input must never take a daemon down
            log.warning(
                "authentication of %s from %s failed: %s", context.method, context.peer, type(exc).__name__
            )
            raise RpcError(StatusCode.UNAUTHENTICATED, "invalid credential or identity headers") from None
        if isinstance(result, policy.Refusal):
            raise RpcError(StatusCode[result.code], result.message)
        context.identity = result

    async def __call__(self, context: CallContext) -> None:
        """The same check as an async Server interceptor."""
        self.authenticate_call(context)

    # ------------------------------------------------------------------ this daemon's own calls

    def mint_for(
        self,
        user: str,
        uid: int,
        *,
        ttl_secs: float,
        admin: bool = False,
        gid: int | None = None,
        audience: str = AUD_CLIENT,
        token_id: str | None = None,
    ) -> str:
        """A token signed with the cluster key (raises TokenError without a key)."""
        return mint(
            self.settings.key or b"",
            user,
            uid,
            now=self.clock(),
            ttl_secs=ttl_secs,
            admin=admin,
            gid=gid,
            audience=audience,
            token_id=token_id,
        )

    def daemon_metadata(self) -> dict[str, str]:
        """``{"authorization": "Bearer <daemon token>"}``, renewed with a third of its life left; ``{}``
        without a key."""
        if not self.settings.has_key:
            return {}
        now = self.clock()
        if self._daemon_token is None or self._daemon_token[1] - now < DAEMON_TOKEN_TTL_SECS / 3:
            token = self.mint_for(
                self.daemon_name, os.geteuid(), ttl_secs=DAEMON_TOKEN_TTL_SECS, audience=self.daemon_audience
            )
            self._daemon_token = (token, now + DAEMON_TOKEN_TTL_SECS)
        return {policy.AUTHORIZATION_KEY: f"Bearer {self._daemon_token[0]}"}
