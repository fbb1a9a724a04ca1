"""HS256 JWTs compatible with Slurm's ``auth/jwt``: mint and verify, nothing else.

Contracts:

- :func:`mint` signs ``{"sun": user, "sub": user, "uid": uid, "iat": now, "exp": now + ttl, "jti": id,
  "aud": audience}`` (plus ``"admin": true``, ``"gid"`` and, for Raft, the member id ``"rid"`` when
  given) with HS256. Slurm reads ``sun``; ``sub`` is the JWT standard name; ``jti`` is the id a token is
  revoked by.
- The audience says what a token may do: ``client`` (a user: the CLI, REST, scripts; also every token
  without ``aud``, such as real Slurm's), ``controller`` (spurctld calling agents and other controllers),
  ``agent`` (spurd and the operator calling controllers) and ``raft`` (controllers' consensus messages).
  Only ``client`` tokens speak for a user; the others are daemon credentials.
- :func:`verify` accepts only HS256 (``alg: none`` and every other algorithm are refused), needs ``exp``,
  ``iat`` and ``uid`` and a user name in ``sun`` or ``sub`` (``sun`` wins when both are present), and
  refuses an expired token, one issued more than ``skew_secs`` in the future, one whose lifetime
  (``exp - iat``) exceeds ``max_lifespan_secs`` when given, and an unknown audience. Every failure is a
  :class:`TokenError` whose message never contains the token or the key.
- Pure: no I/O, time is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

__all__ = [
    "ALGORITHM",
    "AUD_AGENT",
    "AUD_CLIENT",
    "AUD_CONTROLLER",
    "AUD_RAFT",
    "AUDIENCES",
    "Claims",
    "DAEMON_AUDIENCES",
    "DEFAULT_SKEW_SECS",
    "MAX_TOKEN_BYTES",
    "TokenError",
    "mint",
    "new_token_id",
    "verify",
]

from spur.auth.audiences import AUD_AGENT as AUD_AGENT
from spur.auth.audiences import AUD_CLIENT as AUD_CLIENT
from spur.auth.audiences import AUD_CONTROLLER as AUD_CONTROLLER
from spur.auth.audiences import AUD_RAFT as AUD_RAFT
from spur.auth.audiences import AUDIENCES as AUDIENCES
from spur.auth.audiences import DAEMON_AUDIENCES as DAEMON_AUDIENCES

ALGORITHM = "HS256"
# How far in the future a token's iat may lie (clock differences between hosts).
DEFAULT_SKEW_SECS = 60.0
# A Spur token is ~250 bytes; anything far larger is refused before it is parsed.
MAX_TOKEN_BYTES = 8192


class TokenError(ValueError):
    """A token that cannot be trusted; the message says why without quoting the token or key."""


@dataclass(frozen=True)
class Claims:
    """What a verified token says."""

    user: str
    uid: int
    issued_at: float
    expires_at: float
    admin: bool = False
    gid: int | None = None
    audience: str = AUD_CLIENT
    token_id: str | None = None
    member: int | None = None  # a raft credential's member id (``rid``)

    @property
    def daemon(self) -> bool:
        """A daemon credential (controller, agent or raft audience): never a user, never an admin."""
        return self.audience in DAEMON_AUDIENCES


def new_token_id() -> str:
    """A fresh random token id (``jti``): 128 bits, hex."""
    import secrets

    return secrets.token_hex(16)


def mint(
    key: bytes,
    user: str,
    uid: int,
    *,
    now: float,
    ttl_secs: float,
    admin: bool = False,
    gid: int | None = None,
    audience: str = AUD_CLIENT,
    token_id: str | None = None,
    member: int | None = None,
) -> str:
    """A signed token for ``user``/``uid`` valid ``ttl_secs`` from ``now``; a new random ``jti`` unless
    ``token_id`` is given. Daemon audiences cannot carry the admin claim."""
    import jwt

    if not key:
        raise TokenError("cannot mint a token without a key")
    if ttl_secs <= 0:
        raise TokenError("a token lifespan must be positive")
    if audience not in AUDIENCES:
        raise TokenError(f"unknown token audience {audience!r}")
    if admin and audience != AUD_CLIENT:
        raise TokenError("a daemon credential cannot carry the admin claim")
    payload: dict[str, Any] = {
        "sun": user,
        "sub": user,
        "uid": int(uid),
        "iat": int(now),
        "exp": int(now + ttl_secs),
        "jti": token_id or new_token_id(),
        "aud": audience,
    }
    if member is not None:
        payload["rid"] = int(member)
    if gid is not None:
        payload["gid"] = int(gid)
    if admin:
        payload["admin"] = True
    return jwt.encode(payload, key, algorithm=ALGORITHM)


def verify(
    key: bytes,
    token: str,
    *,
    now: float,
    max_lifespan_secs: float | None = None,
    skew_secs: float = DEFAULT_SKEW_SECS,
) -> Claims:
    """The claims of ``token`` if it is a valid, unexpired HS256 token signed with ``key`` (see the
    module docstring for what else is refused)."""
    import jwt

    if not key:
        raise TokenError("no key is configured to verify credentials")
    if not token or len(token) > MAX_TOKEN_BYTES:
        raise TokenError("malformed token (empty or too large)")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise TokenError("malformed token (not a JWT)") from None
    if header.get("alg") != ALGORITHM:
        raise TokenError(f"token algorithm must be {ALGORITHM}")
    try:
        payload = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            options={
                "require": ["exp", "iat"],
                "verify_exp": False,
                "verify_iat": False,
                "verify_aud": False,  # checked below: a missing aud means a client token
            },
        )
    except jwt.InvalidSignatureError:
        raise TokenError("token signature does not verify (wrong key or altered token)") from None
    except jwt.MissingRequiredClaimError as exc:
        raise TokenError(f"token lacks the {exc.claim!r} claim") from None
    except jwt.PyJWTError as exc:
        raise TokenError(f"malformed token ({type(exc).__name__})") from None
    claims = _claims(payload, now)
    if claims.issued_at > now + skew_secs:
        raise TokenError("token is issued in the future (check the clocks of the hosts)")
    if max_lifespan_secs is not None and claims.expires_at - claims.issued_at > max_lifespan_secs:
        raise TokenError(
            f"token lifetime exceeds the maximum of {max_lifespan_secs:g} seconds (auth.max_token_lifespan)"
        )
    return claims


def _claims(payload: dict[str, Any], now: float) -> Claims:
    exp, iat = payload.get("exp"), payload.get("iat")
    if not _number(exp) or not _number(iat):
        raise TokenError("token exp/iat claims must be numbers")
    if exp <= now:
        raise TokenError("token has expired")
    user = payload.get("sun", payload.get("sub"))
    if not isinstance(user, str) or not user:
        raise TokenError("token lacks a user name (sun or sub claim)")
    uid = payload.get("uid")
    if not isinstance(uid, int) or isinstance(uid, bool) or uid < 0:
        raise TokenError("token lacks a valid uid claim")
    gid = payload.get("gid")
    if gid is not None and (not isinstance(gid, int) or isinstance(gid, bool) or gid < 0):
        raise TokenError("token gid claim must be a non-negative integer")
    admin = payload.get("admin", False)
    if not isinstance(admin, bool):
        raise TokenError("token admin claim must be true or false")
    audience = payload.get("aud", AUD_CLIENT)
    if not isinstance(audience, str) or audience not in AUDIENCES:
        raise TokenError("token audience must be one of " + ", ".join(sorted(AUDIENCES)))
    if admin and audience != AUD_CLIENT:
        raise TokenError("a daemon credential cannot carry the admin claim")
    token_id = payload.get("jti")
    if token_id is not None and (not isinstance(token_id, str) or not 0 < len(token_id) <= 128):
        raise TokenError("token jti claim must be a short string")
    member = payload.get("rid")
    if member is not None and (not isinstance(member, int) or isinstance(member, bool) or member < 0):
        raise TokenError("token rid claim must be a non-negative integer")
    return Claims(
        user=user,
        uid=uid,
        issued_at=float(iat),
        expires_at=float(exp),
        admin=admin,
        gid=gid,
        audience=audience,
        token_id=token_id,
        member=member,
    )


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
