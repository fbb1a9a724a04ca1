"""spurd's k0s unit ops (K0sAgent) against the k0s and systemctl doubles: a single node, a control
plane + worker joining with a minted token, re-adoption across a spurd restart, reset purging the
token so a stale one fails the next join, and the config rendered once.

The systemctl double keeps these runnable where no systemd container can run (no root, no rootfs); the
same unit operations against a real systemd 252 are integration/test_systemd_k0s.py."""

from __future__ import annotations

import json
import os
import signal
import stat

import pytest

from integration.harness import Cluster, wait_for
from integration.k0s_harness import K0sHost, cleanup_hosts
from spur.rpc.proto import k0s_pb2
from spur.rpc.status import RpcError, StatusCode

pytestmark = pytest.mark.integration


@pytest.fixture
def hosts(tmp_path):
    cluster = Cluster(tmp_path / "ctl")
    (tmp_path / "ctl").mkdir()
    cluster.start_controller()
    made: list[K0sHost] = []

    def make(name: str, **kw) -> K0sHost:
        host = K0sHost(name=name, root=tmp_path / name, cluster=cluster, **kw).start()
        made.append(host)
        return host

    try:
        yield make
    finally:
        cleanup_hosts(made)
        cluster.stop()


def apply(host: K0sHost, role: str, token: str = "", count: int = 1, **kw) -> k0s_pb2.K0sStatus:
    req = k0s_pb2.K0sApplyRequest(role=role, control_plane_count=count, pod_cidr="10.42.0.0/16",
                                  service_cidr="10.43.0.0/16", join_token=token, **kw)
    return host.k0s_call("Apply", req)


def status(host: K0sHost) -> k0s_pb2.K0sStatus:
    return host.k0s_call("Status", k0s_pb2.K0sStatusRequest())


def active(host: K0sHost) -> bool:
    return status(host).component_state == "active"


def test_single_node_unit_config_and_readoption(hosts):
    n1 = hosts("n1")
    assert status(n1).component_state == "absent"
    st = apply(n1, "single")
    assert st.unit_present and st.spur_owned and st.enabled and st.role == "single"
    wait_for(lambda: active(n1), what="k0s single to answer k0s status")

    unit = (n1.unit_dir / "spur-k0s.service").read_text()
    assert "X-Spur-Owner=spurd" in unit and " controller --single " in unit
    assert stat.S_IMODE(n1.config_dir.stat().st_mode) == 0o700
    cfg_file = n1.config_dir / "k0s.yaml"
    assert stat.S_IMODE(cfg_file.stat().st_mode) == 0o600
    config = json.loads(cfg_file.read_text())
    assert config["spec"]["network"]["kuberouter"]["extraArgs"] == {"overlay-type": "full"}
    assert "nodeLocalLoadBalancing" not in config["spec"]["network"]
    manifests = sorted(p.name for p in (n1.data_dir / "manifests/spur-storage").iterdir())
    assert any("storageclass-local-path" in m for m in manifests)

    # spurd dies; k0s (a systemd unit, not a Spur job) keeps running and a new spurd re-adopts it
    pid = status(n1).main_pid
    n1.proc.kill(signal.SIGKILL)
    os.kill(pid, 0)
    n1.start()
    wait_for(lambda: "re-adopted k0s single unit" in n1.proc.log(), what="re-adoption logged")
    st = status(n1)
    assert (st.component_state, st.main_pid) == ("active", pid)

    # the control plane's config is rendered once: a later apply with other CIDRs leaves it alone
    before = cfg_file.read_text()
    n1.k0s_call("Apply", k0s_pb2.K0sApplyRequest(role="single", control_plane_count=1,
                                                 pod_cidr="10.50.0.0/16", service_cidr="10.51.0.0/16"))
    assert cfg_file.read_text() == before
    assert status(n1).main_pid == pid, "an unchanged unit is not restarted"

    kubeconfig = n1.k0s_call("AdminKubeconfig", k0s_pb2.K0sKubeconfigRequest()).kubeconfig
    assert "certificate-authority-data" in kubeconfig

    st = n1.k0s_call("Reset", k0s_pb2.K0sResetRequest())
    assert st.component_state == "absent"
    assert not (n1.unit_dir / "spur-k0s.service").exists() and not cfg_file.exists()
    assert not n1.data_dir.exists()


def test_controller_and_worker_join_and_reset_purges_the_token(hosts):
    cp, w = hosts("cp"), hosts("w1")
    apply(cp, "controller")
    wait_for(lambda: active(cp), what="controller up")
    token = cp.k0s_call("CreateToken", k0s_pb2.K0sTokenRequest(role="worker")).token
    assert token and token not in cp.proc.log(), "a join token is never logged"
    apply(w, "worker", token=token)
    wait_for(lambda: active(w), what="worker joined")
    assert [j["role"] for j in cp.joined()] == ["worker"]
    token_file = w.config_dir / "join-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert not (w.config_dir / "k0s.yaml").exists(), "workers get no k0s config"
    assert status(w).role == "worker"

    # down --reset on both: the cached token goes with the cluster
    for host in (w, cp):
        host.k0s_call("Reset", k0s_pb2.K0sResetRequest())
    assert not token_file.exists()

    # a token minted against the old CA fails the next join with a kubernetes-ca verification error
    apply(cp, "controller")
    wait_for(lambda: active(cp), what="controller back with a new CA")
    stale = json.loads(__import__("base64").b64decode(token))
    stale["url"] = json.loads((cp.data_dir / "fake/controller.json").read_text())["join_url"]
    apply(w, "worker", token=__import__("base64").b64encode(json.dumps(stale).encode()).decode())
    wait_for(lambda: "failed to verify kubernetes-ca" in w.unit_output(), what="stale token refused")
    assert not active(w)

    # a fresh token joins cleanly
    w.k0s_call("Reset", k0s_pb2.K0sResetRequest())
    fresh = cp.k0s_call("CreateToken", k0s_pb2.K0sTokenRequest(role="worker")).token
    apply(w, "worker", token=fresh)
    wait_for(lambda: active(w), what="worker re-joined")
    assert [j["role"] for j in cp.joined()] == ["worker"]


def test_refusals(hosts):
    n1 = hosts("n1")
    with pytest.raises(RpcError) as err:
        apply(n1, "worker")
    assert err.value.code == StatusCode.FAILED_PRECONDITION and "needs a join token" in err.value.message
    with pytest.raises(RpcError) as err:
        apply(n1, "master")
    assert err.value.code == StatusCode.INVALID_ARGUMENT
    n1.unit_dir.joinpath("spur-k0s.service").write_text("[Service]\nExecStart=/usr/local/bin/k0s controller\n")
    with pytest.raises(RpcError) as err:
        apply(n1, "single")
    assert "was not written by spurd" in err.value.message
    with pytest.raises(RpcError) as err:
        n1.k0s_call("Reset", k0s_pb2.K0sResetRequest())
    assert "was not written by spurd" in err.value.message
    assert n1.proc.alive()

