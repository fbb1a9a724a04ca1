"""The one place that decides who is an administrator.

Admin = uid 0, or a verified token carrying ``admin: true`` (only an admin, the controller or an agent,
all holders of the cluster key, can mint one). ``state`` is the cluster state, reserved for the rule
"an accounting user with AdminLevel=Administrator" once accounting lands.
"""

from __future__ import annotations

from typing import Any

from spur.auth.identity import Identity

__all__ = ["ADMIN_PRIVILEGE", "is_admin", "permission_denied"]

ADMIN_PRIVILEGE = "the administrator privilege (uid 0 or an admin token)"


def is_admin(identity: Identity, state: Any = None) -> bool:
    """Whether ``identity`` may do administrator-only things."""
    if identity.uid == 0:
        return True
    return identity.admin and identity.verified


def permission_denied(what: str, privilege: str = ADMIN_PRIVILEGE) -> str:
    """Slurm's refusal text plus what was refused and the privilege it needs."""
    return f"Access/permission denied: {what} needs {privilege}"
