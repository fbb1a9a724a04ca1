"""HS256 JWTs compatible with Slurm's ``auth/jwt``: mint and verify, nothing else.

Contracts:

- :func:`mint` signs ``{"sun": user, "sub": user, "uid": uid, "iat": now, "exp": now + ttl}`` (plus
  ``"admin": true`` when asked) with HS256. Slurm reads ``sun``; ``sub`` is the JWT standard name.
- :func:`verify` accepts only HS256 (``alg: none`` and every other algorithm are refused), needs ``exp``,
  ``iat`` and ``uid`` and a user name in ``sun`` or ``sub`` (``sun`` wins when both are present), and
  refuses an expired token. Every failure is a :class:`TokenError` whose message never contains the
  token or the key.
- Pure: no I/O, time is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ALGORITHM", "Claims", "TokenError", "mint", "verify", "MAX_TOKEN_BYTES"]

ALGORITHM = "HS256"
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


def mint(
    key: bytes,
    user: str,
    uid: int,
    *,
    now: float,
    ttl_secs: float,
    admin: bool = False,
    gid: int | None = None,
) -> str:
    """A signed token for ``user``/``uid`` valid ``ttl_secs`` from ``now``."""
    import jwt

    if not key:
        raise TokenError("cannot mint a token without a key")
    if ttl_secs <= 0:
        raise TokenError("a token lifespan must be positive")
    payload: dict[str, Any] = {
        "sun": user,
        "sub": user,
        "uid": int(uid),
        "iat": int(now),
        "exp": int(now + ttl_secs),
    }
    if gid is not None:
        payload["gid"] = int(gid)
    if admin:
        payload["admin"] = True
    return jwt.encode(payload, key, algorithm=ALGORITHM)


def verify(key: bytes, token: str, *, now: float) -> Claims:
    """The claims of ``token`` if it is a valid, unexpired HS256 token signed with ``key``."""
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
            options={"require": ["exp", "iat"], "verify_exp": False, "verify_iat": False},
        )
    except jwt.InvalidSignatureError:
        raise TokenError("token signature does not verify (wrong key or altered token)") from None
    except jwt.MissingRequiredClaimError as exc:
        raise TokenError(f"token lacks the {exc.claim!r} claim") from None
    except jwt.PyJWTError as exc:
        raise TokenError(f"malformed token ({type(exc).__name__})") from None
    return _claims(payload, now)


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
    return Claims(user=user, uid=uid, issued_at=float(iat), expires_at=float(exp), admin=admin, gid=gid)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
