"""Planning ``spur k8s up`` / ``add-nodes`` / ``remove-nodes``: pure functions of the inventory.

Scope: ``--nodes`` (a hostlist), ``--partition`` and ``--selector k=v`` (repeatable, ANDed; matches a
node feature spelled ``k=v``) are unioned and resolved once, when the command runs. With none of them
the cluster spans the whole inventory (every registered node, including nodes registered later).

Control planes: ``--control-plane-nodes`` (or ``--control-plane-node``) wins over ``--replicas``; an
explicitly named node outside the cluster's nodes is refused with ``control-plane node <name> is not
a registered node``. Otherwise the first control plane is ``[cluster] control_plane_node`` (refused
with ``control-plane node <name> is not among the selected cluster nodes`` when outside the scope) or
the lowest-named node, and further ones (``--replicas``, default ``[cluster] control_plane_replicas``)
are the lowest-named remaining nodes. The first control plane bootstraps etcd. Counts are 1, 3 or 5.

Roles: a one-node cluster runs ``single``; otherwise control planes run ``controller`` and the rest
``worker``. Each node gets a /24 carved from ``pod_cidr`` (kept for nodes that already have one).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

REPLICAS = (1, 3, 5)


class PlanError(ValueError):
    """A request the cluster refuses; the message is shown to the user as is."""


@dataclass(frozen=True)
class Inventory:
    """Registered nodes (names), their partitions and features, as the controller knows them."""

    nodes: tuple[str, ...]
    partitions: Mapping[str, Sequence[str]] = field(default_factory=dict)  # partition -> node names
    features: Mapping[str, Sequence[str]] = field(default_factory=dict)  # node -> features


@dataclass(frozen=True)
class ScopeRequest:
    nodes: str = ""
    partition: str = ""
    selectors: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.nodes or self.partition or self.selectors)


@dataclass(frozen=True)
class Plan:
    scoped: bool
    members: tuple[str, ...]
    control_planes: tuple[str, ...]
    roles: dict[str, str]
    pod_cidrs: dict[str, str]


def natural_key(name: str) -> tuple:
    """Sort key: ``node2`` before ``node10``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def sort_nodes(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(names), key=natural_key))


