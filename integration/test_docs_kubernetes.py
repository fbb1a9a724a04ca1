"""docs/kubernetes.md, command by command: every shell command in it is either run here, in the
order the guide gives, against the Kubernetes API double with the real kubectl (as a shell runs
it: pipes and line continuations included), or skipped with the reason it cannot run here.

The walk-through acts as the cluster's kubelet where the guide expects pods to run, and runs the
StatefulSet's three controllers as real spurctld processes (hostnames spurctld-0..2, see
``integration.k8s_harness``) whose output is what ``kubectl logs`` shows (where UTS namespaces
cannot be made, one plain spurctld stands in for them), and the operator's Deployment as a real
``spur-k8s-operator`` process. ``kubectl exec`` into a controller pod runs the command in that
pod's environment (the Spur CLI pointed at the controllers), as the double's exec does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from integration.harness import BIN, Cluster, Proc, free_port, wait_for
from integration.k8s_harness import StatefulSetControllers, kubeapi_process
from integration.kubeapi import HttpKubelet
from integration.kubeapi.kubectl import KUBECTL, kubeconfig_text

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "kubernetes.md"

RUN = "run"
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
    ("spur cert init --dir spur-tls --cluster spur-k8s", RUN),
    (
        "spur cert issue spur-k8s --dir spur-tls --dns spurctld.spur.svc.cluster.local "
        "--dns '*.spurctld.spur.svc.cluster.local'",
        RUN,
    ),
    (
        "kubectl create secret generic spur-tls --from-file=ca.crt=spur-tls/ca.crt "
        "--from-file=tls.crt=spur-tls/spur-k8s.crt --from-file=tls.key=spur-tls/spur-k8s.key -n spur",
        RUN,
    ),
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
    ("kubectl get spurjob training-run -o jsonpath='{.status.state}'", RUN),
    ("kubectl get pods -l spur.amd.com/spurjob=training-run", RUN),
    ("kubectl delete spurjob training-run", RUN),
    ("sacctmgr add account myaccount", RUN),
    ("kubectl get resourcequota spur-quota -n spur-acct-myaccount", RUN),
    ("sacctmgr modify account name=myaccount set grptres=cpu=16,mem=32768,gres/gpu=8", RUN),
    ("kubectl get resourcequota spur-quota -n spur-acct-myaccount -o jsonpath='{.spec.hard}'", RUN),
    ("kubectl get pods -n spur", RUN),
    ("kubectl logs statefulset/spurctld -n spur", RUN),
    ("kubectl logs -n spur -l app.kubernetes.io/name=spurctld --prefix", RUN),
    ("kubectl exec -n spur spurctld-0 -- spur nodes", RUN),
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
    with kubeapi_process(tmp_path, "--logs-dir", str(logs), "--exec-env-dir", str(logs)) as url:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(kubeconfig_text(url, "spur-docs-token"))

        def shell(command: str, cwd: Path, extra: dict | None = None) -> subprocess.CompletedProcess:
            env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
            env.update(HOME=tempfile.mkdtemp(dir=tmp_path), KUBECONFIG=str(kubeconfig), **(extra or {}))
            proc = subprocess.run(
                ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
            )
            assert proc.returncode == 0, f"{command}\nexited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
            return proc

        kubelet = HttpKubelet(url)
        outputs: dict[str, str] = {}
        spur = _Spur(tmp_path, url, controllers, kubelet, logs)
        try:
            for command, how in PLAN:
                if how != RUN:
                    continue
                spur.before(command, shell)
                extra = spur.cli_env() if command.startswith(("sacctmgr", "spur cert")) else {}
                # job.yaml and the certificates (spur-tls/) are the user's files, written in a work directory.
                in_work = "job.yaml" in command or "spur-tls" in command
                outputs[command] = shell(command, work if in_work else ROOT, extra).stdout
                spur.after(command, outputs[command])
        finally:
            kubelet.close()
            spur.stop()
            controllers.stop()

    assert outputs["kubectl apply -f examples/k8s/spurjob-crd.yaml"] == (
        "customresourcedefinition.apiextensions.k8s.io/spurjobs.spur.amd.com created\n"
    )
    assert "secret/spur-config" in outputs[PLAN[15][0]]
    assert outputs[PLAN[9][0]] == "secret/spur-tls created\n"
    assert (
        "[tls]" in outputs[PLAN[7][0]]
        and (work / "spur-tls" / "spur-k8s.key").stat().st_mode & 0o777 == 0o600
    )
    assert (
        outputs["kubectl rollout restart statefulset/spurctld -n spur"]
        == "statefulset.apps/spurctld restarted\n"
    )
    assert outputs["kubectl apply -f job.yaml"] == "spurjob.spur.amd.com/training-run created\n"
    assert outputs["kubectl get spurjob training-run -o jsonpath='{.status.state}'"] == "RUNNING"
    job_pods = outputs["kubectl get pods -l spur.amd.com/spurjob=training-run"].splitlines()
    assert [row.split()[:3] for row in job_pods[1:]] == [
        [f"spur-job-{spur.job_id}-0", "1/1", "Running"],
        [f"spur-job-{spur.job_id}-1", "1/1", "Running"],
    ]
    assert outputs["kubectl delete spurjob training-run"] == 'spurjob.spur.amd.com "training-run" deleted\n'
    quota = outputs["kubectl get resourcequota spur-quota -n spur-acct-myaccount"].splitlines()
    assert quota[0].split()[:2] == ["NAME", "AGE"] and quota[1].split()[0] == "spur-quota"
    assert json.loads(
        outputs["kubectl get resourcequota spur-quota -n spur-acct-myaccount -o jsonpath='{.spec.hard}'"]
    ) == {
        "limits.cpu": "16",
        "limits.memory": "32Gi",  # stored canonical, as the guide says
        "requests.amd.com/gpu": "8",
        "requests.cpu": "16",
        "requests.memory": "32Gi",
    }
    nodes = outputs["kubectl exec -n spur spurctld-0 -- spur nodes"].splitlines()
    assert nodes[0].split() == ["PARTITION", "AVAIL", "TIMELIMIT", "NODES", "STATE", "NODELIST"]
    assert nodes[1].split()[3:] == ["2", "idle", "gpu-node-[1-2]"]
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


class _Spur:
    """The parts of the cluster the guide's commands expect to be running: the controllers (the
    StatefulSet's processes, or one stand-in), the operator (the Deployment's process) and the
    kubelet's side of the job's pods."""

    def __init__(
        self, tmp: Path, url: str, controllers: StatefulSetControllers, kubelet: HttpKubelet, logs: Path
    ) -> None:
        self.tmp = tmp
        self.url = url
        self.controllers = controllers
        self.kubelet = kubelet
        self.logs = logs
        self.addresses: list[str] = []
        self.operator: Proc | None = None
        self.stand_in: Cluster | None = None
        self.job_id = 0

    def cli_env(self) -> dict[str, str]:
        return {"SPUR_CONTROLLER": ",".join(self.addresses), "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}

    def start(self) -> None:
        """A GPU node pair joins; the controllers run and elect a leader; the operator starts."""
        for name in ("gpu-node-1", "gpu-node-2"):
            self.kubelet.add_node(name, {"cpu": "64", "memory": "512Gi", "amd.com/gpu": "8"})
        if _uts_available():
            self.controllers.start(3)
            self.controllers.wait_leader()
            self.addresses = list(self.controllers.addresses)
        else:
            (self.tmp / "stand-in").mkdir()
            self.stand_in = Cluster(self.tmp / "stand-in")
            self.stand_in.start_controller()
            self.addresses = [self.stand_in.address]
        # What `kubectl exec` into a controller pod finds: the CLI pointed at the controllers.
        (self.logs / "spur_spurctld-0.env").write_text(
            "".join(f"{k}={v}\n" for k, v in self.cli_env().items())
        )
        port = free_port()
        self.operator = Proc(
            [
                str(BIN / "spur-k8s-operator"),
                "--controller",
                ",".join(self.addresses),
                "--kube-api",
                self.url,
                "--listen",
                f"127.0.0.1:{port}",
                "--address",
                f"127.0.0.1:{port}",
                "--enable-quota",
                "--quota-interval",
                "0.5",
                "--poll",
                "0.3",
                "--kill-grace",
                "0",
            ],
            self.tmp / "operator.log",
            dict(os.environ),
        ).start()
        wait_for(
            lambda: {"gpu-node-1", "gpu-node-2"} <= set(self._nodes()),
            timeout=60,
            what="the operator to register the nodes (see operator.log)",
        )

    def _nodes(self) -> list[str]:
        out = subprocess.run(
            [str(BIN / "sinfo"), "-h", "-N", "-o", "%N"],
            env={**os.environ, **self.cli_env()},
            capture_output=True,
            text=True,
            timeout=30,
        )
        return out.stdout.split()

    def _get(self, path: str) -> dict:
        import httpx

        resp = httpx.get(self.url + path, timeout=10)
        return resp.json() if resp.status_code == 200 else {}

    def before(self, command: str, shell) -> None:
        if command == "kubectl apply -f job.yaml":
            self.start()
        elif command.startswith("kubectl get spurjob training-run"):
            path = "/apis/spur.amd.com/v1alpha1/namespaces/default/spurjobs/training-run"
            self.job_id = wait_for(
                lambda: self._get(path).get("status", {}).get("jobId"),
                timeout=60,
                what="the operator to submit training-run",
            )
            pods = wait_for(lambda: len(p := self._job_pods()) == 2 and p, timeout=30, what="the job's pods")
            for pod in pods:
                self.kubelet.set_pod_phase("default", pod, "Running")
            wait_for(lambda: self._get(path).get("status", {}).get("state") == "RUNNING", timeout=30)
        elif command == "kubectl get resourcequota spur-quota -n spur-acct-myaccount":
            wait_for(lambda: self._get(self._quota_path()), timeout=30, what="the account's quota")
        elif command.startswith("kubectl get resourcequota spur-quota -n spur-acct-myaccount -o"):
            wait_for(
                lambda: "requests.cpu" in self._get(self._quota_path()).get("spec", {}).get("hard", {}),
                timeout=30,
                what="the quota to follow GrpTRES",
            )
        elif command == "kubectl get pods -n spur":
            names = shell(
                "kubectl get pods -n spur -o jsonpath='{.items[*].metadata.name}'", ROOT
            ).stdout.split()
            for name in names:
                self.kubelet.set_pod_phase("spur", name, "Running")

    def after(self, command: str, output: str) -> None:
        if command == "kubectl get resourcequota spur-quota -n spur-acct-myaccount":
            assert self._get(self._quota_path())["spec"]["hard"] == {"pods": "0"}
        if command == "kubectl delete spurjob training-run":

            def state() -> str:
                return subprocess.run(
                    [str(BIN / "sacct"), "-X", "-n", "-P", "-j", str(self.job_id), "-o", "State"],
                    env={**os.environ, **self.cli_env()},
                    capture_output=True,
                    text=True,
                    timeout=30,
                ).stdout

            wait_for(lambda: state().startswith("CANCELLED"), timeout=30, what="the job to end CANCELLED")
            wait_for(lambda: self._job_pods() == [], timeout=30, what="the job's pods to be deleted")

    @staticmethod
    def _quota_path() -> str:
        return "/api/v1/namespaces/spur-acct-myaccount/resourcequotas/spur-quota"

    def _job_pods(self) -> list[str]:
        listed = self._get(
            "/api/v1/namespaces/default/pods?labelSelector=spur.amd.com%2Fspurjob%3Dtraining-run"
        )
        return sorted(p["metadata"]["name"] for p in listed.get("items", []))

    def stop(self) -> None:
        if self.operator is not None:
            self.operator.kill()
        if self.stand_in is not None:
            self.stand_in.stop()
