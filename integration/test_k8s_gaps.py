"""Managed k0s, end to end on loopback hosts (integration.k0s_harness): node features registered by
spurd scope ``spur k8s up --selector``; ``spur node drain|resume|remove`` act on Spur's scheduling
layer and inventory only, never on k0s."""

from __future__ import annotations

import pytest

from integration.harness import wait_for
from integration.k0s_harness import CLUSTER_ON, Env, node_line

pytestmark = pytest.mark.integration

CLUSTER_MESH = CLUSTER_ON + 'cni = "calico"\n[network]\nwg_enabled = true\nwg_cidr = "10.44.0.0/24"\n'


def _sinfo(e: Env, fmt: str) -> dict[str, str]:
    out = e.cluster.cli("sinfo", "-N", "-h", "-o", f"%N {fmt}").stdout
    return {line.split(" ", 1)[0]: line.split(" ", 1)[1].strip() for line in out.splitlines() if line.strip()}


def _k0s_enabled(e: Env, name: str) -> bool:
    h = e.hosts[name]
    return (h.unit_dir / "spur-k0s.service").exists() and "spur-k0s.service" in (
        h.systemd_root / "state/enabled.json"
    ).read_text()


def test_selector_scopes_up_and_node_verbs_leave_k0s_alone(tmp_path):
    e = Env(tmp_path)
    try:
        # features from the host's [[nodes]] entry in spur.conf, and from spurd --features
        e.host("g1", cluster_conf='[[nodes]]\nname = "g[1-2]"\nfeatures = ["zone=z1"]\n')
        e.host("g2", spurd_extra=["--features", "zone=z1,gpu=mi300"])
        e.host("g3", spurd_extra=["--features", "zone=z2"])
        e.cluster.wait_nodes("g1", "g2", "g3")
        assert _sinfo(e, "%f") == {"g1": "zone=z1", "g2": "zone=z1,gpu=mi300", "g3": "zone=z2"}
        shown = e.cluster.cli("scontrol", "show", "node", "g2").stdout
        assert "AvailableFeatures=zone=z1,gpu=mi300" in shown

        r = e.spur("k8s", "up", "--selector", "zone=z1")
        assert "phase: ready" in r.stdout
        st = e.status()
        assert "scope: scoped" in st and "control-plane: g1" in st and "g3" not in st
        assert node_line(st, "g2")[1:3] == ["worker", "active"]
        r = e.spur("k8s", "up", "--selector", "zone=z9", "--no-wait", check=False)
        assert r.returncode == 0 and "already ready" in r.stdout  # idempotent: scope resolved once

        # drain: Spur stops scheduling there; k0s keeps running
        r = e.spur("node", "drain", "g[2-3]", "--reason", "disk swap")
        assert "drained g[2-3] (reason: disk swap)" in r.stdout
        assert _sinfo(e, "%t") == {"g1": "idle", "g2": "drain", "g3": "drain"}
        assert "disk swap" in e.cluster.cli("sinfo", "-R", "-h").stdout
        job = e.cluster.cli("sbatch", "--parsable", "-w", "g2", "--wrap", "true").stdout.strip()
        assert e.cluster.cli("squeue", "-h", "-j", job, "-o", "%t").stdout.strip() == "PD"
        assert node_line(e.status(), "g2")[1:4] == ["worker", "active", "enabled=true"]
        assert _k0s_enabled(e, "g2")
        r = e.spur("node", "resume", "g2")
        assert r.stdout.strip() == "resumed g2"
        e.cluster.wait_job(int(job), "COMPLETED")

        # unknown nodes and bad hostlists: one clear error, nothing changed
        r = e.spur("node", "drain", "g2,nosuch", check=False)
        assert r.returncode == 1 and "Invalid node name specified: nosuch" in r.stderr
        assert _sinfo(e, "%t")["g2"] == "idle"
        r = e.spur("node", "remove", "g[1", check=False)
        assert r.returncode == 2 and "spur node remove: error:" in r.stderr
        r = e.spur("node", "remove", "nosuch", check=False)
        assert r.returncode == 1 and "Invalid node name specified: nosuch" in r.stderr

        # remove refuses a node that runs jobs
        job = e.cluster.cli("sbatch", "--parsable", "-w", "g1", "--wrap", "exec sleep 300").stdout.strip()
        e.cluster.wait_job(int(job), "RUNNING")
        r = e.spur("node", "remove", "g1", check=False)
        assert r.returncode == 1 and "g1 still run jobs" in r.stderr
        e.hosts["g3"].proc.kill()
        r = e.spur("node", "remove", "g3")  # not a cluster member: no note
        assert r.stderr == ""
        e.cluster.cli("scancel", job)
        e.cluster.wait_job(int(job), "CANCELLED")

        # remove is inventory only: a cluster member's k0s keeps running
        e.hosts["g2"].proc.kill()  # its spurd would register again otherwise; k0s survives spurd
        r = e.spur("node", "remove", "g2")
        assert "removed g2 from the inventory" in r.stdout
        assert "g2 still run k0s as members of the Spur-managed Kubernetes cluster" in r.stderr
        assert "g2" not in _sinfo(e, "%t")
        assert _k0s_enabled(e, "g2")
    finally:
        e.stop()


