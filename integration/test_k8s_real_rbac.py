"""examples/k8s/rbac.yaml enforced by a real authorizer: the operator runs against the real
kube-apiserver v1.20.2 as ``system:serviceaccount:spur:spur-operator`` (a static token carrying the
ServiceAccount's name and groups) with the example's namespace and RBAC applied by ``kubectl apply``.
The seed's training run goes from apply to COMPLETED and is deleted through the finalizer: every
call the operator makes on that path must be granted, and a role without one of them fails the run
(the second test takes a verb away and sees the server refuse it)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from integration.harness import wait_for
from integration.kube_real import OPERATOR_SA
from integration.kubeapi.kubectl import EXAMPLES, KUBECTL
from integration.operator_harness import TRAINING_RUN, KubeBackend, OperatorEnv, operator_env

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def _apply_rbac(env: OperatorEnv, rbac: str | None = None) -> None:
    """Apply the namespace and the example's RBAC (or ``rbac``), and wait until the server's
    authorizer answers by it: RBAC is read from the server's informer cache, which follows an apply
    a moment later, and a check or an operator call made in between is judged by the old role."""
    env.kubectl("apply", "-f", str(EXAMPLES / "namespace.yaml"))
    if rbac is None:
        env.kubectl("apply", "-f", str(EXAMPLES / "rbac.yaml"))
    else:
        env.kubectl("apply", "-f", "-", input=rbac)
    status_granted = rbac is None or any(
        r.get("resources") == ["spurjobs/status"]
        for d in yaml.safe_load_all(rbac)
        if d and d.get("kind") == "ClusterRole"
        for r in d.get("rules", [])
    )
    wait_for(
        lambda: _can(env, "patch", "spurjobs.spur.amd.com", "status") == status_granted,
        timeout=30,
        what=f"the authorizer to {'grant' if status_granted else 'refuse'} the status verb as applied",
    )


def _can(env: OperatorEnv, verb: str, resource: str, subresource: str = "") -> bool:
    sub = [f"--subresource={subresource}"] if subresource else []
    out = env.kubectl(
        "auth", "can-i", verb, resource, *sub, "-n", env.namespace, "--as", OPERATOR_SA.name, check=False
    )
    return out.stdout.strip() == "yes"


def test_the_operator_runs_the_training_run_as_its_service_account(
    tmp_path: Path, real_kube_backend: KubeBackend
) -> None:
    with operator_env(tmp_path, real_kube_backend) as env:
        _apply_rbac(env)
        assert _can(env, "patch", "spurjobs.spur.amd.com", "status")
        assert not _can(env, "update", "spurjobs.spur.amd.com")  # exactly what it needs
        assert not _can(env, "get", "secrets")  # only in namespace spur
        env.operator_user = OPERATOR_SA.name
        env.start_operator()
        env.wait_nodes("gpu-node-1", "gpu-node-2")
        job_id, pods = env.start_running(TRAINING_RUN)
        env.set_phase(pods, "Succeeded")
        env.wait_state("training-run", "COMPLETED")
        assert env.spurjob("training-run")["status"]["exitCode"] == 0

        env.apply(TRAINING_RUN.replace("name: training-run", "name: second-run"))
        env.wait_state("second-run", "RUNNING")
        second = env.spurjob("second-run")["status"]["jobId"]
        env.set_phase(env.wait_pods(second, 2), "Running")
        env.kubectl("delete", "spurjob", "second-run", timeout=60)
        env.cluster.wait_job(second, "CANCELLED")
        wait_for(lambda: env.pods(second) == [], timeout=30, what="the deleted job's pods to go")
        assert "Forbidden" not in env.operator.log() and "403" not in env.operator.log()


def test_a_role_without_the_status_verb_leaves_the_spurjob_unmirrored(
    tmp_path: Path, real_kube_backend: KubeBackend
) -> None:
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "rbac.yaml").read_text()) if d]
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    role["rules"] = [r for r in role["rules"] if r["resources"] != ["spurjobs/status"]]
    with operator_env(tmp_path, real_kube_backend) as env:
        try:
            _apply_rbac(env, yaml.safe_dump_all(docs))
            assert not _can(env, "patch", "spurjobs.spur.amd.com", "status")
            env.operator_user = OPERATOR_SA.name
            env.start_operator()
            env.wait_nodes("gpu-node-1", "gpu-node-2")
            env.apply(TRAINING_RUN)
            wait_for(
                lambda: "403 Forbidden" in env.operator.log() and "spurjobs/status" in env.operator.log(),
                timeout=30,
                what="the server to refuse the status write",
            )
            assert env.state("training-run") == ""
        finally:
            _apply_rbac(env)  # the session's server keeps the example's role for the next test
