"""Who a call is from and whether it may proceed: the ``[auth] mode`` rules, as pure functions.

Authentication (:func:`authenticate`), given the mode, whether a key is configured, the presented
credential (already verified by the caller, or None) and the claimed identity headers:

- ``disabled``: any credential is ignored; the claimed identity is used (as Slurm trusts munge). A call
  with no identity headers (and, in permissive mode, no credential) is ``ANONYMOUS``: handlers that act
  for a user refuse it; daemon-to-daemon calls without a key are such.
- ``permissive``: a presented credential must verify (with no key configured, a presented credential is
  refused: there is nothing to verify it with); a call without one runs as its claimed identity and
  the caller logs it (:attr:`Authenticated.unauthenticated`).
- ``required``: a call without a valid credential is refused (UNAUTHENTICATED).
- With a verified credential the token's subject IS the identity: a claimed uid, user name or (when
  the token carries one) gid that disagrees with it is refused (PERMISSION_DENIED). Claimed headers
  may be absent (daemons send none). The identity's audience is the token's.
- The recorded gid of a verified user is a verified one: the token's ``gid``; else the claimed
  ``x-spur-gid`` when the password/group database (:class:`GroupDirectory`) says the user is a member
  of that group; else the user's primary gid from the password database; else the call is refused
  (PERMISSION_DENIED: a user the database does not know cannot be given a group).

Authorization (:func:`authorize`) by the method's privilege in :data:`METHOD_PRIVILEGE` and the
daemon audiences in :data:`DAEMON_CALLERS`:

- A daemon credential (controller, agent or raft audience) may call only the methods that list its
  audience in :data:`DAEMON_CALLERS`, in every mode: daemons never act for a user (submit, cancel,
  mint tokens, accounting changes, ...) and are never admins. The raft audience is listed nowhere.
- ``ADMIN`` methods need :func:`spur.auth.admin.is_admin` (a user) in every mode.
- ``DAEMON`` methods (agent-to-controller and controller-to-agent calls) need, in ``required`` mode,
  a daemon credential of a listed audience or an admin user (tests and operators drive them by hand);
  in the other modes a user identity may call them, as before authentication existed.
- Everything else needs only an identity; per-object rules (another user's job) are the handlers'.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from spur.auth.admin import ADMIN_PRIVILEGE, DomainSource, is_admin, permission_denied
from spur.auth.audiences import AUD_AGENT, AUD_CONTROLLER
from spur.auth.identity import ANONYMOUS, GID_KEY, UID_KEY, USER_KEY, Identity, IdentityError
from spur.auth.identity import identity_from_metadata as _claimed_identity
from spur.auth.tokens import Claims, TokenError

__all__ = [
    "AUTHORIZATION_KEY",
    "Authenticated",
    "DAEMON_CALLERS",
    "GroupDirectory",
    "METHOD_PRIVILEGE",
    "Privilege",
    "Refusal",
    "authenticate",
    "authorize",
    "bearer_token",
]

AUTHORIZATION_KEY = "authorization"
MODES = ("disabled", "permissive", "required")


class Privilege(enum.Enum):
    USER = "user"
    ADMIN = "admin"
    DAEMON = "daemon"


# Methods not listed need Privilege.USER. Future daemon-only services (k0s, mesh) add their methods here.
METHOD_PRIVILEGE: dict[str, Privilege] = {
    "/spur.v1.Controller/UpdateNode": Privilege.ADMIN,
    "/spur.v1.Controller/Reconfigure": Privilege.ADMIN,
    "/spur.v1.Controller/RegisterNode": Privilege.DAEMON,
    "/spur.v1.Controller/Heartbeat": Privilege.DAEMON,
    "/spur.v1.Controller/ReportJobStatus": Privilege.DAEMON,
    "/spur.v1.Controller/RegisterController": Privilege.DAEMON,
    "/spur.v1.Agent/LaunchJob": Privilege.DAEMON,
    "/spur.batch.v1.ControllerBatch/ReportJobStatuses": Privilege.DAEMON,
    "/spur.batch.v1.AgentBatch/LaunchJobs": Privilege.DAEMON,
    "/spur.v1.Agent/SignalJob": Privilege.DAEMON,
    "/spur.inventory.v1.Inventory/RemoveNode": Privilege.DAEMON,
    "/spur.admission.v1.Admission/CreateToken": Privilege.ADMIN,
    "/spur.admission.v1.Admission/ListTokens": Privilege.ADMIN,
    "/spur.admission.v1.Admission/RevokeToken": Privilege.ADMIN,
    "/spur.inventory.v1.Inventory/RemoveNodes": Privilege.ADMIN,
    "/spur.mesh.v1.Mesh/Join": Privilege.DAEMON,
    "/spur.mesh.v1.Mesh/Leave": Privilege.DAEMON,
    "/spur.mesh.v1.Mesh/SetPodCidr": Privilege.ADMIN,
    "/spur.mesh.v1.MeshAgent/Apply": Privilege.DAEMON,
    "/spur.mesh.v1.MeshAgent/ApplyDelta": Privilege.DAEMON,
    "/spur.mesh.v1.MeshAgent/JoinMesh": Privilege.ADMIN,
    "/spur.mesh.v1.MeshAgent/LeaveMesh": Privilege.ADMIN,
    "/spur.mesh.v1.MeshAgent/ApplyWanted": Privilege.ADMIN,
    "/spur.k0s.v1.K0sAgent/Apply": Privilege.DAEMON,
    "/spur.k0s.v1.K0sAgent/Status": Privilege.DAEMON,
    "/spur.k0s.v1.K0sAgent/Stop": Privilege.DAEMON,
    "/spur.k0s.v1.K0sAgent/Reset": Privilege.DAEMON,
    "/spur.k0s.v1.K0sAgent/CreateToken": Privilege.DAEMON,
    "/spur.k0s.v1.K0sAgent/AdminKubeconfig": Privilege.DAEMON,
    "/spur.k8s.v1.K8sCluster/Up": Privilege.ADMIN,
    "/spur.k8s.v1.K8sCluster/Down": Privilege.ADMIN,
    "/spur.k8s.v1.K8sCluster/AddNodes": Privilege.ADMIN,
    "/spur.k8s.v1.K8sCluster/RemoveNodes": Privilege.ADMIN,
    "/spur.v1.Auth/ListRevoked": Privilege.DAEMON,
}

_AGENT = frozenset({AUD_AGENT})
_CONTROLLER = frozenset({AUD_CONTROLLER})

# The daemon audiences that may call a method; a method not listed refuses every daemon credential.
# Controller methods (6817) serve agents (spurd and the Kubernetes operator) and other controllers;
# agent methods (6818) serve controllers. The raft audience is accepted on neither port.
DAEMON_CALLERS: dict[str, frozenset[str]] = {
    # spurd / the operator -> controllers
    "/spur.v1.Controller/RegisterNode": _AGENT,
    "/spur.v1.Controller/Heartbeat": _AGENT,
    "/spur.v1.Controller/ReportJobStatus": _AGENT,
    "/spur.batch.v1.ControllerBatch/ReportJobStatuses": _AGENT,
    "/spur.v1.Controller/GetJobs": _AGENT,  # spurd confirms a step's job; the operator reads its jobs
    "/spur.v1.Controller/GetNodes": _AGENT,  # the operator reads a node's state
    "/spur.inventory.v1.Inventory/RemoveNode": _AGENT,  # the operator: a Kubernetes node was deleted
    "/spur.v1.Accounting/Show": _AGENT,  # the operator's quota reconciler (read only)
    "/spur.mesh.v1.Mesh/Join": _AGENT,
    "/spur.mesh.v1.Mesh/Leave": _AGENT,
    "/spur.mesh.v1.Mesh/Members": _AGENT,
    "/spur.v1.Auth/ListRevoked": _AGENT,  # agents learn the token deny-list
    # controllers -> controllers
    "/spur.v1.Controller/RegisterController": _CONTROLLER,
    "/spur.v1.Controller/GetControllerStatus": _CONTROLLER,
    # controllers -> agents (spurd and the operator's virtual agent)
    "/spur.v1.Agent/LaunchJob": _CONTROLLER,
    "/spur.batch.v1.AgentBatch/LaunchJobs": _CONTROLLER,
    "/spur.v1.Agent/SignalJob": _CONTROLLER,
    "/spur.v1.Agent/StreamOutput": _CONTROLLER,  # REST output, proxied for a verified user
    "/spur.mesh.v1.MeshAgent/Apply": _CONTROLLER,
    "/spur.mesh.v1.MeshAgent/ApplyDelta": _CONTROLLER,
    "/spur.k0s.v1.K0sAgent/Apply": _CONTROLLER,
    "/spur.k0s.v1.K0sAgent/Status": _CONTROLLER,
    "/spur.k0s.v1.K0sAgent/Stop": _CONTROLLER,
    "/spur.k0s.v1.K0sAgent/Reset": _CONTROLLER,
    "/spur.k0s.v1.K0sAgent/CreateToken": _CONTROLLER,
    "/spur.k0s.v1.K0sAgent/AdminKubeconfig": _CONTROLLER,
}


class GroupDirectory(Protocol):
    """The password and group databases, as the gid rule needs them (see the module docstring)."""

    def is_member(self, user: str, gid: int) -> bool:
        """Whether ``user`` belongs to group ``gid`` (its primary group included)."""
        ...

    def primary_gid(self, user: str) -> int | None:
        """``user``'s primary gid, or None when the password database does not know the user."""
        ...

    def group_name(self, gid: int) -> str | None:
        """The name of group ``gid``, or None when unknown."""
        ...


