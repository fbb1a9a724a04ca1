"""``spur k8s`` end to end: a real spurctld with [cluster] enabled, real spurd "hosts" on loopback
(integration.k0s_harness) with the k0s and systemctl doubles, driven through the spur CLI.

The systemctl double keeps these runnable where no systemd container can run (no root, no rootfs); the
same unit operations against a real systemd 252 are integration/test_systemd_k0s.py."""

from __future__ import annotations

import json
import subprocess

import pytest

from integration.harness import wait_for
from integration.k0s_harness import CLUSTER_ON, Env, node_line

pytestmark = pytest.mark.integration

@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    try:
        yield e
    finally:
        e.stop()


def test_one_node_single_up_status_down_reset(env):
    env.hosts_up("solo")
    r = env.spur("k8s", "up")
    assert "provisioning started" in r.stdout
    assert "phase: provisioning" in r.stdout and "phase: ready" in r.stdout  # the live view
    st = env.status()
    assert "control-plane: solo" in st
    assert node_line(st, "solo")[:4] == ["solo", "single", "active", "enabled=true"]
    # idempotent
    assert "already ready; nothing changed" in env.spur("k8s", "up", "--no-wait").stdout
    # --admin is off by default and says where to get it instead
    r = env.spur("k8s", "kubeconfig", "--admin", check=False)
    assert r.returncode == 1 and "allow_admin_kubeconfig = false" in r.stderr and "k0s kubeconfig admin" in r.stderr
    r = env.spur("k8s", "kubeconfig", "--admin", "--user", "bob", check=False)
    assert r.returncode == 2 and "not allowed with argument" in r.stderr

    r = env.spur("k8s", "down", "--reset")
    assert "stopping and resetting k0s on solo" in r.stdout
    host = env.hosts["solo"]
    wait_for(lambda: not (host.unit_dir / "spur-k0s.service").exists(), what="unit removed by down --reset")
    assert not host.data_dir.exists() and not (host.config_dir / "k0s.yaml").exists()
    assert "phase: down" in env.status()


def test_three_nodes_controller_and_two_workers(env):
    env.hosts_up("n1", "n2", "n3")
    r = env.spur("k8s", "up")
    assert "phase: ready" in r.stdout
    st = env.status()
    assert "control-plane: n1" in st
    assert node_line(st, "n1")[1:3] == ["controller", "active"]
    assert node_line(st, "n2")[1:3] == ["worker", "active"] and node_line(st, "n3")[1:3] == ["worker", "active"]
    assert sorted(j["role"] for j in env.hosts["n1"].joined()) == ["worker", "worker"]
    config = json.loads((env.hosts["n1"].config_dir / "k0s.yaml").read_text())
    assert "nodeLocalLoadBalancing" not in config["spec"]["network"]
    # plain down: stopped and disabled, state kept
    env.spur("k8s", "down")
    assert "phase: down" in env.status()
    for h in env.hosts.values():
        wait_for(lambda h=h: "spur-k0s.service" not in (h.systemd_root / "state/enabled.json").read_text(),
                 what=f"k0s disabled on {h.name}")
        assert (h.unit_dir / "spur-k0s.service").exists(), "plain down keeps spurd's unit"
    assert (env.hosts["n1"].data_dir / "pki/ca.fingerprint").exists(), "down without --reset keeps k0s state"


def test_replicas_three_on_five_nodes_gets_nllb_on_control_planes_only(env):
    names = ["h1", "h2", "h3", "h4", "h5"]
    env.hosts_up(*names)
    r = env.spur("k8s", "up", "--replicas", "3", timeout=180)
    assert "phase: ready" in r.stdout
    st = env.status()
    assert "control-plane: h1,h2,h3" in st
    for n in ("h1", "h2", "h3"):
        assert node_line(st, n)[1:3] == ["controller", "active"]
        net = json.loads((env.hosts[n].config_dir / "k0s.yaml").read_text())["spec"]["network"]
        assert net["nodeLocalLoadBalancing"] == {"enabled": True, "type": "EnvoyProxy"}
    for n in ("h4", "h5"):
        assert node_line(st, n)[1:3] == ["worker", "active"]
        assert not (env.hosts[n].config_dir / "k0s.yaml").exists()
    joined = sorted(j["role"] for j in env.hosts["h1"].joined())
    assert joined.count("controller") == 2, joined


