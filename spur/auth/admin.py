"""The one place that decides who is an administrator.

Admin = a user (a ``client``-audience identity) with uid 0, a verified token carrying ``admin: true``
(minted only by ``MintToken`` for an admin, or by a holder of the cluster key), or, given the cluster
``state``, a user whom accounting records with AdminLevel=Administrator (``sacctmgr modify user NAME
set adminlevel=Administrator``). A daemon credential (controller, agent or raft audience) is never an
admin, whatever its uid: a captured daemon token must not become an administrator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from spur.auth.identity import Identity

if TYPE_CHECKING:
    from spur.state.domain import StateDomain

__all__ = ["ADMIN_PRIVILEGE", "DomainSource", "is_admin", "permission_denied"]

ADMIN_PRIVILEGE = "the administrator privilege (uid 0, an admin token or accounting AdminLevel=Administrator)"


class DomainSource(Protocol):
    """What the admin rule and the callers' gate read of the controller's cluster state
    (``spur.state.machine.ClusterState``): its domains by name, ``accounting`` (AdminLevel) and
    ``revocation`` (the deny-list)."""

    @property
    def domains(self) -> Mapping[str, StateDomain]: ...


def is_admin(identity: Identity, state: DomainSource | None = None) -> bool:
    """Whether ``identity`` may do administrator-only things (never for a daemon credential)."""
    if identity.daemon:
        return False
    if identity.uid == 0 or (identity.admin and identity.verified):
        return True
    accounting = getattr(state, "domains", {}).get("accounting")
    return accounting is not None and accounting.admin_level(identity.user) == "Administrator"


def permission_denied(what: str, privilege: str = ADMIN_PRIVILEGE) -> str:
    """Slurm's refusal text plus what was refused and the privilege it needs."""
    return f"Access/permission denied: {what} needs {privilege}"
