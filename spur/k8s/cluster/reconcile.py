"""The k8s reconcile decision: cluster record + registered nodes + time -> actions. Pure.

Order of bring-up: the first control plane (the etcd bootstrap) first; once it runs, the other
control planes join with a controller token minted on a running control plane; once any control
plane runs, workers join with worker tokens. While provisioning or ready, a node is started whenever
the starter's rules say so (:func:`spur.k8s.cluster.starter.start_due`: its k0s is not running, no
start is in flight, any wait after failures is over), except nodes being removed and nodes whose Spur
node is down or unknown (``unavailable``); what its agent reports is recorded by the task. The other
control planes need a running control plane to mint their token (while provisioning: the first one),
workers any running control plane. While provisioning, a cluster whose nodes are all
``active`` becomes ``ready``; one that still has a non-active node ``k8s_provisioning_timeout_secs``
after provisioning began becomes ``degraded`` with a reason per such node. A degraded cluster is left
alone (recovery is ``spur k8s down`` then ``spur k8s up``). After ``down``, every node in
``teardown`` is stopped (``reset``: also ``k0s reset``). A whole-inventory cluster enrolls newly
registered nodes as workers.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from spur.k8s.cluster.starter import IDLE, StartState, start_due
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


def decide(
    rec: K8sClusterRecord,
    registered: Iterable[str],
    now: float,
    timeout: float,
    starts: Mapping[str, StartState] | None = None,
    unavailable: Collection[str] = (),
) -> list[Action]:
    """The actions that move the cluster toward its record (see the module docstring). ``starts``:
    the leader's per-node start state (none: every node idle)."""
    if rec.phase == DOWN:
        return [TeardownNode(n, rec.reset) for n in sorted(rec.teardown)]
    actions: list[Action] = []
    if not rec.scoped and rec.phase in (PROVISIONING, READY):
        new = sorted(set(registered) - set(rec.nodes))
        if new:
            actions.append(EnrollNodes(tuple(new)))
    if rec.phase == DEGRADED:
        return actions
    if rec.phase == PROVISIONING:
        waiting = {n: node for n, node in rec.nodes.items() if node.component_state != "active" and not node.removing}
        if rec.nodes and not waiting:
            return [*actions, SetPhase(READY)]
        if now - rec.phase_since >= timeout:  # degraded from now on: nothing more is started
            reasons = {
                n: node.reason or f"k0s is {node.component_state} after {timeout:g}s of provisioning"
                for n, node in sorted(waiting.items())
            }
            return [*actions, SetPhase(DEGRADED, reasons)]
    starts = starts or {}
    state = {n: node.component_state for n, node in rec.nodes.items()}

    def due(name: str) -> bool:
        if name in unavailable or rec.nodes[name].removing:
            return False
        return start_due(starts.get(name, IDLE), state[name], now)

    cps = [cp for cp in rec.control_planes if cp in rec.nodes]
    any_cp_active = any(state[cp] == "active" for cp in cps)
    token_source = any_cp_active if rec.phase == READY else bool(cps) and state[cps[0]] == "active"
    for i, cp in enumerate(cps):
        if not due(cp):
            continue
        if i == 0:
            actions.append(ApplyNode(cp, rec.nodes[cp].role, None))
        elif token_source:
            actions.append(ApplyNode(cp, "controller", "controller"))
    if any_cp_active:
        for name, node in sorted(rec.nodes.items()):
            if node.role == "worker" and due(name):
                actions.append(ApplyNode(name, "worker", "worker"))
    return actions