def test_control_plane_error_texts_and_admin_only(env):
    env.hosts_up("e1", "e2")
    r = env.spur("k8s", "up", "--nodes", "e1", "--control-plane-node", "e2", check=False)
    assert r.returncode == 1 and r.stderr.strip().endswith("control-plane node e2 is not a registered node")
    r = env.spur("k8s", "up", "--replicas", "2", check=False)
    assert r.returncode == 2 and "invalid choice: 2" in r.stderr
    assert "phase: down" in env.status(), "a refused up changes nothing"


def test_feature_off_says_how_to_turn_it_on(tmp_path):
    e = Env(tmp_path, conf_extra="")
    try:
        for verb in (["status"], ["up"], ["down"], ["kubeconfig"], ["add-nodes", "--nodes", "x"]):
            r = e.spur("k8s", *verb, check=False)
            assert r.returncode == 1, r
            assert "Spur-managed Kubernetes is off" in r.stderr and "set enabled = true" in r.stderr
    finally:
        e.stop()


def test_conf_control_plane_outside_the_scope(tmp_path):
    e = Env(tmp_path, conf_extra=CLUSTER_ON + 'control_plane_node = "c2"\n')
    try:
        e.hosts_up("c1", "c2")
        r = e.spur("k8s", "up", "--nodes", "c1", check=False)
        assert r.stderr.strip().endswith("control-plane node c2 is not among the selected cluster nodes")
    finally:
        e.stop()


def test_scoped_cluster_add_and_remove_nodes(tmp_path):
    from integration.k8s_harness import kubeapi_process
    from integration.kubeapi.kubelet import HttpKubelet

    e = Env(tmp_path)
    with kubeapi_process(tmp_path) as url:
        kubelet = HttpKubelet(url)
        try:
            e.hosts_up("s1", "s2", "s3", "s4", "s5", extra_env={"FAKE_K0S_API_URL": url})
            r = e.spur("k8s", "up", "--nodes", "s[1-3]")
            assert "phase: ready" in r.stdout
            st = e.status()
            assert "scope: scoped" in st and "s4" not in st
            # grow online; adding a member again is a no-op
            assert "added as worker(s): s4" in e.spur("k8s", "add-nodes", "--nodes", "s4").stdout
            wait_for(lambda: node_line(e.status(), "s4")[1:3] == ["worker", "active"], what="s4 joined")
            assert "nothing changed" in e.spur("k8s", "add-nodes", "--nodes", "s[3-4]").stdout

            def refused(*args: str) -> str:
                r = e.spur("k8s", "remove-nodes", *args, check=False, timeout=300)
                assert r.returncode != 0, r.stdout
                return r.stderr.strip()

            assert "node s1 is a control-plane node" in refused("--nodes", "s1")
            assert "node s5 is not in the cluster" in refused("--nodes", "s5")

            # a Spur job on s2 holds it unless --force
            job = e.cluster.cli("sbatch", "--parsable", "-w", "s2", "--wrap", "exec sleep 300", cwd=tmp_path)
            job_id = job.stdout.strip()
            wait_for(lambda: "R" in e.cluster.cli("squeue", "-h", "-j", job_id, "-o", "%t", cwd=tmp_path).stdout)
            assert f"node s2 is running Spur jobs ({job_id})" in refused("--nodes", "s2")
            e.cluster.cli("scancel", job_id, cwd=tmp_path)

            # a PodDisruptionBudget blocks the drain until the timeout; the node stays, cordoned
            for n in ("s2", "s3", "s4"):
                kubelet.add_node(n, {"cpu": "2", "memory": "4Gi"})
            kubelet.http.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                           "metadata": {"name": "web"}}).raise_for_status()
            kubelet.http.post("/api/v1/namespaces/web/pods", json={
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "labels": {"app": "web"}},
                "spec": {"nodeName": "s3", "containers": [{"name": "c", "image": "nginx"}]},
            }).raise_for_status()
            kubelet.set_pod_phase("web", "web-0", "Running")
            kubelet.http.post("/apis/policy/v1/namespaces/web/poddisruptionbudgets", json={
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            }).raise_for_status()
            msg = refused("--nodes", "s3", "--drain-timeout", "2")
            assert "drain of s3 timed out after 2s" in msg and "PodDisruptionBudget" in msg
            assert node_line(e.status(), "s3")[1] == "worker"
            assert kubelet.http.get("/api/v1/nodes/s3").json()["spec"]["unschedulable"] is True

            # --force pushes past the budget: drained, k0s stopped and reset, forgotten
            r = e.spur("k8s", "remove-nodes", "--nodes", "s3", "--drain-timeout", "1", "--force", timeout=300)
            assert "removed s3: drained (1 pod(s) deleted past a PodDisruptionBudget or the timeout)" in r.stdout
            assert "s3" not in e.status()
            assert not (e.hosts["s3"].unit_dir / "spur-k0s.service").exists()
            assert kubelet.http.get("/api/v1/nodes/s3").status_code == 404
            assert kubelet.http.get("/api/v1/namespaces/web/pods/web-0").status_code == 404

            # the last workers cannot all go
            assert "last remaining worker" in refused("--nodes", "s2,s4")
            r = e.spur("k8s", "remove-nodes", "--nodes", "s4", timeout=300)
            assert "removed s4: drained" in r.stdout
        finally:
            kubelet.close()
            e.stop()


