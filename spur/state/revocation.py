"""State domain ``revocation``: the replicated deny-list of revoked user tokens, by token id (``jti``).

``scontrol token revoke`` proposes :class:`RevokeToken` with the token's id and the time it expires
anyway; every controller then refuses the token (and agents, which learn the list from the leader).
An entry is useful only until its token would have expired, so the list stays as small as the set
of live revoked tokens: each :class:`RevokeToken` first drops every entry whose expiry is at or
before the command's ``time`` (stamped by the leader, so pruning is deterministic on every member).

``version`` counts the revocations applied; agents compare it with theirs to know when to fetch the
list again. Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spur.state.domain import Rejected, StateDomain, StateQueries

__all__ = ["MAX_TOKEN_ID_LEN", "RevocationDomain", "RevokeToken"]

MAX_TOKEN_ID_LEN = 128


@dataclass
class RevokeToken:
    """Deny the token ``token_id`` until ``expires`` (its own expiry); ``time``: the leader's clock."""

    token_id: str
    expires: float
    time: float
    by: str = ""


class RevocationDomain(StateDomain):
    """Revoked token ids -> their expiry (see the module docstring)."""

    name = "revocation"
    commands = (RevokeToken,)

    def __init__(self, state: StateQueries) -> None:
        super().__init__(state)
        self.entries: dict[str, float] = {}
        self.version = 0

    # ------------------------------------------------------------------ queries

    def is_revoked(self, token_id: str | None) -> bool:
        return token_id is not None and token_id in self.entries

    def revoked(self) -> dict[str, float]:
        """A copy of the deny-list: token id -> expiry."""
        return dict(self.entries)

    # ------------------------------------------------------------------ commands

    def _apply_RevokeToken(self, cmd: RevokeToken) -> Any:
        if not isinstance(cmd.token_id, str) or not 0 < len(cmd.token_id) <= MAX_TOKEN_ID_LEN:
            return Rejected("INVALID_ARGUMENT", f"a token id is 1 to {MAX_TOKEN_ID_LEN} characters")
        self.entries = {tid: exp for tid, exp in self.entries.items() if exp > cmd.time}
        if cmd.expires > cmd.time:
            self.entries[cmd.token_id] = max(cmd.expires, self.entries.get(cmd.token_id, 0.0))
        self.version += 1
        return self.version

    # ------------------------------------------------------------------ snapshots

    def snapshot(self) -> Any:
        return {"version": self.version, "entries": [[t, self.entries[t]] for t in sorted(self.entries)]}

    def restore(self, body: Any | None) -> None:
        body = body or {}
        self.version = int(body.get("version", 0))
        self.entries = {str(t): float(exp) for t, exp in body.get("entries", [])}
