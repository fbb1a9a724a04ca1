"""Caller identity carried in RPC metadata (uid, gid, user name), and the admin check.

With ``[auth] mode = "disabled"`` (or a call without a credential in permissive mode) the daemons trust
these headers, as Slurm trusts munge on a closed cluster network; with a credential the JWT subject is the
identity and a mismatch is refused (see :mod:`spur.auth.policy`).
"""

from __future__ import annotations

from dataclasses import dataclass

from spur.auth.audiences import AUD_CLIENT, DAEMON_AUDIENCES
from spur.auth.headers import GID_KEY as GID_KEY  # the header names are re-exported from here
from spur.auth.headers import GROUP_KEY as GROUP_KEY
from spur.auth.headers import UID_KEY as UID_KEY
from spur.auth.headers import USER_KEY as USER_KEY
from spur.auth.headers import process_names
from spur.core.frozen_init import quick_init


@quick_init
@dataclass(frozen=True)
class Identity:
    """Who a call comes from. ``verified``: proven by a credential; ``admin``: the token's admin claim;
    ``audience``: the credential's (``client`` for a user and for every claimed identity; a daemon
    audience -- controller, agent, raft -- never speaks for a user and is never an admin)."""

    uid: int
    gid: int
    user: str
    group: str
    admin: bool = False
    verified: bool = False
    audience: str = AUD_CLIENT

    @property
    def daemon(self) -> bool:
        """A daemon credential's identity (controller, agent or raft audience)."""
        return self.audience in DAEMON_AUDIENCES

    @property
    def anonymous(self) -> bool:
        """A call with neither identity headers nor a credential (daemons in disabled/permissive mode)."""
        return self.uid < 0


class IdentityError(ValueError):
    pass


# Who a call is from when it carries no identity headers and no credential. Handlers that act for a
# user refuse it (see require_identity); daemon-to-daemon calls in disabled/permissive mode are such.
ANONYMOUS = Identity(-1, -1, "", "")


def require_identity(ident: Identity | None, metadata: dict[str, str]) -> Identity:
    """``ident`` (the interceptor's), or the claimed headers without an interceptor; raises IdentityError
    for an anonymous caller or bad headers."""
    if ident is None:
        return identity_from_metadata(metadata)
    if ident.anonymous:
        raise IdentityError(f"missing caller identity header {UID_KEY}")
    return ident


def current_identity() -> Identity:
    """The identity of this process (what the CLI sends)."""
    return Identity(*process_names())


def identity_metadata(ident: Identity | None = None) -> dict[str, str]:
    ident = ident or current_identity()
    return {UID_KEY: str(ident.uid), GID_KEY: str(ident.gid), USER_KEY: ident.user, GROUP_KEY: ident.group}


def identity_from_metadata(md: dict[str, str]) -> Identity:
    """Parse the identity headers; raises IdentityError naming the missing or bad header."""
    try:
        uid = int(md[UID_KEY])
        gid = int(md.get(GID_KEY, md[UID_KEY]))
    except KeyError as exc:
        raise IdentityError(f"missing caller identity header {exc.args[0]}") from None
    except ValueError:
        raise IdentityError("caller identity headers must be numeric uid/gid") from None
    if uid < 0 or gid < 0:
        raise IdentityError("caller uid/gid must not be negative")
    user = md.get(USER_KEY) or str(uid)
    return Identity(uid, gid, user, md.get(GROUP_KEY) or str(gid))
