"""The host's password and group databases for the gid rule of :mod:`spur.auth.policy`.

:class:`SystemGroups` answers from ``pwd``/``grp`` (``os.getgrouplist``, so NSS sources such as LDAP
count), caching each answer for ``ttl`` seconds so a busy controller does not ask NSS on every call.
"""

from __future__ import annotations

import grp
import os
import pwd
import time
from collections.abc import Callable

__all__ = ["SystemGroups"]


class SystemGroups:
    """:class:`spur.auth.policy.GroupDirectory` over this host's databases, with a short cache."""

    def __init__(self, *, ttl: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._groups: dict[str, tuple[float, int | None, frozenset[int]]] = {}
        self._names: dict[int, tuple[float, str | None]] = {}

    def _lookup(self, user: str) -> tuple[int | None, frozenset[int]]:
        now = self.clock()
        hit = self._groups.get(user)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1], hit[2]
        primary: int | None
        groups: frozenset[int]
        try:
            gid = pwd.getpwnam(user).pw_gid
        except KeyError:
            primary, groups = None, frozenset()
        else:
            primary = gid
            try:
                groups = frozenset(os.getgrouplist(user, gid))
            except OSError:
                groups = frozenset({gid})
        if len(self._groups) > 4096:
            self._groups.clear()
        self._groups[user] = (now, primary, groups)
        return primary, groups

    def is_member(self, user: str, gid: int) -> bool:
        return gid in self._lookup(user)[1]

    def primary_gid(self, user: str) -> int | None:
        return self._lookup(user)[0]

    def group_name(self, gid: int) -> str | None:
        now = self.clock()
        hit = self._names.get(gid)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        try:
            name: str | None = grp.getgrgid(gid).gr_name
        except (KeyError, OverflowError):
            name = None
        if len(self._names) > 4096:
            self._names.clear()
        self._names[gid] = (now, name)
        return name