# How a refusal names what was refused (the method name otherwise).
_ACTIONS: dict[str, str] = {
    "/spur.k8s.v1.K8sCluster/Up": "bringing up the Kubernetes cluster (spur k8s up)",
    "/spur.k8s.v1.K8sCluster/Down": "tearing down the Kubernetes cluster (spur k8s down)",
    "/spur.k8s.v1.K8sCluster/AddNodes": "adding nodes to the Kubernetes cluster (spur k8s add-nodes)",
    "/spur.k8s.v1.K8sCluster/RemoveNodes": "removing nodes from the Kubernetes cluster (spur k8s remove-nodes)",
    "/spur.admission.v1.Admission/CreateToken": "creating node join tokens (spur token create)",
    "/spur.admission.v1.Admission/ListTokens": "listing node join tokens (spur token list)",
    "/spur.admission.v1.Admission/RevokeToken": "revoking node join tokens (spur token revoke)",
    "/spur.v1.Controller/UpdateNode": "updating nodes (scontrol update NodeName=...)",
    "/spur.v1.Controller/Reconfigure": "scontrol reconfigure",
    "/spur.inventory.v1.Inventory/RemoveNodes": "removing nodes (scontrol delete NodeName=...)",
    "/spur.mesh.v1.Mesh/SetPodCidr": "routing pod CIDRs over the mesh",
    "/spur.mesh.v1.MeshAgent/JoinMesh": "joining the WireGuard mesh (spur net join)",
    "/spur.mesh.v1.MeshAgent/LeaveMesh": "leaving the WireGuard mesh (spur net leave)",
    "/spur.mesh.v1.MeshAgent/ApplyWanted": "applying the mesh membership (spur net mesh --apply)",
}