def test_gpu_worker_advertises_amd_gpus_as_an_extended_resource(tmp_path):
    """Once the GPU worker is active, the leader PATCHes its Node's status through the Kubernetes API
    (the double) with amd.com/gpu = the GPUs spurd discovered; the real kubectl reads it back."""
    from pathlib import Path

    from integration.k8s_harness import kubeapi_process
    from integration.kubeapi.kubectl import Kubectl
    from integration.kubeapi.kubelet import HttpKubelet

    sysfs = Path(__file__).resolve().parent.parent / "tests/fixtures/sysfs/amd-mi250x"
    e = Env(tmp_path)
    with kubeapi_process(tmp_path) as url:
        kubelet = HttpKubelet(url)
        try:
            e.host("c1", extra_env={"FAKE_K0S_API_URL": url})
            e.host("gw", extra_env={"FAKE_K0S_API_URL": url}, spurd_extra=["--sysfs-root", str(sysfs)])
            e.cluster.wait_nodes("c1", "gw")
            gpus = {n.name: len(n.gpus) for n in e.cluster.nodes()}
            assert gpus["gw"] >= 1 and gpus["c1"] == 0
            for n in ("c1", "gw"):  # what each kubelet does when it registers its Node
                kubelet.add_node(n, {"cpu": "2", "memory": "4Gi"})
            assert "phase: ready" in e.spur("k8s", "up").stdout
            kubectl = Kubectl(url, tmp_path / "kube", cwd=tmp_path)

            def capacity(node: str, field: str = "capacity") -> str:
                path = "{.status." + field + r".amd\.com/gpu}"
                return kubectl("get", "node", node, "-o", f"jsonpath={path}").stdout.strip()

            wait_for(lambda: capacity("gw") == str(gpus["gw"]), timeout=30, what="gw to advertise amd.com/gpu")
            assert capacity("gw", "allocatable") == str(gpus["gw"])
            assert kubectl("get", "node", "gw", "-o", r"jsonpath={.status.allocatable.cpu}").stdout == "2"
            assert capacity("c1") == ""  # the controller runs no workloads and has no GPUs
            assert "nvidia.com/gpu" not in kubectl("get", "node", "gw", "-o", "json").stdout
        finally:
            kubelet.close()
            e.stop()


def test_cluster_pod_cidrs_ride_the_mesh_until_down(tmp_path):
    """With Calico over the mesh ([network] wg_enabled), the pod /24 of each cluster node reaches every other meshed node's
    member set (so its peer's AllowedIPs); ``down`` takes it away again. The agents' Mesh/Join calls
    are made as spurd makes them (no tunnels on loopback)."""
    import base64

    import trio

    from spur.net.model import Member, allowed_ips
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import mesh_pb2
    from spur.rpc.stub import Stub

    mesh = mesh_pb2.DESCRIPTOR.services_by_name["Mesh"]
    e = Env(tmp_path, conf_extra=CLUSTER_MESH)

    def call(method: str, request):  # noqa: ANN001, ANN202
        async def run():  # noqa: ANN202
            async with open_channel(e.cluster.address) as ch:
                return await getattr(Stub(ch, mesh), method)(request, timeout=10)

        return trio.run(run)

    def peers_of(node: str) -> dict[str, tuple[str, ...]]:
        got = call("Members", mesh_pb2.MembersRequest(node=node)).members
        return {
            m.node: allowed_ips(Member(m.node, m.public_key, m.endpoint, m.address, m.pod_cidr))
            for m in got
            if m.node != node
        }

    try:
        e.hosts_up("m1", "m2")
        for i, name in enumerate(("m1", "m2"), 1):
            key = base64.b64encode(bytes([i]) * 32).decode()
            call("Join", mesh_pb2.JoinRequest(node=name, public_key=key, endpoint=f"192.0.2.{i}:51820"))
        assert peers_of("m2") == {"m1": ("10.44.0.1/32",)}
        assert "phase: ready" in e.spur("k8s", "up", "--nodes", "m1").stdout
        wait_for(lambda: peers_of("m2") == {"m1": ("10.44.0.1/32", "10.42.0.0/24")}, timeout=20,
                 what="m1's pod /24 in m2's peer list")
        assert peers_of("m1") == {"m2": ("10.44.0.2/32",)}  # m2 is outside the scoped cluster
        e.spur("k8s", "down")
        wait_for(lambda: peers_of("m2") == {"m1": ("10.44.0.1/32",)}, timeout=20, what="the /24 withdrawn")
    finally:
        e.stop()
