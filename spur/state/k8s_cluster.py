"""State domain ``k8s_cluster``: the record of the Spur-managed k0s cluster.

One cluster: its phase (``down`` -> ``provisioning`` -> ``ready`` | ``degraded``), control-plane
nodes (first = etcd bootstrap), whether it is scoped (then ``members`` is frozen; otherwise every
registered node belongs), the reset flag of the last ``down``, and per node its role (single |
controller | worker), mesh IP, pod /24, the last component state reported by its agent, and the last
error. Nodes still to be stopped after a ``down`` are kept in ``teardown`` (node -> role) until the
leader has stopped (or reset) them.

Every command carries a leader-stamped ``time``. Plans are computed by the leader
(:mod:`spur.k8s.cluster.planner`); apply only checks what must hold at apply time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spur.core.serde import from_plain, to_plain
from spur.state.domain import Rejected, StateDomain, StateQueries

__all__ = [
    "K8sAddNodes",
    "K8sClusterDomain",
    "K8sClusterRecord",
    "K8sDown",
    "K8sForgetNode",
    "K8sNode",
    "K8sNodeReport",
    "K8sSetPhase",
    "K8sTornDown",
    "K8sUp",
]

DOWN, PROVISIONING, READY, DEGRADED = "down", "provisioning", "ready", "degraded"


@dataclass
class K8sNode:
    role: str
    pod_cidr: str = ""
    mesh_ip: str = ""
    component_state: str = "pending"  # pending (never applied) | absent | activating | starting | active | failed ...
    reason: str = ""
    since: float = 0.0  # when component_state last changed
    removing: bool = False  # remove-nodes is draining/resetting it


@dataclass
class K8sClusterRecord:
    phase: str = DOWN
    phase_since: float = 0.0
    control_planes: list[str] = field(default_factory=list)
    scoped: bool = False
    members: list[str] = field(default_factory=list)  # frozen member set of a scoped cluster
    reset: bool = False
    nodes: dict[str, K8sNode] = field(default_factory=dict)
    teardown: dict[str, str] = field(default_factory=dict)  # node -> role still to stop after down


@dataclass
class K8sUp:
    """Start provisioning with the leader's plan. A cluster that is not down is left as it is
    (``up`` is idempotent); the result says which."""

    scoped: bool
    members: list[str]
    control_planes: list[str]
    roles: dict[str, str]
    pod_cidrs: dict[str, str]
    mesh_ips: dict[str, str]
    time: float


@dataclass
class K8sAddNodes:
    """Union ``roles`` (workers) into a scoped cluster; nodes already in it are skipped."""

    roles: dict[str, str]
    pod_cidrs: dict[str, str]
    mesh_ips: dict[str, str]
    time: float
    enroll: bool = False  # the leader enrolling newly registered nodes of a whole-inventory cluster


@dataclass
class K8sNodeReport:
    """What a node's agent reported (or why it could not be asked). An empty ``reason`` keeps the
    node's earlier one unless the node is now active."""

    node: str
    component_state: str
    reason: str
    time: float


@dataclass
class K8sSetPhase:
    phase: str
    reasons: dict[str, str]
    time: float


@dataclass
class K8sDown:
    reset: bool
    time: float


@dataclass
class K8sTornDown:
    node: str
    time: float


@dataclass
class K8sForgetNode:
    """remove-nodes: mark a worker as being removed (``removing``) or forget it (``forget``)."""

    node: str
    forget: bool
    time: float