@dataclass(frozen=True)
class Refusal:
    """A call that may not proceed: ``code`` is a StatusCode name, ``message`` the user-facing reason."""

    code: str
    message: str


@dataclass(frozen=True)
class Authenticated:
    identity: Identity
    # True when permissive mode let a call without a credential through (the daemon logs it).
    unauthenticated: bool = False


def bearer_token(metadata: Mapping[str, str]) -> str | TokenError | None:
    """The token of an ``authorization: Bearer <jwt>`` header; None without the header; a TokenError
    for a header of another form."""
    value = metadata.get(AUTHORIZATION_KEY)
    if value is None:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return TokenError("the authorization header must be 'Bearer <token>'")
    return token.strip()


def authenticate(
    *,
    mode: str,
    has_key: bool,
    presented: bool,
    verification: Claims | TokenError | None,
    claimed: Mapping[str, str],
    groups: GroupDirectory | None = None,
) -> Authenticated | Refusal:
    """Apply the mode rules (module docstring). ``presented``: the call carried a credential (a
    malformed one included); ``verification``: its verified claims or why it failed (None when absent
    or not verified because there is no key); ``groups``: the databases for a user token without a
    gid (None: no database, so such a token is refused)."""
    if mode not in MODES:
        return Refusal("INTERNAL", f"unknown auth mode {mode!r}")
    if mode == "disabled":
        return _claimed(claimed)
    if presented:
        if not has_key:
            return Refusal(
                "UNAUTHENTICATED",
                "a credential was presented but this daemon has no key to verify it "
                "(auth.jwt_key / auth.jwt_key_file is not set)",
            )
        if isinstance(verification, TokenError) or verification is None:
            why = str(verification) if verification is not None else "not verified"
            return Refusal("UNAUTHENTICATED", f"invalid credential: {why}")
        return _from_claims(verification, claimed, groups)
    if mode == "required":
        return Refusal(
            "UNAUTHENTICATED",
            "authentication required (auth.mode = required): no credential presented; set SLURM_JWT "
            "(see 'scontrol token') or run where the Spur credential broker socket is available",
        )
    found = _claimed(claimed)
    if isinstance(found, Refusal):
        return found
    return Authenticated(found.identity, unauthenticated=True)