def test_kubeconfig_access_table(tmp_path):
    """bare -> own namespace; --user needs admin; --admin needs admin + allow_admin_kubeconfig."""
    import trio
    import yaml

    from integration.k8s_harness import kubeapi_process
    from spur.auth.identity import Identity, identity_metadata
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import k8s_pb2
    from spur.rpc.status import RpcError, StatusCode
    from spur.rpc.stub import Stub

    e = Env(tmp_path, conf_extra=CLUSTER_ON + "allow_admin_kubeconfig = true\n")
    with kubeapi_process(tmp_path) as url:
        try:
            e.hosts_up("k1", extra_env={"FAKE_K0S_API_URL": url})
            e.spur("k8s", "up")
            # root (an admin): its own, another user's, and the cluster-admin kubeconfig
            own = yaml.safe_load(e.spur("k8s", "kubeconfig").stdout)
            ctx = own["contexts"][0]["context"]
            assert ctx["namespace"] == "root" and own["clusters"][0]["cluster"]["server"] == url
            assert own["users"][0]["user"]["token"].startswith("sa.root.spur-root.")
            bob = yaml.safe_load(e.spur("k8s", "kubeconfig", "--user", "bob").stdout)
            assert bob["contexts"][0]["context"]["namespace"] == "bob"
            admin = e.spur("k8s", "kubeconfig", "--admin").stdout
            assert "certificate-authority-data" in admin and "token: admin-" in admin

            mallory = identity_metadata(Identity(4242, 4242, "mallory", "mallory"))
            service = k8s_pb2.DESCRIPTOR.services_by_name["K8sCluster"]

            async def as_mallory(request):
                async with open_channel(e.cluster.address, metadata_provider=lambda: mallory) as ch:
                    return await Stub(ch, service).Kubeconfig(request, timeout=30)

            mine = yaml.safe_load(trio.run(as_mallory, k8s_pb2.K8sKubeconfigRequest()).kubeconfig)
            assert mine["contexts"][0]["context"]["namespace"] == "mallory"
            for request in (k8s_pb2.K8sKubeconfigRequest(user="bob"), k8s_pb2.K8sKubeconfigRequest(admin=True)):
                with pytest.raises(RpcError) as err:
                    trio.run(as_mallory, request)
                assert err.value.code == StatusCode.PERMISSION_DENIED
                assert "needs the administrator privilege" in err.value.message
            # asking for yourself by name is not "another user"
            named = trio.run(as_mallory, k8s_pb2.K8sKubeconfigRequest(user="mallory")).kubeconfig
            assert "namespace: mallory" in named
        finally:
            e.stop()


