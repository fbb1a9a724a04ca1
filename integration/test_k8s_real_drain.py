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
            pdb = {
                "apiVersion": "policy/v1beta1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "web"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            }
            resp = http.post(f"/apis/policy/v1beta1/namespaces/{ns}/poddisruptionbudgets", json=pdb)
            assert resp.status_code == 201, resp.text
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
