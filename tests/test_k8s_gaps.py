"""Managed-k0s gaps, pure parts: the node features spurd registers (``--features`` / ``[[nodes]]``),
the pod /24s the mesh carries for the cluster, and the reconcile task attaching and clearing them
(driven by Trio's MockClock)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import trio
import trio.testing

from spur.agent.features import FeatureError, node_features, parse_features
from spur.config.model import ClusterConfig, NodeConfig
from spur.core.job import Node
from spur.k8s.cluster.planner import Inventory, ScopeRequest, plan_up
from spur.k8s.cluster.pod_routes import pod_cidr_changes, wanted_pod_cidrs
from spur.k8s.cluster.task import K8sReconciler
from spur.net.model import allowed_ips
from spur.rpc.proto import k0s_pb2
from spur.state import commands as c
from spur.state import k8s_cluster as k
from spur.state.machine import ClusterState
from spur.state.mesh import JoinMesh, SetMeshPodCidr

# ---------------------------------------------------------------------------- features


def test_features_flag_splits_trims_and_dedups():
    assert parse_features(["ib, zone=z1", "gpu=mi300,ib"]) == ["ib", "zone=z1", "gpu=mi300"]


@pytest.mark.parametrize("bad", ["a,,b", "has space", "x[1]", ""])
def test_bad_feature_names_are_one_clear_error(bad):
    with pytest.raises(FeatureError, match="feature"):
        parse_features([bad])


def test_features_come_from_the_flag_else_the_matching_nodes_entry():
    entries = [NodeConfig("gpu[01-02]", features=("zone=z1", "gpu=mi300")), NodeConfig("cpu1", features=("ib",))]
    assert node_features(None, entries, "gpu02") == ["zone=z1", "gpu=mi300"]
    assert node_features(None, entries, "cpu1") == ["ib"]
    assert node_features(None, entries, "other") == []
    assert node_features(["zone=z9"], entries, "gpu01") == ["zone=z9"]


def test_spurd_reads_features_from_its_flag_and_from_spur_conf(tmp_path: Path):
    from spur.agent.main import UsageError, parse_args

    conf = tmp_path / "spur.conf"
    conf.write_text('[[nodes]]\nname = "n[1-3]"\nfeatures = ["zone=z1", "ib"]\n')
    base = ["--controller", "127.0.0.1:1", "--state-dir", str(tmp_path), "-f", str(conf)]
    assert parse_args([*base, "--name", "n2"]).features == ["zone=z1", "ib"]
    assert parse_args([*base, "--name", "n9"]).features == []
    assert parse_args([*base, "--name", "n2", "--features", "zone=z2"]).features == ["zone=z2"]
    with pytest.raises(UsageError, match="empty feature name"):
        parse_args([*base, "--name", "n2", "--features", "a,,b"])


# ---------------------------------------------------------------------------- pod /24s on the mesh


def test_wanted_pod_cidrs_are_the_record_s_unless_down():
    nodes = {"a": "10.42.0.0/24", "b": "10.42.1.0/24", "c": ""}
    assert wanted_pod_cidrs("provisioning", nodes) == {"a": "10.42.0.0/24", "b": "10.42.1.0/24"}
    assert wanted_pod_cidrs("down", nodes) == {}


def test_changes_set_missing_clear_departed_and_leave_foreign_cidrs_alone():
    wanted = {"a": "10.42.0.0/24", "b": "10.42.1.0/24", "nomesh": "10.42.2.0/24"}
    meshed = {"a": "", "b": "10.42.1.0/24", "gone": "10.42.3.0/24", "admin": "172.20.0.0/24"}
    assert pod_cidr_changes(wanted, meshed, "10.42.0.0/16") == [("a", "10.42.0.0/24"), ("gone", "")]
    assert pod_cidr_changes({}, {"x": "10.42.5.0/24"}, "10.42.0.0/16") == [("x", "")]


def _key(n: int) -> str:
    return base64.b64encode(bytes([n]) * 32).decode()


class _Agents:
    """The K0sAgent edge: every node's k0s comes up at once."""

    async def __call__(self, node, method, request, timeout):
        if method == "CreateToken":
            return k0s_pb2.K0sTokenResponse(token="t")
        return k0s_pb2.K0sStatus(component_state="active", unit_present=True)


def _apply(state: ClusterState, cmd):
    return state.apply(state.applied_index + 1, c.encode(cmd))


