"""Who may speak Raft: the credential a member sends with every Raft RPC and the check of the receiver.

The node needs two things, each a small Protocol so that ``spur.raft`` stays free of the controller:

* :class:`OutgoingCredential` gives the metadata (``authorization: Bearer <jwt>``) sent with each call;
* :class:`IncomingVerifier` turns a call's metadata into the sender's member id, or refuses it.

:class:`JwtRaftCredentials` implements both with the cluster key (``spur.auth.tokens``): tokens of audience
``raft`` naming the member (``rid``), minted for a few minutes and renewed with a third of their life
left. :func:`raft_interceptor` is the Raft server's interceptor: it verifies the credential, requires the
member to be one of the group and not the receiver itself, and records the member on the call context
(``context.identity`` is a :class:`RaftPeer`), where ``spur.raft.transport.RaftService`` compares it with
the leader or candidate id the request names. Refusals are ``UNAUTHENTICATED`` (no or bad credential) or
``PERMISSION_DENIED`` (a valid credential that is not a Raft member's); neither quotes the token or key.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode

__all__ = [
    "AUTHORIZATION_KEY",
    "IncomingVerifier",
    "JwtRaftCredentials",
    "OutgoingCredential",
    "RaftAuthError",
    "RaftGate",
    "RaftPeer",
    "TOKEN_TTL_SECS",
    "raft_interceptor",
]

log = logging.getLogger(__name__)

AUTHORIZATION_KEY = "authorization"
#: Lifetime of a member's Raft credential; renewed when a third of it is left.
TOKEN_TTL_SECS = 300.0
#: The subject Raft credentials are minted for (the controller daemon).
RAFT_SUBJECT = "spurctld"
# Verified tokens kept (a group has a handful of members, each renewing every few minutes).
_CACHE_SIZE = 64


class RaftAuthError(Exception):
    """A call's Raft credential is refused. `code` is the gRPC status to answer with."""

    def __init__(self, code: StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class OutgoingCredential(Protocol):
    """What a member sends with each of its Raft calls."""

    def outgoing_metadata(self) -> dict[str, str]:
        """Headers for one call (a fresh dict; cheap: the token is minted only when it needs renewal)."""
        ...


class IncomingVerifier(Protocol):
    """How a receiver learns which member sent a call."""

    def verify_member(self, metadata: Mapping[str, str]) -> int:
        """The member id the call's credential names; raises RaftAuthError when there is none that holds."""
        ...


@dataclass(frozen=True)
class RaftPeer:
    """The verified sender of a Raft call (set as ``CallContext.identity`` by the interceptor)."""

    member: int


class JwtRaftCredentials:
    """Raft credentials signed with the cluster key: audience ``raft``, member id in ``rid``.

    `member` is this node's id (what it mints for itself). `clock` is wall-clock seconds (token times).
    Implements :class:`OutgoingCredential` and :class:`IncomingVerifier`. The key never appears in an
    error, a log line or ``repr``.
    """

    def __init__(
        self,
        key: bytes,
        member: int,
        *,
        ttl_secs: float = TOKEN_TTL_SECS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not key:
            raise ValueError("a Raft credential needs the cluster key")
        if ttl_secs <= 0:
            raise ValueError(f"ttl_secs must be positive, got {ttl_secs}")
        self._key = key
        self._member = member
        self._ttl = ttl_secs
        self._clock = clock
        self._token: tuple[str, float] | None = None  # (token, expires at)
        self._verified: dict[bytes, tuple[int, float]] = {}  # sha256(token) -> (member, expires at)

    def __repr__(self) -> str:
        return f"JwtRaftCredentials(member={self._member})"

    def outgoing_metadata(self) -> dict[str, str]:
        now = self._clock()
        if self._token is None or self._token[1] - now < self._ttl / 3:
            from spur.auth.tokens import AUD_RAFT, mint

            token = mint(
                self._key,
                RAFT_SUBJECT,
                os.geteuid(),
                now=now,
                ttl_secs=self._ttl,
                audience=AUD_RAFT,
                member=self._member,
            )
            self._token = (token, now + self._ttl)
        return {AUTHORIZATION_KEY: f"Bearer {self._token[0]}"}

    def verify_member(self, metadata: Mapping[str, str]) -> int:
        value = metadata.get(AUTHORIZATION_KEY)
        if not value:
            raise RaftAuthError(StatusCode.UNAUTHENTICATED, "Raft calls need a controller credential")
        scheme, _, token = value.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise RaftAuthError(StatusCode.UNAUTHENTICATED, "malformed authorization header (want Bearer)")
        now = self._clock()
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        cached = self._verified.get(digest)
        if cached is not None and cached[1] > now:
            return cached[0]
        from spur.auth.tokens import AUD_RAFT, TokenError, verify

        try:
            claims = verify(self._key, token, now=now, max_lifespan_secs=max(self._ttl * 2, 3600.0))
        except TokenError as exc:
            raise RaftAuthError(StatusCode.UNAUTHENTICATED, f"invalid Raft credential: {exc}") from None
        if claims.audience != AUD_RAFT:
            raise RaftAuthError(
                StatusCode.PERMISSION_DENIED,
                f"a credential of audience {claims.audience!r} cannot speak Raft (need 'raft')",
            )
        if claims.member is None:
            raise RaftAuthError(StatusCode.PERMISSION_DENIED, "the Raft credential names no member (rid)")
        if len(self._verified) >= _CACHE_SIZE:
            self._verified = {d: e for d, e in self._verified.items() if e[1] > now}
            if len(self._verified) >= _CACHE_SIZE:
                self._verified.clear()
        self._verified[digest] = (claims.member, claims.expires_at)
        return claims.member


class RaftGate:
    """The Raft server's gate: a verified credential of a member in `members` other than `node_id`.

    A :class:`spur.rpc.server.Authenticator` (checked from each call's HEADERS, before its body is read;
    the server's pre-auth limits apply, as a credential is always required) and, called, an async
    interceptor. Sets ``context.identity`` to :class:`RaftPeer`; refuses every other call with
    UNAUTHENTICATED or PERMISSION_DENIED and logs the refusal (method, peer address, reason; never the
    token) at most once a minute per reason.
    """

    def __init__(self, verifier: IncomingVerifier, *, node_id: int, members: Collection[int]) -> None:
        self._verifier = verifier
        self._node_id = node_id
        self._allowed = frozenset(members) - {node_id}
        self._last_logged: dict[str, float] = {}

    @property
    def requires_credential(self) -> bool:
        return True

    def _refuse(self, context: CallContext, code: StatusCode, message: str) -> RpcError:
        now = time.monotonic()
        if now - self._last_logged.get(message, -1e18) >= 60.0:
            self._last_logged[message] = now
            log.warning("refused Raft %s from %s: %s", context.method, context.peer, message)
        return RpcError(code, message)

    def authenticate_call(self, context: CallContext) -> None:
        try:
            member = self._verifier.verify_member(context.metadata)
        except RaftAuthError as exc:
            raise self._refuse(context, exc.code, str(exc)) from None
        except Exception as exc:  # malformed input must never take the server down
            raise self._refuse(
                context, StatusCode.UNAUTHENTICATED, f"invalid Raft credential ({type(exc).__name__})"
            ) from None
        if member not in self._allowed:
            why = "this member itself" if member == self._node_id else "not a member of this Raft group"
            raise self._refuse(
                context, StatusCode.PERMISSION_DENIED, f"Raft credential of member {member}: {why}"
            )
        context.identity = RaftPeer(member)

    async def __call__(self, context: CallContext) -> None:
        self.authenticate_call(context)


def raft_interceptor(verifier: IncomingVerifier, *, node_id: int, members: Collection[int]) -> RaftGate:
    """The Raft server's gate (:class:`RaftGate`), usable as an authenticator or an interceptor."""
    return RaftGate(verifier, node_id=node_id, members=members)
