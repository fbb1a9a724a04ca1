"""The k8s reconcile decision: cluster record + registered nodes + time -> actions. Pure.

Order of bring-up: the first control plane (the etcd bootstrap) first; once it runs, the other
control planes join with a controller token minted on a running control plane; once any control
plane runs, workers join with worker tokens. Each node is applied once (while ``pending``); what its
agent reports afterwards is recorded by the task. While provisioning, a cluster whose nodes are all
``active`` becomes ``ready``; one that still has a non-active node ``k8s_provisioning_timeout_secs``
after provisioning began becomes ``degraded`` with a reason per such node. A degraded cluster is left
alone (recovery is ``spur k8s down`` then ``spur k8s up``). After ``down``, every node in
``teardown`` is stopped (``reset``: also ``k0s reset``). A whole-inventory cluster enrolls newly
registered nodes as workers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from spur.state.k8s_cluster import DEGRADED, DOWN, PROVISIONING, READY, K8sClusterRecord

IN_FLIGHT = ("activating", "starting")


@dataclass(frozen=True)
class ApplyNode:
    node: str
    role: str
    token_role: str | None  # mint a join token of this role on a running control plane first


@dataclass(frozen=True)
class TeardownNode:
    node: str
    reset: bool


@dataclass(frozen=True)
class EnrollNodes:
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class SetPhase:
    phase: str
    reasons: dict[str, str] = field(default_factory=dict)


Action = ApplyNode | TeardownNode | EnrollNodes | SetPhase


def decide(rec: K8sClusterRecord, registered: Iterable[str], now: float, timeout: float) -> list[Action]:
    """The actions that move the cluster toward its record (see the module docstring)."""
    if rec.phase == DOWN:
        return [TeardownNode(n, rec.reset) for n in sorted(rec.teardown)]
    actions: list[Action] = []
    if not rec.scoped and rec.phase in (PROVISIONING, READY):
        new = sorted(set(registered) - set(rec.nodes))
        if new:
            actions.append(EnrollNodes(tuple(new)))
    if rec.phase == DEGRADED:
        return actions
    state = {n: node.component_state for n, node in rec.nodes.items()}
    cps = [cp for cp in rec.control_planes if cp in rec.nodes]
    any_cp_active = any(state[cp] == "active" for cp in cps)
    for i, cp in enumerate(cps):
        if state[cp] != "pending":
            continue
        if i == 0:
            actions.append(ApplyNode(cp, rec.nodes[cp].role, None))
        elif state[cps[0]] == "active":
            actions.append(ApplyNode(cp, "controller", "controller"))
    if any_cp_active:
        for name, node in sorted(rec.nodes.items()):
            if node.role == "worker" and node.component_state == "pending" and not node.removing:
                actions.append(ApplyNode(name, "worker", "worker"))
    if rec.phase == PROVISIONING:
        waiting = {n: node for n, node in rec.nodes.items() if node.component_state != "active" and not node.removing}
        if rec.nodes and not waiting:
            actions.append(SetPhase(READY))
        elif now - rec.phase_since >= timeout:
            reasons = {
                n: node.reason or f"k0s is {node.component_state} after {timeout:g}s of provisioning"
                for n, node in sorted(waiting.items())
            }
            actions.append(SetPhase(DEGRADED, reasons))
    return actions
