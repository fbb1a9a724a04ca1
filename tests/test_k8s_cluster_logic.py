"""The k8s cluster's pure parts: planning, the replicated record, the reconcile decision, and the
reconcile task driven by Trio's MockClock (provisioning timeout -> degraded)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from spur.config.model import ClusterConfig
from spur.core.job import Node
from spur.k8s.cluster import reconcile as r
from spur.k8s.cluster.planner import (
    Inventory,
    PlanError,
    ScopeRequest,
    carve_pod_cidrs,
    check_removal,
    plan_up,
)
from spur.k8s.cluster.task import K8sReconciler
from spur.rpc.proto import k0s_pb2
from spur.state import commands as c
from spur.state import k8s_cluster as k
from spur.state.machine import ClusterState, Rejected

FIVE = Inventory(
    nodes=("node1", "node2", "node3", "node10", "node4"),
    partitions={"batch": ("node1", "node2"), "gpu": ("node10",)},
    features={"node3": ("zone=z1", "gpu=mi300"), "node4": ("zone=z1",), "node10": ("zone=z2",)},
)


# ---------------------------------------------------------------------------- planner


def test_whole_inventory_single_and_multi():
    one = plan_up(ScopeRequest(), Inventory(nodes=("solo",)))
    assert one.roles == {"solo": "single"} and one.control_planes == ("solo",) and not one.scoped
    three = plan_up(ScopeRequest(), Inventory(nodes=("c", "a", "b")))
    assert three.control_planes == ("a",)
    assert three.roles == {"a": "controller", "b": "worker", "c": "worker"}
    assert three.pod_cidrs == {"a": "10.42.0.0/24", "b": "10.42.1.0/24", "c": "10.42.2.0/24"}


def test_replicas_pick_the_lowest_named_nodes():
    plan = plan_up(ScopeRequest(), FIVE, replicas=3)
    assert plan.control_planes == ("node1", "node2", "node3")
    assert [plan.roles[n] for n in ("node4", "node10")] == ["worker", "worker"]


def test_explicit_control_planes_win_over_replicas():
    plan = plan_up(ScopeRequest(), FIVE, explicit_control_planes=("node10", "node4", "node3"), replicas=5)
    assert plan.control_planes == ("node10", "node4", "node3")


def test_scope_is_the_union_resolved_once():
    plan = plan_up(ScopeRequest(nodes="node[1-2]", partition="gpu", selectors=("zone=z1", "gpu=mi300")), FIVE)
    assert plan.scoped and plan.members == ("node1", "node2", "node3", "node10")
    sel = plan_up(ScopeRequest(selectors=("zone=z1",)), FIVE)
    assert sel.members == ("node3", "node4")


def test_the_two_error_texts_exactly():
    with pytest.raises(PlanError) as err:
        plan_up(ScopeRequest(partition="batch"), FIVE, explicit_control_planes=("node4",))
    assert str(err.value) == "control-plane node node4 is not a registered node"
    with pytest.raises(PlanError) as err:
        plan_up(ScopeRequest(partition="batch"), FIVE, conf_node="node4")
    assert str(err.value) == "control-plane node node4 is not among the selected cluster nodes"
    with pytest.raises(PlanError) as err:
        plan_up(ScopeRequest(), FIVE, explicit_control_planes=("ghost",))
    assert str(err.value) == "control-plane node ghost is not a registered node"
    # whole inventory: any registered node is a valid control plane
    assert plan_up(ScopeRequest(), FIVE, conf_node="node4").control_planes == ("node4",)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"replicas": 2}, "--replicas must be 1, 3 or 5, not 2"),
        ({"replicas": 7}, "--replicas must be 1, 3 or 5, not 7"),
        ({"explicit_control_planes": ("node1", "node2")}, "a control plane has 1, 3 or 5 nodes"),
    ],
)
def test_control_plane_counts(kwargs, message):
    with pytest.raises(PlanError, match=message):
        plan_up(ScopeRequest(), FIVE, **kwargs)
    with pytest.raises(PlanError, match="--replicas 5 needs at least 5 cluster nodes; there are 2"):
        plan_up(ScopeRequest(partition="batch"), FIVE, replicas=5)


def test_scope_errors():
    with pytest.raises(PlanError, match="partition 'nope' does not exist"):
        plan_up(ScopeRequest(partition="nope"), FIVE)
    with pytest.raises(PlanError, match="not registered: ghost1"):
        plan_up(ScopeRequest(nodes="ghost1,node1"), FIVE)
    with pytest.raises(PlanError, match="selects no registered node"):
        plan_up(ScopeRequest(selectors=("zone=z9",)), FIVE)
    with pytest.raises(PlanError, match="invalid --selector 'zone'"):
        plan_up(ScopeRequest(selectors=("zone",)), FIVE)


def test_pod_cidrs_are_stable_and_bounded():
    assert carve_pod_cidrs("10.42.0.0/16", ["a", "b", "c"], {"b": "10.42.0.0/24"}) == {
        "b": "10.42.0.0/24", "a": "10.42.1.0/24", "c": "10.42.2.0/24"}
    with pytest.raises(PlanError, match="no free /24"):
        carve_pod_cidrs("10.42.0.0/24", ["a", "b"], {})


def test_removal_refusals():
    roles = {"cp": "controller", "w1": "worker", "w2": "worker"}
    check_removal(["w1"], scoped=True, roles=roles)
    with pytest.raises(PlanError, match="node cp is a control-plane node"):
        check_removal(["cp"], scoped=True, roles=roles)
    with pytest.raises(PlanError, match="last remaining worker"):
        check_removal(["w1", "w2"], scoped=True, roles=roles)
    with pytest.raises(PlanError, match="node x is not in the cluster"):
        check_removal(["x"], scoped=True, roles=roles)
    with pytest.raises(PlanError, match="node w1 is not in a scoped cluster"):
        check_removal(["w1"], scoped=False, roles=roles)


# ---------------------------------------------------------------------------- record + decision


def apply(state: ClusterState, cmd):
    """Through the log codec, as Raft delivers it."""
    return state.apply(state.applied_index + 1, c.encode(cmd))


def up(state: ClusterState, plan, t: float = 100.0):
    return apply(state, k.K8sUp(plan.scoped, list(plan.members), list(plan.control_planes), plan.roles,
                               plan.pod_cidrs, {}, t))


def record(state: ClusterState) -> k.K8sClusterRecord:
    return state.domains["k8s_cluster"].record


def test_up_is_idempotent_and_down_tears_down():
    s = ClusterState()
    plan = plan_up(ScopeRequest(), Inventory(nodes=("a", "b", "c")))
    assert up(s, plan) == {"started": True, "phase": "provisioning"}
    assert up(s, plan) == {"started": False, "phase": "provisioning"}
    assert apply(s, k.K8sDown(reset=True, time=200.0)) == {"was": "provisioning", "nodes": ["a", "b", "c"]}
    rec = record(s)
    assert rec.phase == "down" and rec.reset and rec.teardown == {"a": "controller", "b": "worker", "c": "worker"}
    assert r.decide(rec, ["a", "b", "c"], 201.0, 600) == [r.TeardownNode(n, True) for n in "abc"]
    assert isinstance(up(s, plan), Rejected), "up waits for the teardown"
    for n in "abc":
        apply(s, k.K8sTornDown(n, 202.0))
    assert up(s, plan)["started"]
    # snapshot round trip
    s2 = ClusterState()
    s2.restore(s.snapshot())
    assert record(s2) == record(s)


def test_bring_up_order_and_phases():
    s = ClusterState()
    up(s, plan_up(ScopeRequest(), FIVE, replicas=3), t=0.0)
    rec = record(s)
    assert r.decide(rec, FIVE.nodes, 1.0, 600) == [r.ApplyNode("node1", "controller", None)]
    apply(s, k.K8sNodeReport("node1", "activating", "", 2.0))
    assert r.decide(rec, FIVE.nodes, 3.0, 600) == []
    apply(s, k.K8sNodeReport("node1", "active", "", 4.0))
    assert r.decide(rec, FIVE.nodes, 5.0, 600) == [
        r.ApplyNode("node2", "controller", "controller"),
        r.ApplyNode("node3", "controller", "controller"),
        r.ApplyNode("node10", "worker", "worker"),
        r.ApplyNode("node4", "worker", "worker"),
    ]
    for n in FIVE.nodes:
        apply(s, k.K8sNodeReport(n, "active", "", 6.0))
    assert r.decide(rec, FIVE.nodes, 7.0, 600) == [r.SetPhase("ready")]


def test_timeout_degrades_with_per_node_reasons_and_enrollment():
    s = ClusterState()
    up(s, plan_up(ScopeRequest(), Inventory(nodes=("a", "b"))), t=0.0)
    apply(s, k.K8sNodeReport("a", "active", "", 1.0))
    apply(s, k.K8sNodeReport("b", "failed", "k0s unit failed (exit-code)", 2.0))
    rec = record(s)
    assert r.decide(rec, ["a", "b", "new"], 599.0, 600) == [r.EnrollNodes(("new",))]
    assert r.decide(rec, ["a", "b"], 600.0, 600) == [
        r.SetPhase("degraded", {"b": "k0s unit failed (exit-code)"})]


# ---------------------------------------------------------------------------- the task on MockClock


class Agents:
    """The K0sAgent edge: every node's k0s stays 'activating' except those in ``comes_up``."""

    def __init__(self, comes_up: set[str]) -> None:
        self.comes_up = comes_up
        self.calls: list[tuple[str, str]] = []

    async def __call__(self, node, method, request, timeout):
        self.calls.append((node, method))
        if method == "CreateToken":
            return k0s_pb2.K0sTokenResponse(token="secret-token")
        state = "active" if node in self.comes_up else "activating"
        return k0s_pb2.K0sStatus(component_state=state, unit_present=True)


