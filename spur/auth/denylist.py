"""An agent's copy of the controllers' token deny-list (the ``revocation`` state domain).

The agent asks a controller for the list (``Auth/ListRevoked`` with the version it holds) and
replaces its copy when the version changed; :meth:`LearntDenyList.is_revoked` answers the agent's
interceptor on every verification. Entries past their expiry are dropped as they are met (the tokens
are refused as expired anyway). Pure: time is passed in through ``clock``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

__all__ = ["LearntDenyList"]


class LearntDenyList:
    """Token id -> expiry, with the controllers' version it was learnt at."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.version = 0
        self._entries: dict[str, float] = {}

    def replace(self, version: int, entries: Mapping[str, float]) -> None:
        """Adopt the controllers' list at ``version``."""
        now = self.clock()
        self._entries = {t: float(exp) for t, exp in entries.items() if exp > now}
        self.version = version

    def is_revoked(self, token_id: str | None) -> bool:
        if token_id is None:
            return False
        expires = self._entries.get(token_id)
        if expires is None:
            return False
        if expires <= self.clock():
            del self._entries[token_id]
            return False
        return True

    def __len__(self) -> int:
        return len(self._entries)