def test_calico_vxlan_without_storage_and_a_gpu_node(tmp_path):
    """calico without the mesh: vxlan on the nodes' own addresses, cni_mtu emitted, kubelet node IP
    pinned; storage_provisioner = "none" ships no manifests; a GPU node gets its CDI spec."""
    from pathlib import Path

    sysfs = Path(__file__).resolve().parent.parent / "tests/fixtures/sysfs/amd-mi250x"
    conf = 'cni = "calico"\ncni_mtu = 1400\nstorage_provisioner = "none"\n'
    e = Env(tmp_path, conf_extra=CLUSTER_ON + conf)
    try:
        e.host("v1", cluster_conf=conf)
        e.host("v2", cluster_conf=conf, spurd_extra=["--sysfs-root", str(sysfs)])
        e.cluster.wait_nodes("v1", "v2")
        assert "phase: ready" in e.spur("k8s", "up").stdout
        cfg = json.loads((e.hosts["v1"].config_dir / "k0s.yaml").read_text())["spec"]
        assert cfg["network"]["calico"] == {"mode": "vxlan", "mtu": 1400, "vxlanPort": 4789}
        assert cfg["api"] == {"address": "127.0.0.1", "sans": ["127.0.0.1"]}
        assert not (e.hosts["v1"].data_dir / "manifests/spur-storage").exists()
        unit = (e.hosts["v2"].unit_dir / "spur-k0s.service").read_text()
        assert "--kubelet-extra-args=--node-ip=127.0.0.1" in unit
        cdi = json.loads((e.hosts["v2"].cdi_dir / "spur-amd-gpu.json").read_text())
        assert cdi["kind"] == "amd.com/gpu" and len(cdi["devices"]) >= 1
        assert not (e.hosts["v1"].cdi_dir / "spur-amd-gpu.json").exists()
    finally:
        e.stop()


def test_whole_inventory_cluster_enrolls_a_new_node(env):
    env.hosts_up("w1", "w2")
    assert "phase: ready" in env.spur("k8s", "up").stdout
    env.hosts_up("w3")  # registers later: joins as a worker by itself
    wait_for(lambda: node_line(env.status(), "w3")[1:3] == ["worker", "active"], what="w3 enrolled")
    r = env.spur("k8s", "add-nodes", "--nodes", "w3", check=False)
    assert r.returncode == 1 and "spans the whole inventory" in r.stderr
    r = env.spur("k8s", "remove-nodes", "--nodes", "w3", check=False)
    assert r.returncode == 1 and "node w3 is not in a scoped cluster" in r.stderr


def test_a_ready_workers_stopped_unit_is_started_again(env):
    """The starter: a worker whose k0s unit stops (here: ``systemctl stop`` through the double) is
    started again by the leader at its next pass, with no wait."""
    import os
    import sys

    from integration.k0s_harness import DOUBLES
    from spur.rpc.proto import k0s_pb2

    env.hosts_up("r1", "r2")
    assert "phase: ready" in env.spur("k8s", "up").stdout
    worker = env.hosts["r2"]
    before = worker.k0s_call("Status", k0s_pb2.K0sStatusRequest()).main_pid
    subprocess.run(
        [sys.executable, str(DOUBLES / "bin/systemctl"), "stop", "spur-k0s.service"],
        env={**os.environ, "FAKE_SYSTEMD_ROOT": str(worker.systemd_root)}, check=True, timeout=60,
    )
    assert worker.k0s_call("Status", k0s_pb2.K0sStatusRequest()).component_state == "inactive"

    def running_again() -> bool:
        st = worker.k0s_call("Status", k0s_pb2.K0sStatusRequest())
        return st.component_state == "active" and st.main_pid not in (0, before)

    wait_for(running_again, timeout=30, interval=0.2, what="r2's k0s started again")
    wait_for(lambda: node_line(env.status(), "r2")[1:3] == ["worker", "active"], what="status shows r2 active")
    assert "start=" not in node_line(env.status(), "r2"), "no wait, nothing in flight once it runs"


def test_the_dashboard_cluster_page_shows_the_k0s_cluster_as_spur_k8s_status(env):
    import re

    import httpx

    env.hosts_up("n1", "n2")
    assert "phase: ready" in env.spur("k8s", "up").stdout
    st = env.status()
    env.cluster.wait_rest()
    with httpx.Client(base_url=f"http://127.0.0.1:{env.cluster.rest_port}", timeout=30) as h:
        # This cluster has no JWT key: the sign-in form takes a user name, as its REST API does.
        assert h.post("/ui/login", data={"user": "root"}).status_code == 303
        r = h.get("/ui/cluster")
    assert r.status_code == 200, r.text
    page = r.text
    assert '<span id="k8s-phase">ready</span>' in page
    assert '<span id="k8s-control-planes">n1</span>' in page
    for name in ("n1", "n2"):
        _name, role, state = node_line(st, name)[:3]
        row = re.search(f'<tr data-node="{name}"><td>{name}</td><td>([^<]*)</td><td>([^<]*)</td>', page)
        assert row is not None and row.groups() == (role, state), page