async def _run_reconciler(comes_up: set[str], until: float) -> tuple[ClusterState, Agents]:
    state = ClusterState()
    for name in ("cp", "w1", "w2"):
        state.nodes[name] = Node(name=name, address="127.0.0.1")
    up(state, plan_up(ScopeRequest(), Inventory(nodes=("cp", "w1", "w2"))), t=trio.current_time())

    async def propose(cmd):
        return apply(state, cmd)

    agents = Agents(comes_up)
    rec = K8sReconciler(state=state, propose=propose, call_agent=agents,
                        cluster_cfg=ClusterConfig(enabled=True, k8s_provisioning_timeout_secs=600),
                        now=trio.current_time, interval=2.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(rec.run)
        await trio.sleep(until)
        nursery.cancel_scope.cancel()
    return state, agents


async def test_provisioning_timeout_marks_degraded_on_mockclock(autojump_clock: trio.testing.MockClock):
    state, agents = await _run_reconciler({"cp", "w1"}, until=599.0)
    assert record(state).phase == "provisioning"
    state, agents = await _run_reconciler({"cp", "w1"}, until=605.0)
    rec = record(state)
    assert rec.phase == "degraded"
    assert rec.nodes["w2"].reason == "k0s is activating after 600s of provisioning"
    assert rec.nodes["cp"].reason == "" and rec.nodes["cp"].component_state == "active"
    # control plane first, then tokens minted on it, then the workers
    applies = [c for c in agents.calls if c[1] in ("Apply", "CreateToken")]
    assert applies[0] == ("cp", "Apply") and ("cp", "CreateToken") in applies


async def test_ready_when_every_node_runs(autojump_clock: trio.testing.MockClock):
    state, _ = await _run_reconciler({"cp", "w1", "w2"}, until=30.0)
    assert record(state).phase == "ready"



# ---------------------------------------------------------------------------- metrics


def test_k8s_metrics_exposition():
    from prometheus_client import CollectorRegistry, generate_latest

    from spur.metrics.k8s import K8sMetrics

    s = ClusterState()
    registry = CollectorRegistry(auto_describe=False)
    m = K8sMetrics(registry, lambda: s)
    up(s, plan_up(ScopeRequest(), Inventory(nodes=("a", "b"))), t=0.0)
    apply(s, k.K8sNodeReport("a", "active", "", 1.0))
    m.k8s_attempt("controller")
    m.k8s_failure("worker")
    m.observe_k8s_reconcile(0.02)
    text = generate_latest(registry).decode()
    assert 'spur_k8s_cluster_phase{phase="provisioning"} 1.0' in text
    assert 'spur_k8s_cluster_phase{phase="ready"} 0.0' in text
    assert 'spur_k8s_nodes{role="controller",state="active"} 1.0' in text
    assert 'spur_k8s_nodes{role="worker",state="pending"} 1.0' in text
    assert 'spur_k8s_provisioning_attempts_total{role="controller"} 1.0' in text
    assert 'spur_k8s_provisioning_failures_total{role="worker"} 1.0' in text
    assert "spur_k8s_reconcile_duration_seconds_count 1.0" in text
    assert 'spur_k8s_cluster_phase{phase="provisioning"} 1.0' in text
    assert 'spur_k8s_cluster_phase{phase="ready"} 0.0' in text
    assert 'spur_k8s_nodes{role="controller",state="active"} 1.0' in text
    assert 'spur_k8s_nodes{role="worker",state="pending"} 1.0' in text
    assert 'spur_k8s_provisioning_attempts_total{role="controller"} 1.0' in text
    assert 'spur_k8s_provisioning_failures_total{role="worker"} 1.0' in text
    assert "spur_k8s_reconcile_duration_seconds_count 1.0" in text


class _Discovery:
    """A KubeClient that serves /apis/policy/v1 or not (Kubernetes 1.22+ or older)."""

    def __init__(self, has_v1: bool) -> None:
        self.has_v1 = has_v1
        self.calls: list[tuple[str, str]] = []

    def request(self, method: str, path: str, body=None, content_type: str = "application/json"):
        from spur.k8s.cluster.kubeclient import KubeError

        self.calls.append((method, path))
        if path == "/apis/policy/v1" and not self.has_v1:
            raise KubeError(f"{method} {path}: 404 the server could not find the requested resource", 404)
        return {}


def test_the_drain_evicts_with_the_policy_version_the_server_has() -> None:
    from spur.k8s.cluster.removal import eviction_version

    assert eviction_version(_Discovery(has_v1=True)) == "policy/v1"
    old = _Discovery(has_v1=False)
    assert eviction_version(old) == "policy/v1beta1"  # 1.21 and older answer 400 to a policy/v1 Eviction
    assert old.calls == [("GET", "/apis/policy/v1")]