def _claimed(claimed: Mapping[str, str]) -> Authenticated | Refusal:
    if UID_KEY not in claimed:
        return Authenticated(ANONYMOUS)
    try:
        return Authenticated(_claimed_identity(dict(claimed)))
    except IdentityError as exc:
        return Refusal("UNAUTHENTICATED", str(exc))


def _from_claims(
    claims: Claims, claimed: Mapping[str, str], groups: GroupDirectory | None
) -> Authenticated | Refusal:
    raw_uid = claimed.get(UID_KEY)
    if raw_uid is not None and raw_uid.strip() != str(claims.uid):
        return Refusal(
            "PERMISSION_DENIED",
            f"claimed uid {raw_uid[:32]!r} disagrees with the credential (user {claims.user}, "
            f"uid {claims.uid})",
        )
    raw_user = claimed.get(USER_KEY)
    if raw_user is not None and raw_user != claims.user:
        return Refusal(
            "PERMISSION_DENIED",
            f"claimed user {raw_user[:64]!r} disagrees with the credential (user {claims.user}, "
            f"uid {claims.uid})",
        )
    raw_gid = claimed.get(GID_KEY)
    if claims.gid is not None:
        if raw_gid is not None and raw_gid.strip() != str(claims.gid):
            return Refusal(
                "PERMISSION_DENIED",
                f"claimed gid {raw_gid[:32]!r} disagrees with the credential (user {claims.user}, "
                f"gid {claims.gid})",
            )
        gid = claims.gid
    elif claims.daemon:
        gid = claims.uid  # a daemon never acts for a user, so its group is never recorded
    else:
        found = _verified_gid(claims, raw_gid, groups)
        if isinstance(found, Refusal):
            return found
        gid = found
    if claims.daemon:
        group = str(gid)
    else:
        group = (groups.group_name(gid) if groups is not None else None) or str(gid)
    return Authenticated(
        Identity(
            claims.uid,
            gid,
            claims.user,
            group,
            admin=claims.admin,
            verified=True,
            audience=claims.audience,
        )
    )


def _verified_gid(claims: Claims, raw_gid: str | None, groups: GroupDirectory | None) -> int | Refusal:
    """The gid of a user token without one (module docstring): a claimed group the user belongs to,
    else its primary group, else a refusal."""
    if groups is not None:
        if raw_gid is not None and raw_gid.strip().isdigit() and len(raw_gid.strip()) <= 10:
            wanted = int(raw_gid)
            if groups.is_member(claims.user, wanted):
                return wanted
        primary = groups.primary_gid(claims.user)
        if primary is not None:
            return primary
    return Refusal(
        "PERMISSION_DENIED",
        f"user {claims.user} (uid {claims.uid}): the credential carries no gid and the user's groups "
        "are unknown to this daemon's password database; use a token with a gid (scontrol token)",
    )


def authorize(method: str, identity: Identity, *, mode: str, state: DomainSource | None = None) -> Refusal | None:
    """None when ``identity`` may call ``method``, else the refusal (module docstring). ``state`` is
    the controller's cluster state, for the accounting Administrators rule of ``is_admin``."""
    privilege = METHOD_PRIVILEGE.get(method, Privilege.USER)
    name = _ACTIONS.get(method) or method.rsplit("/", 1)[-1]
    if identity.daemon:
        if identity.audience in DAEMON_CALLERS.get(method, ()):
            return None
        allowed = DAEMON_CALLERS.get(method)
        why = (
            f"it needs a {' or '.join(sorted(allowed))} credential"
            if allowed
            else "a daemon credential cannot act for a user or as an administrator"
        )
        return Refusal(
            "PERMISSION_DENIED",
            f"Access/permission denied: {name} refused for a daemon credential "
            f"(audience {identity.audience}): {why}",
        )
    if privilege is Privilege.USER or is_admin(identity, state):
        return None
    who = f"user {identity.user} (uid {identity.uid})"
    if privilege is Privilege.ADMIN:
        return Refusal("PERMISSION_DENIED", f"{permission_denied(name)}; caller is {who}")
    if mode != "required":
        return None
    audiences = " or ".join(sorted(DAEMON_CALLERS.get(method, ()))) or "daemon"
    return Refusal(
        "PERMISSION_DENIED",
        permission_denied(name, f"a Spur daemon credential (audience {audiences}) or {ADMIN_PRIVILEGE}")
        + f" (auth.mode = required); caller is {who}",
    )
