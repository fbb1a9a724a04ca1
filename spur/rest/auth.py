"""HTTP authentication headers -> the gRPC call metadata the controller's auth policy reads (pure).

slurmrestd clients authenticate with ``X-SLURM-USER-NAME`` + ``X-SLURM-USER-TOKEN`` or with
``Authorization: Bearer <jwt>``. REST has no OS identity of its own, so the metadata carries:

- ``authorization: Bearer <token>`` when a token was given (either header form), and
- the CLAIMED identity headers (``x-spur-uid``/``x-spur-gid``/``x-spur-user``/``x-spur-group``) of the
  user named by ``X-SLURM-USER-NAME`` or, without it, by the token's ``sun``/``sub`` claim (read
  without verification: it is only a claim).

Verifying the token and the claim against each other is the controller server's interceptor's job
(``[auth] mode``); the REST layer runs that same interceptor before every call. With auth disabled
the claim is trusted, exactly as the gRPC path trusts the CLI's headers: only ``[auth] mode =
"required"`` makes an exposed REST port safe.

Every authentication failure answers 401 with one text, ``spur.rest.errors.AUTHENTICATION_FAILED``
(:func:`spur.rest.errors.authentication_failed`), whatever went wrong (no user named, an unknown
user, a user name the token does not carry, a token that does not verify), so a client without a
valid token cannot tell an existing account from a missing one. The reason is logged on the server
(never the token).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from typing import Protocol

from spur.auth.identity import Identity, identity_metadata
from spur.rest.errors import authentication_failed

__all__ = [
    "UserResolver",
    "home_of",
    "metadata_from_headers",
    "resolve_local_user",
]

UserResolver = Callable[[str], Identity | None]


class HeaderItems(Protocol):
    """Request headers as read here: a plain mapping, or Quart's (werkzeug) ``Headers``."""

    def items(self) -> Iterable[tuple[str, str]]: ...

_MAX_TOKEN = 16 * 1024


def _claimed_user(token: str) -> str | None:
    """The ``sun`` (Slurm) or ``sub`` claim of a JWT, unverified; None if unreadable."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        padded = parts[1] + "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, UnicodeError):
        return None
    if not isinstance(claims, dict):
        return None
    for key in ("sun", "sub"):
        value = claims.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def metadata_from_headers(headers: HeaderItems, resolve_user: UserResolver, source: str) -> dict:
    """Build the call metadata (see the module docstring). ``headers`` keys are matched
    case-insensitively; ``resolve_user(name)`` gives the account's uid/gid (None: no such user).

    Raises the 401 of :func:`spur.rest.errors.authentication_failed` when no user can be named, the
    named user does not exist, or a token names another user than ``X-SLURM-USER-NAME``.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    token = lowered.get("x-slurm-user-token", "").strip()
    auth = lowered.get("authorization", "").strip()
    if not token and auth[:7].lower() == "bearer ":
        token = auth[7:].strip()
    if len(token) > _MAX_TOKEN:
        raise authentication_failed(source, f"token of {len(token)} bytes (at most {_MAX_TOKEN})")
    token_user = _claimed_user(token) if token else None
    user = lowered.get("x-slurm-user-name", "").strip() or token_user
    if not user:
        raise authentication_failed(source, "no user named (no X-SLURM-USER-NAME, no readable token)")
    if token_user is not None and token_user != user:
        # The interceptor would refuse it too; refused here, before the name is looked up.
        raise authentication_failed(source, f"the token is not {user[:64]!r}'s")
    ident = resolve_user(user)
    if ident is None:
        raise authentication_failed(source, f"unknown user {user[:64]!r}")
    md = identity_metadata(ident)
    if token:
        md["authorization"] = f"Bearer {token}"
    return md


def resolve_local_user(name: str) -> Identity | None:
    """The local account ``name`` (or a numeric uid) via pwd/grp; None if unknown."""
    import grp
    import pwd

    try:
        pw = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, ValueError, OverflowError):
        return None
    try:
        group = grp.getgrgid(pw.pw_gid).gr_name
    except KeyError:
        group = str(pw.pw_gid)
    return Identity(pw.pw_uid, pw.pw_gid, pw.pw_name, group)


def home_of(name: str) -> str:
    """The home directory of ``name`` ("/" if unknown): the default working directory of REST jobs."""
    import pwd

    try:
        return pwd.getpwnam(name).pw_dir or "/"
    except KeyError:
        return "/"
