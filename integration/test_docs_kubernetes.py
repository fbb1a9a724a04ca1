"""docs/kubernetes.md, command by command: every shell command in it is either run here, in the
order the guide gives, against the Kubernetes API double with the real kubectl (as a shell runs
it: pipes and line continuations included), or skipped with the reason it cannot run here.

The walk-through acts as the cluster's kubelet where the guide expects pods to run, and runs the
StatefulSet's three controllers as real spurctld processes (hostnames spurctld-0..2, see
``integration.k8s_harness``) whose output is what ``kubectl logs`` shows.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from integration.k8s_harness import StatefulSetControllers, kubeapi_process
from integration.kubeapi import HttpKubelet
from integration.kubeapi.kubectl import KUBECTL, kubeconfig_text

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "kubernetes.md"

RUN = "run"
OPERATOR = "needs spur-k8s-operator, which is not built yet (issue 12)"
NO_ENGINE = "no Docker engine or containerd on this machine"
IMAGE = (
    "no Docker engine on this machine: integration/test_container_image.py runs this Dockerfile's "
    "build and runtime stages as written in fresh virtualenvs"
)

#: Every command of the guide, in its order, and what this test does with it.
PLAN: list[tuple[str, str]] = [
    ("docker build --target runtime -t spur:<tag> .", IMAGE),
    ("docker save spur:<tag> -o spur.tar", NO_ENGINE),
    ("sudo ctr -n k8s.io images import spur.tar", NO_ENGINE),
    ("kubectl apply -f examples/k8s/namespace.yaml", RUN),
    ("kubectl apply -f examples/k8s/rbac.yaml", RUN),
    ("kubectl apply -f examples/k8s/spurjob-crd.yaml", RUN),
    ("kubectl create secret generic spur-config --from-file=spur.conf=examples/k8s/spur.conf -n spur", RUN),
    ("kubectl apply -f examples/k8s/spurctld.yaml", RUN),
    ("kubectl apply -f examples/k8s/spurd.yaml", RUN),
    ("kubectl apply -f examples/k8s/operator.yaml", RUN),
    ("kubectl apply -f examples/k8s/pdb.yaml", RUN),
    ("kubectl create configmap spur-config --from-file=spur.conf=examples/k8s/spur.conf -n spur", RUN),
    (
        "kubectl create secret generic spur-config --from-file=spur.conf=examples/k8s/spur.conf -n spur "
        "--dry-run=client -o yaml | kubectl apply -f -",
        RUN,
    ),
    ("kubectl rollout restart statefulset/spurctld -n spur", RUN),
    ("kubectl apply -f job.yaml", RUN),
    ("kubectl get spurjob training-run -o jsonpath='{.status.state}'", OPERATOR),
    ("sacctmgr modify account name=myaccount set grptres=cpu=16,mem=32768,gres/gpu=8", OPERATOR),
    ("kubectl get pods -n spur", RUN),
    ("kubectl logs statefulset/spurctld -n spur", RUN),
    ("kubectl logs -n spur -l app.kubernetes.io/name=spurctld --prefix", RUN),
    ("kubectl exec -n spur spurctld-0 -- spur nodes", OPERATOR),
]


def guide_blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", GUIDE.read_text(), flags=re.S | re.M)


def guide_commands() -> list[str]:
    """The shell commands of the guide's ``sh`` blocks (continuations joined, comments dropped)."""
    commands = []
    for block in guide_blocks("sh"):
        pending = ""
        for line in block.splitlines():
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1].strip() + " "
                continue
            commands.append(pending + line.strip())
            pending = ""
    return commands


def test_every_command_of_the_guide_is_planned_in_order() -> None:
    assert guide_commands() == [command for command, _ in PLAN]


def test_the_guides_files_are_the_examples() -> None:
    (job,) = guide_blocks("yaml")
    assert "kind: SpurJob" in job and "name: training-run" in job
    (conf,) = guide_blocks("toml")
    shipped = (ROOT / "examples" / "k8s" / "spur.conf").read_text()
    for line in conf.splitlines():
        assert line in shipped.splitlines(), line
    assert "docker build --target runtime -t spur:<tag> ." in (ROOT / "Dockerfile").read_text()


@pytest.mark.parametrize("command", [c for c, how in PLAN if how != RUN])
def test_commands_that_cannot_run_here(command: str) -> None:
    pytest.skip(dict(PLAN)[command])


def _uts_available() -> bool:
    return os.geteuid() == 0 and shutil.which("unshare") is not None


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_walkthrough(tmp_path: Path) -> None:
    logs = tmp_path / "pod-logs"
    logs.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / "job.yaml").write_text(guide_blocks("yaml")[0])
    controllers = StatefulSetControllers(tmp_path / "ctl", log_dir=logs)
    (tmp_path / "ctl").mkdir()
    with kubeapi_process(tmp_path, "--logs-dir", str(logs)) as url:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(kubeconfig_text(url, "spur-docs-token"))

        def shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
            env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
            env.update(HOME=tempfile.mkdtemp(dir=tmp_path), KUBECONFIG=str(kubeconfig))
            proc = subprocess.run(
                ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
            )
            assert proc.returncode == 0, f"{command}\nexited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
            return proc

        kubelet = HttpKubelet(url)
        outputs: dict[str, str] = {}
        try:
            for command, how in PLAN:
                if how != RUN:
                    continue
                if command == "kubectl get pods -n spur":
                    _run_the_cluster(kubelet, controllers, shell)
                outputs[command] = shell(command, work if "job.yaml" in command else ROOT).stdout
        finally:
            kubelet.close()
            controllers.stop()

    assert outputs["kubectl apply -f examples/k8s/spurjob-crd.yaml"] == (
        "customresourcedefinition.apiextensions.k8s.io/spurjobs.spur.amd.com created\n"
    )
    assert "secret/spur-config" in outputs[PLAN[12][0]]
    assert (
        outputs["kubectl rollout restart statefulset/spurctld -n spur"]
        == "statefulset.apps/spurctld restarted\n"
    )
    assert outputs["kubectl apply -f job.yaml"] == "spurjob.spur.amd.com/training-run created\n"
    pods = outputs["kubectl get pods -n spur"].splitlines()
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert len(pods) > 4 and all(row.split()[1:3] == ["1/1", "Running"] for row in pods[1:])
    if _uts_available():
        one = outputs["kubectl logs statefulset/spurctld -n spur"]
        assert "spurctld listening on" in one and "raft node 1 " in one  # spurctld-0 is member 1
        every = outputs["kubectl logs -n spur -l app.kubernetes.io/name=spurctld --prefix"]
        for i in range(3):
            assert f"[pod/spurctld-{i}/spurctld] " in every
        assert re.search(r"^\[pod/spurctld-\d/spurctld\] .*leader for term \d+$", every, flags=re.M)


def _run_the_cluster(kubelet: HttpKubelet, controllers: StatefulSetControllers, shell) -> None:
    """What the cluster does between applying the manifests and checking them: a GPU node joins,
    the kubelet starts every pod, and the three controllers run (really, when UTS namespaces can be
    made here) and elect a leader."""
    kubelet.add_node("gpu-node-1", {"cpu": "64", "memory": "512Gi", "amd.com/gpu": "8"})
    names = shell("kubectl get pods -n spur -o jsonpath='{.items[*].metadata.name}'", ROOT).stdout.split()
    for name in names:
        kubelet.set_pod_phase("spur", name, "Running")
    if _uts_available():
        controllers.start(3)
        controllers.wait_leader()
