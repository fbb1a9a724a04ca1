"""The drain of ``spur k8s remove-nodes`` (spur.k8s.cluster.removal.drain) against the real
kube-apiserver v1.20.2: cordon through a merge patch, eviction through the real ``pods/eviction``
subresource, a real PodDisruptionBudget (policy/v1beta1: 1.20 has no policy/v1) refusing an eviction
that would break it, and ``--force`` deleting past it as documented.

No controller-manager runs (envtest-style), so the harness plays the disruption controller: it
writes the budget's status (how many disruptions are allowed) as that controller would, through
the API, and the harness's kubelet reports the pods Running (the server evicts a Pending pod without
asking its budget). Pods have ``terminationGracePeriodSeconds: 0`` so an eviction or delete removes
them at once (no kubelet confirms a graceful deletion). On 1.20 the eviction must be policy/v1beta1:
the server answers 400 to a policy/v1 Eviction, which is what the drain sent before it asked."""

from __future__ import annotations

import secrets
import urllib.parse
from typing import Any

import pytest

from integration.kube_real import RealKube
from integration.kubeapi import HttpKubelet
from integration.operator_harness import KubeBackend
from spur.k8s.cluster.kubeclient import KubeClient, KubeTarget
from spur.k8s.cluster.planner import PlanError
from spur.k8s.cluster.removal import drain


def _client(real: RealKube) -> KubeClient:
    return KubeClient(KubeTarget(real.server, real.ca_file.read_bytes(), real.token, None, None))


def _pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "web", "image": "registry.example/web:1"}],
        },
    }


def _budget_status(http: Any, ns: str, allowed: int, healthy: int) -> None:
    """What the disruption controller writes: the budget's generation observed, and how many of its
    pods may go now."""
    path = f"/apis/policy/v1beta1/namespaces/{ns}/poddisruptionbudgets/web"
    pdb = http.get(path).json()
    pdb["status"] = {
        "observedGeneration": pdb["metadata"]["generation"],
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": healthy - allowed,
        "expectedPods": healthy,
    }
    resp = http.put(f"{path}/status", json=pdb)
    assert resp.status_code == 200, resp.text


