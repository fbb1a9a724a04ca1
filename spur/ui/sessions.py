"""Dashboard sessions, one-time sign-in links and CSRF tokens (pure: time is passed in).

Contracts:

- A :class:`Session` is created at sign-in for one user and lives exactly as long as the credential it
  was made from (``expires_at``: the token's ``exp``). Its id (the cookie value) and its CSRF token are
  independent 256-bit random strings. :meth:`SessionStore.get` returns None for an unknown or expired
  id (and forgets an expired one); the store holds at most ``capacity`` sessions and, when full, drops
  the one that expires first.
- The session cookie (:func:`session_cookie`) is ``HttpOnly``, ``SameSite=Strict``, ``Path=/ui/``, with
  ``Max-Age`` = the seconds the session has left, and ``Secure`` when served over TLS.
- :func:`csrf_ok` accepts a form only when its ``csrf`` field equals the session's token (constant-time
  comparison); a missing or different value is refused.
- :class:`LinkLedger` makes a sign-in link work once: :meth:`LinkLedger.use` returns True the first time
  a token id is presented and False after, until the token expires (then its entry is forgotten; the
  token itself is refused as expired).
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field

__all__ = ["COOKIE_NAME", "LinkLedger", "Session", "SessionStore", "clear_cookie", "csrf_ok", "session_cookie"]

COOKIE_NAME = "spur_session"


@dataclass
class Session:
    """A signed-in browser: who, with what credential, until when."""

    id: str
    user: str
    expires_at: float
    metadata: dict[str, str]  # the call metadata of the credential (authorization + identity headers)
    admin: bool = False
    uid: int = -1
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    flash: list[str] = field(default_factory=list)  # one-shot messages for the next page

    def remaining(self, now: float) -> float:
        return self.expires_at - now

    def take_flash(self) -> list[str]:
        out, self.flash = self.flash, []
        return out


class SessionStore:
    """In-memory sessions of one spurctld (see the module docstring)."""

    def __init__(self, capacity: int = 10000) -> None:
        self.capacity = capacity
        self._sessions: dict[str, Session] = {}

    def create(
        self, user: str, metadata: dict[str, str], expires_at: float, now: float, *, admin: bool = False, uid: int = -1
    ) -> Session:
        if expires_at <= now:
            raise ValueError("the credential has already expired")
        self._purge(now)
        if len(self._sessions) >= self.capacity:
            oldest = min(self._sessions.values(), key=lambda s: s.expires_at)
            del self._sessions[oldest.id]
        session = Session(secrets.token_urlsafe(32), user, expires_at, dict(metadata), admin=admin, uid=uid)
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str | None, now: float) -> Session | None:
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if session.expires_at <= now:
            del self._sessions[session_id]
            return None
        return session

    def drop(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def _purge(self, now: float) -> None:
        for sid in [sid for sid, s in self._sessions.items() if s.expires_at <= now]:
            del self._sessions[sid]

    def __len__(self) -> int:
        return len(self._sessions)


def csrf_ok(session: Session, submitted: str | None) -> bool:
    """True when the form's ``csrf`` value is this session's token."""
    if not submitted:
        return False
    return hmac.compare_digest(session.csrf.encode(), submitted.encode("utf-8", "surrogateescape"))


def session_cookie(session: Session, now: float, *, secure: bool) -> str:
    """The ``Set-Cookie`` value for ``session``."""
    max_age = max(0, int(session.remaining(now)))
    parts = [f"{COOKIE_NAME}={session.id}", "Path=/ui/", f"Max-Age={max_age}", "HttpOnly", "SameSite=Strict"]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def clear_cookie(*, secure: bool) -> str:
    """The ``Set-Cookie`` value that removes the session cookie."""
    parts = [f"{COOKIE_NAME}=", "Path=/ui/", "Max-Age=0", "HttpOnly", "SameSite=Strict"]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


class LinkLedger:
    """Token ids of sign-in links already used (see the module docstring)."""

    def __init__(self) -> None:
        self._used: dict[str, float] = {}

    def use(self, token_id: str, expires_at: float, now: float) -> bool:
        for tid in [t for t, exp in self._used.items() if exp <= now]:
            del self._used[tid]
        if token_id in self._used:
            return False
        self._used[token_id] = expires_at
        return True
