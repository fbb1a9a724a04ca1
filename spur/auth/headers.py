"""The identity headers every call carries, and this process's own (what the CLI sends).

Kept free of dataclasses and everything else :mod:`spur.auth.identity` needs, so a query command's
cold start pays only for ``pwd``/``grp``. :mod:`spur.auth.identity` re-exports the header names.
"""

from __future__ import annotations

import os

UID_KEY = "x-spur-uid"
GID_KEY = "x-spur-gid"
USER_KEY = "x-spur-user"
GROUP_KEY = "x-spur-group"


def process_names() -> tuple[int, int, str, str]:
    """(uid, gid, user name, group name) of this process; a name not in the databases is its number."""
    import grp
    import pwd

    uid, gid = os.getuid(), os.getgid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = str(gid)
    return uid, gid, user, group


def process_identity_metadata() -> dict[str, str]:
    """The identity headers of this process (a new dict each call; callers may add to it)."""
    uid, gid, user, group = process_names()
    return {UID_KEY: str(uid), GID_KEY: str(gid), USER_KEY: user, GROUP_KEY: group}