def _create_web_budget(http: Any, ns: str) -> None:
    """A policy/v1beta1 budget (1.20 has no policy/v1) keeping one pod labelled app=web available."""
    pdb = {
        "apiVersion": "policy/v1beta1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }
    resp = http.post(f"/apis/policy/v1beta1/namespaces/{ns}/poddisruptionbudgets", json=pdb)
    assert resp.status_code == 201, resp.text


def test_drain_honours_a_real_pod_disruption_budget(real_kube_backend: KubeBackend) -> None:
    real = real_kube_backend.real
    assert real is not None
    ns = real_kube_backend.namespace
    node = f"drain-{secrets.token_hex(3)}"
    client = _client(real)
    with real.http() as http:
        resp = http.post("/api/v1/nodes", json={"metadata": {"name": node}})
        assert resp.status_code == 201, resp.text
        try:
            kubelet = HttpKubelet(real.server, real.token, verify=real.ssl_context())
            for i in range(2):
                resp = http.post(f"/api/v1/namespaces/{ns}/pods", json=_pod(f"web-{i}", node))
                assert resp.status_code == 201, resp.text
                # Running: a Pending pod is evicted whatever its budget says
                kubelet.set_pod_phase(ns, f"web-{i}", "Running")
            kubelet.close()
            _create_web_budget(http, ns)
            _budget_status(http, ns, allowed=1, healthy=2)

            def pods() -> list[str]:
                selector = urllib.parse.quote(f"spec.nodeName={node}")
                items = http.get(f"/api/v1/namespaces/{ns}/pods?fieldSelector={selector}").json()["items"]
                return sorted(p["metadata"]["name"] for p in items)

            # one pod may go; the second eviction would break minAvailable: 1
            with pytest.raises(PlanError) as refused:
                drain(client, node, timeout=2, force=False)
            assert "would violate a PodDisruptionBudget" in str(refused.value)
            assert f"drain of {node} timed out after 2s" in str(refused.value)
            assert len(pods()) == 1  # the budget kept one
            assert http.get(f"/api/v1/nodes/{node}").json()["spec"]["unschedulable"] is True

            _budget_status(http, ns, allowed=0, healthy=1)
            how = drain(client, node, timeout=1, force=True)
            assert how == "drained (1 pod(s) deleted past a PodDisruptionBudget or the timeout)"
            assert pods() == []
        finally:
            http.delete(f"/api/v1/nodes/{node}")


def test_remove_nodes_through_the_cli_against_the_real_server(tmp_path, real_kube_backend: KubeBackend) -> None:
    """``spur k8s remove-nodes`` end to end with the real server as the cluster's API (the fake k0s's
    admin kubeconfig names it): a budget that allows no disruption holds the node, cordoned, until
    the drain times out; ``--force`` deletes past it, and the Node object goes from the API."""
    from integration.k0s_harness import Env, node_line

    real = real_kube_backend.real
    assert real is not None
    ns = real_kube_backend.namespace
    prefix = f"r{secrets.token_hex(2)}n"  # Nodes are cluster-wide on the session's server
    names = [f"{prefix}{i}" for i in range(1, 5)]
    api = {
        "FAKE_K0S_API_URL": real.server,
        "FAKE_K0S_API_CA_FILE": str(real.ca_file),
        "FAKE_K0S_API_TOKEN_FILE": str(real.workdir / "token"),
    }
    e = Env(tmp_path)
    kubelet = HttpKubelet(real.server, real.token, verify=real.ssl_context())
    try:
        e.hosts_up(*names, extra_env=api)
        assert "phase: ready" in e.spur("k8s", "up", "--nodes", f"{prefix}[1-4]").stdout
        for name in names[1:]:
            kubelet.add_node(name, {"cpu": "2", "memory": "4Gi"})
        gone, held = names[2], names[3]
        with real.http() as http:
            resp = http.post(f"/api/v1/namespaces/{ns}/pods", json=_pod("web-0", gone))
            assert resp.status_code == 201, resp.text
            kubelet.set_pod_phase(ns, "web-0", "Running")
            _create_web_budget(http, ns)
            _budget_status(http, ns, allowed=0, healthy=1)

            r = e.spur("k8s", "remove-nodes", "--nodes", gone, "--drain-timeout", "2", check=False, timeout=300)
            assert r.returncode != 0, r.stdout
            assert f"drain of {gone} timed out after 2s" in r.stderr and "PodDisruptionBudget" in r.stderr
            assert node_line(e.status(), gone)[1] == "worker"
            assert http.get(f"/api/v1/nodes/{gone}").json()["spec"]["unschedulable"] is True
            assert http.get(f"/api/v1/namespaces/{ns}/pods/web-0").status_code == 200

            r = e.spur("k8s", "remove-nodes", "--nodes", gone, "--drain-timeout", "1", "--force", timeout=300)
            assert f"removed {gone}: drained (1 pod(s) deleted past a PodDisruptionBudget or the timeout)" in r.stdout
            assert gone not in e.status()
            assert not (e.hosts[gone].unit_dir / "spur-k0s.service").exists()
            assert http.get(f"/api/v1/nodes/{gone}").status_code == 404
            assert http.get(f"/api/v1/namespaces/{ns}/pods/web-0").status_code == 404

            # a node with nothing on it drains at once
            r = e.spur("k8s", "remove-nodes", "--nodes", held, timeout=300)
            assert f"removed {held}: drained" in r.stdout
            assert http.get(f"/api/v1/nodes/{held}").status_code == 404
    finally:
        kubelet.close()
        with real.http() as http:
            for name in names:
                http.delete(f"/api/v1/nodes/{name}")
        e.stop()