class K8sClusterDomain(StateDomain):
    name = "k8s_cluster"
    commands = (K8sUp, K8sAddNodes, K8sNodeReport, K8sSetPhase, K8sDown, K8sTornDown, K8sForgetNode)

    def __init__(self, state: StateQueries) -> None:
        super().__init__(state)
        self.record = K8sClusterRecord()

    def snapshot(self) -> Any:
        return to_plain(self.record)

    def restore(self, body: Any | None) -> None:
        self.record = from_plain(K8sClusterRecord, body) if body else K8sClusterRecord()

    # ------------------------------------------------------------------ commands

    def _set_phase(self, phase: str, time: float) -> None:
        if self.record.phase != phase:
            self.record.phase = phase
            self.record.phase_since = time

    def _apply_K8sUp(self, cmd: K8sUp) -> Any:
        rec = self.record
        if rec.phase != DOWN:
            return {"started": False, "phase": rec.phase}
        if rec.teardown:
            return Rejected(
                "FAILED_PRECONDITION",
                f"the last spur k8s down is still stopping k0s on {', '.join(sorted(rec.teardown))}; retry shortly",
            )
        if not cmd.control_planes or any(cp not in cmd.roles for cp in cmd.control_planes):
            return Rejected("INVALID_ARGUMENT", "the plan's control planes must be cluster nodes")
        self.record = K8sClusterRecord(
            phase=PROVISIONING,
            phase_since=cmd.time,
            control_planes=list(cmd.control_planes),
            scoped=cmd.scoped,
            members=sorted(cmd.members) if cmd.scoped else [],
            reset=False,
            nodes={
                n: K8sNode(role=r, pod_cidr=cmd.pod_cidrs.get(n, ""), mesh_ip=cmd.mesh_ips.get(n, ""), since=cmd.time)
                for n, r in cmd.roles.items()
            },
        )
        return {"started": True, "phase": PROVISIONING}

    def _apply_K8sAddNodes(self, cmd: K8sAddNodes) -> Any:
        rec = self.record
        if rec.phase == DOWN:
            return Rejected("FAILED_PRECONDITION", "the cluster is down; bring it up with spur k8s up first")
        if not rec.scoped and not cmd.enroll:
            return Rejected(
                "FAILED_PRECONDITION",
                "this cluster spans the whole inventory: every registered node joins it by itself",
            )
        added = []
        for name, role in sorted(cmd.roles.items()):
            if name in rec.nodes:
                continue
            rec.nodes[name] = K8sNode(
                role=role, pod_cidr=cmd.pod_cidrs.get(name, ""), mesh_ip=cmd.mesh_ips.get(name, ""), since=cmd.time
            )
            if rec.scoped:
                rec.members = sorted(set(rec.members) | {name})
            added.append(name)
        return {"added": added}

    def _apply_K8sNodeReport(self, cmd: K8sNodeReport) -> Any:
        node = self.record.nodes.get(cmd.node)
        if node is None:
            return None
        if node.component_state != cmd.component_state:
            node.since = cmd.time
        node.component_state = cmd.component_state
        if cmd.reason:
            node.reason = cmd.reason
        elif cmd.component_state == "active":
            node.reason = ""  # an earlier reason (e.g. the degraded one) stays until the node runs
        return None

    def _apply_K8sSetPhase(self, cmd: K8sSetPhase) -> Any:
        if cmd.phase not in (PROVISIONING, READY, DEGRADED):
            return Rejected("INVALID_ARGUMENT", f"unknown cluster phase {cmd.phase!r}")
        if self.record.phase == DOWN:
            return Rejected("FAILED_PRECONDITION", "the cluster is down")
        self._set_phase(cmd.phase, cmd.time)
        for name, reason in cmd.reasons.items():
            if name in self.record.nodes:
                self.record.nodes[name].reason = reason
        return None

    def _apply_K8sDown(self, cmd: K8sDown) -> Any:
        rec = self.record
        teardown = dict(rec.teardown)
        teardown.update({n: node.role for n, node in rec.nodes.items()})
        was = rec.phase
        self.record = K8sClusterRecord(phase=DOWN, phase_since=cmd.time, reset=cmd.reset, teardown=teardown)
        return {"was": was, "nodes": sorted(teardown)}

    def _apply_K8sTornDown(self, cmd: K8sTornDown) -> Any:
        self.record.teardown.pop(cmd.node, None)
        return None

    def _apply_K8sForgetNode(self, cmd: K8sForgetNode) -> Any:
        rec = self.record
        node = rec.nodes.get(cmd.node)
        if node is None:
            return Rejected("NOT_FOUND", f"node {cmd.node} is not in the cluster")
        if cmd.forget:
            del rec.nodes[cmd.node]
            rec.members = [m for m in rec.members if m != cmd.node]
        else:
            node.removing = True
        return None