def parse_selector(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise PlanError(f"invalid --selector {text!r}: expected key=value")
    return key.strip(), value.strip()


def resolve_scope(req: ScopeRequest, inv: Inventory) -> tuple[str, ...]:
    """The nodes a scope selects (sorted). Raises PlanError for an unknown partition, an unregistered
    node in ``--nodes``, a malformed selector or an empty result."""
    from spur.core.hostlist import expand

    registered = set(inv.nodes)
    chosen: set[str] = set()
    if req.nodes:
        try:
            named = expand(req.nodes)
        except ValueError as exc:
            raise PlanError(f"invalid --nodes {req.nodes!r}: {exc}") from None
        unknown = [n for n in named if n not in registered]
        if unknown:
            raise PlanError(f"--nodes names nodes that are not registered: {', '.join(sort_nodes(unknown))}")
        chosen |= set(named)
    if req.partition:
        if req.partition not in inv.partitions:
            raise PlanError(f"partition {req.partition!r} does not exist")
        chosen |= {n for n in inv.partitions[req.partition] if n in registered}
    if req.selectors:
        wanted = {f"{k}={v}" for k, v in map(parse_selector, req.selectors)}
        chosen |= {n for n in registered if wanted <= set(inv.features.get(n, ()))}
    if not chosen:
        raise PlanError("the scope (--nodes/--partition/--selector) selects no registered node")
    return sort_nodes(chosen)


def choose_control_planes(
    members: Sequence[str],
    *,
    explicit: Sequence[str] = (),
    conf_node: str | None = None,
    replicas: int = 1,
) -> tuple[str, ...]:
    """The control-plane nodes, first = etcd bootstrap (see the module docstring)."""
    member_set = set(members)
    if explicit:
        names = list(dict.fromkeys(explicit))
        for name in names:
            if name not in member_set:
                raise PlanError(f"control-plane node {name} is not a registered node")
        if len(names) not in REPLICAS:
            raise PlanError(
                f"a control plane has 1, 3 or 5 nodes (etcd needs a majority); {len(names)} were named"
            )
        return tuple(names)
    if replicas not in REPLICAS:
        raise PlanError(f"--replicas must be 1, 3 or 5, not {replicas}")
    ordered = list(sort_nodes(members))
    first: list[str] = []
    if conf_node:
        if conf_node not in member_set:
            raise PlanError(f"control-plane node {conf_node} is not among the selected cluster nodes")
        first = [conf_node]
    rest = [n for n in ordered if n not in first]
    if replicas > len(members):
        raise PlanError(f"--replicas {replicas} needs at least {replicas} cluster nodes; there are {len(members)}")
    return tuple(first + rest)[:replicas]


def assign_roles(members: Sequence[str], control_planes: Sequence[str]) -> dict[str, str]:
    if len(members) == 1 and len(control_planes) == 1:
        return {members[0]: "single"}
    cps = set(control_planes)
    return {n: ("controller" if n in cps else "worker") for n in members}


def carve_pod_cidrs(pod_cidr: str, nodes: Sequence[str], existing: Mapping[str, str]) -> dict[str, str]:
    """A /24 of ``pod_cidr`` per node: existing assignments kept, new nodes get the lowest free ones
    in name order. Raises PlanError when ``pod_cidr`` has no /24 left."""
    net = ipaddress.ip_network(pod_cidr)
    prefix = max(24, net.prefixlen) if net.version == 4 else max(64, net.prefixlen)
    out = {n: existing[n] for n in nodes if n in existing}
    used = set(out.values())
    free = (str(s) for s in net.subnets(new_prefix=prefix) if str(s) not in used)
    for name in sort_nodes(n for n in nodes if n not in out):
        try:
            out[name] = next(free)
        except StopIteration:
            raise PlanError(f"pod_cidr {pod_cidr} has no free /{prefix} left for node {name}") from None
    return out


def plan_up(
    scope: ScopeRequest,
    inv: Inventory,
    *,
    explicit_control_planes: Sequence[str] = (),
    replicas: int = 0,
    conf_node: str | None = None,
    conf_replicas: int = 1,
    pod_cidr: str = "10.42.0.0/16",
) -> Plan:
    """The plan of ``spur k8s up``. ``replicas`` 0 = use ``conf_replicas``."""
    if scope.empty:
        members = sort_nodes(inv.nodes)
        if not members:
            raise PlanError("no node is registered yet; start spurd on the nodes first")
    else:
        members = resolve_scope(scope, inv)
    control_planes = choose_control_planes(
        members, explicit=explicit_control_planes, conf_node=conf_node, replicas=replicas or conf_replicas
    )
    return Plan(
        scoped=not scope.empty,
        members=members,
        control_planes=control_planes,
        roles=assign_roles(members, control_planes),
        pod_cidrs=carve_pod_cidrs(pod_cidr, members, {}),
    )


def check_removal(nodes: Sequence[str], *, scoped: bool, roles: Mapping[str, str]) -> None:
    """Refusals of ``remove-nodes``: any node of a whole-inventory cluster (it would be enrolled again
    on the next reconcile), a node outside a scoped cluster, a control plane, the last worker."""
    if not nodes:
        raise PlanError("name the nodes to remove with --nodes")
    for name in nodes:
        if not scoped:
            raise PlanError(
                f"node {name} is not in a scoped cluster: this cluster spans the whole inventory and would "
                "enroll it again (bring it up scoped with --nodes/--partition/--selector to shrink it)"
            )
        if name not in roles:
            raise PlanError(f"node {name} is not in the cluster (outside its scope)")
        if roles[name] in ("single", "controller"):
            raise PlanError(f"node {name} is a control-plane node; remove-nodes removes workers only")
    workers = {n for n, r in roles.items() if r == "worker"}
    if workers <= set(nodes):
        raise PlanError("refusing to remove the last remaining worker (it would empty the member set)")
