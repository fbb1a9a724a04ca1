"""The manifests of docs/kubernetes.md applied with ``kubectl apply`` to the real kube-apiserver
v1.20.2, in the guide's order, with the guide's ``kubectl create secret generic spur-config
--from-file``: every object is accepted by the real server's validation and stored as written.
1.20 has no policy/v1, so examples/k8s/pdb.yaml is applied in its policy/v1beta1 form (the same
spec); the server then refuses the policy/v1 file itself, which is what a 1.20 cluster's user sees.
No controllers run (envtest-style): the workloads are stored, no pods appear."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from integration.kubeapi.kubectl import EXAMPLES, KUBECTL, Kubectl
from integration.operator_harness import KubeBackend

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def test_the_guides_manifests_apply_to_a_real_server(tmp_path: Path, real_kube_backend: KubeBackend) -> None:
    real = real_kube_backend.real
    assert real is not None
    kubectl = Kubectl(real.server, tmp_path / "kube", cwd=tmp_path, config=real.kubeconfig_text("default"))
    for name in ("namespace", "rbac", "spurjob-crd"):
        kubectl("apply", "-f", str(EXAMPLES / f"{name}.yaml"))
    kubectl("wait", "--for=condition=Established", "crd/spurjobs.spur.amd.com")
    kubectl("delete", "secret", "spur-config", "-n", "spur", "--ignore-not-found")  # the session's server
    out = kubectl(
        "create",
        "secret",
        "generic",
        "spur-config",
        f"--from-file=spur.conf={EXAMPLES / 'spur.conf'}",
        "-n",
        "spur",
    )
    assert out.stdout == "secret/spur-config created\n"
    for name in ("spurctld", "spurd", "operator"):
        kubectl("apply", "-f", str(EXAMPLES / f"{name}.yaml"))

    refused = kubectl("apply", "-f", str(EXAMPLES / "pdb.yaml"), check=False)
    assert refused.returncode != 0 and 'no matches for kind "PodDisruptionBudget" in version "policy/v1"' in (
        refused.stderr
    )
    v1beta1 = (
        (EXAMPLES / "pdb.yaml").read_text().replace("apiVersion: policy/v1\n", "apiVersion: policy/v1beta1\n")
    )
    kubectl("apply", "-f", "-", input=v1beta1)

    stored = json.loads(
        kubectl("get", "statefulset,daemonset,deployment,pdb,service", "-n", "spur", "-o", "json").stdout
    )
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in stored["items"])
    assert ("StatefulSet", "spurctld") in kinds and ("DaemonSet", "spurd") in kinds
    assert ("Deployment", "spur-k8s-operator") in kinds and ("PodDisruptionBudget", "spurctld") in kinds
    secret = json.loads(kubectl("get", "secret", "spur-config", "-n", "spur", "-o", "json").stdout)
    assert list(secret["data"]) == ["spur.conf"]
    sts = next(o for o in stored["items"] if o["kind"] == "StatefulSet")
    assert sts["spec"]["replicas"] == 3