async def test_reconcile_routes_pod_cidrs_over_the_mesh_and_clears_them(autojump_clock: trio.testing.MockClock):
    state = ClusterState()
    names = ("cp", "w1", "w2")
    for i, name in enumerate(names, 1):
        state.nodes[name] = Node(name=name, address=f"192.0.2.{i}")
        _apply(state, JoinMesh(name, "10.44.0.0/24", _key(i), f"192.0.2.{i}:51820", 0.0))
    _apply(state, SetMeshPodCidr("w2", "172.20.0.0/24"))  # set by an admin, not the cluster's
    plan = plan_up(ScopeRequest(nodes="cp,w1"), Inventory(nodes=names))
    _apply(state, k.K8sUp(plan.scoped, list(plan.members), list(plan.control_planes), plan.roles,
                          plan.pod_cidrs, {}, 0.0))
    woken: list[float] = []

    async def propose(cmd):
        return _apply(state, cmd)

    rec = K8sReconciler(state=state, propose=propose, call_agent=_Agents(),
                        cluster_cfg=ClusterConfig(enabled=True, cni="calico"), wg_enabled=True,
                        now=trio.current_time, interval=2.0, on_mesh_change=lambda: woken.append(trio.current_time()))

    def peers() -> dict[str, tuple[str, ...]]:
        return {m.node: allowed_ips(m) for m in state.domains["mesh"].members()}

    async with trio.open_nursery() as nursery:
        await nursery.start(rec.run)
        await trio.sleep(5)
        assert peers() == {
            "cp": ("10.44.0.1/32", "10.42.0.0/24"),
            "w1": ("10.44.0.2/32", "10.42.1.0/24"),
            "w2": ("10.44.0.3/32", "172.20.0.0/24"),
        }
        assert woken, "the mesh reconcile is woken when the pod CIDRs change"
        _apply(state, k.K8sForgetNode("w1", True, trio.current_time()))
        await trio.sleep(5)
        assert peers()["w1"] == ("10.44.0.2/32",)
        _apply(state, k.K8sDown(False, trio.current_time()))
        await trio.sleep(5)
        assert peers() == {
            "cp": ("10.44.0.1/32",),
            "w1": ("10.44.0.2/32",),
            "w2": ("10.44.0.3/32", "172.20.0.0/24"),
        }
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(("wg_enabled", "cni"), [(False, "calico"), (True, "kuberouter")])
async def test_pod_cidrs_stay_off_the_mesh_unless_calico_runs_over_it(
    autojump_clock: trio.testing.MockClock, wg_enabled: bool, cni: str
):
    """No mesh, or kube-router (which carries pod traffic in its own IPIP tunnel): no /24 on spur0."""
    state = ClusterState()
    state.nodes["solo"] = Node(name="solo", address="192.0.2.1")
    _apply(state, JoinMesh("solo", "10.44.0.0/24", _key(1), "192.0.2.1:51820", 0.0))
    plan = plan_up(ScopeRequest(), Inventory(nodes=("solo",)))
    _apply(state, k.K8sUp(plan.scoped, list(plan.members), list(plan.control_planes), plan.roles,
                          plan.pod_cidrs, {}, 0.0))

    async def propose(cmd):
        return _apply(state, cmd)

    rec = K8sReconciler(state=state, propose=propose, call_agent=_Agents(),
                        cluster_cfg=ClusterConfig(enabled=True, cni=cni), wg_enabled=wg_enabled,
                        now=trio.current_time)
    async with trio.open_nursery() as nursery:
        await nursery.start(rec.run)
        await trio.sleep(5)
        nursery.cancel_scope.cancel()
    assert state.domains["mesh"].entry("solo").pod_cidr == ""


# ---------------------------------------------------------------------------- GPU extended resources


def test_extended_resources_count_gpus_per_vendor():
    from spur.k8s.cluster.gpu_resources import extended_resources, status_patch

    assert extended_resources(["amd", "amd", "nvidia", "intel"]) == {"amd.com/gpu": "2", "nvidia.com/gpu": "1"}
    assert extended_resources([]) == {}
    assert status_patch({"amd.com/gpu": "8"}) == {
        "status": {"capacity": {"amd.com/gpu": "8"}, "allocatable": {"amd.com/gpu": "8"}}}


def test_only_active_workload_nodes_with_gpus_not_yet_advertised():
    from spur.k8s.cluster.gpu_resources import to_advertise

    nodes = {"cp": ("controller", "active"), "w1": ("worker", "active"), "w2": ("worker", "activating"),
             "w3": ("worker", "active"), "solo": ("single", "active")}
    vendors = {"cp": ["amd"], "w1": ["amd", "amd"], "w2": ["nvidia"], "w3": [], "solo": ["nvidia"]}
    assert to_advertise("ready", nodes, vendors, {}) == {
        "solo": {"nvidia.com/gpu": "1"}, "w1": {"amd.com/gpu": "2"}}
    assert to_advertise("ready", nodes, vendors, {"w1": {"amd.com/gpu": "2"}}) == {"solo": {"nvidia.com/gpu": "1"}}
    assert to_advertise("ready", nodes, vendors, {"w1": {"amd.com/gpu": "1"}})["w1"] == {"amd.com/gpu": "2"}
    assert to_advertise("down", nodes, vendors, {}) == {}


# ---------------------------------------------------------------------------- spur node (no controller needed)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "Usage: spur node drain NODES"),
        (["bogus"], "unknown command 'bogus' (commands: drain, resume, remove)"),
        (["drain"], "the following arguments are required: NODES"),
        (["drain", "n1", "--reason", " "], "--reason must not be empty"),
        (["resume", "n[1-"], "spur node resume: error:"),
        (["remove", "n1", "n2"], "unrecognized arguments: n2"),
    ],
)
def test_spur_node_usage_errors_exit_2_before_calling_anyone(argv, message, capsys, monkeypatch):
    from spur.cli import node

    monkeypatch.setenv("SPUR_CONTROLLER", "127.0.0.1:1")  # nothing listens there: nothing may be sent
    assert node.main(argv) == 2
    assert message in capsys.readouterr().err
