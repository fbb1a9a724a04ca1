"""spur-k8s-operator in tests: a real spurctld (loopback), an API server (the Kubernetes API double as
a process, or the session's real kube-apiserver in a namespace of the test's own), kubectl bound to
it, a kubelet driving pods and nodes through the API, and the operator itself started from the
virtualenv's console script like any daemon."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from integration.harness import BIN, Cluster, Proc, free_port, wait_for
from integration.k8s_harness import kubeapi_process
from integration.kube_real import OPERATOR_SA, RealKube
from integration.kubeapi import HttpKubelet
from integration.kubeapi.kubectl import EXAMPLES, Kubectl

GPU_NODE = {"cpu": "64", "memory": "512Gi", "amd.com/gpu": "8"}

#: The SpurJob of docs/kubernetes.md (the seed's training run).
TRAINING_RUN = """\
apiVersion: spur.amd.com/v1alpha1
kind: SpurJob
metadata:
  name: training-run
spec:
  script: |
    #!/bin/bash
    #SBATCH --job-name=train
    #SBATCH -N 2
    #SBATCH --gres=gpu:8
    torchrun --nnodes=2 train.py
"""


def spurjob(name: str, script_lines: list[str], **spec: Any) -> str:
    """A SpurJob manifest with a bash script made of ``script_lines``."""
    body = {"script": "#!/bin/bash\n" + "\n".join(script_lines) + "\n", **spec}
    return json.dumps(
        {"apiVersion": "spur.amd.com/v1alpha1", "kind": "SpurJob", "metadata": {"name": name}, "spec": body}
    )


@dataclass(frozen=True)
class KubeBackend:
    """Which API server a test runs against: ``"double"`` (integration/kubeapi, a process per test)
    or ``"real"`` (the session's kube-apiserver v1.20.2, integration/kube_real.py, with ``namespace``
    made for this test). The ``kube_backend`` fixture (integration/conftest.py) parametrizes over both."""

    name: str
    real: RealKube | None = None
    namespace: str = "default"

    @property
    def is_real(self) -> bool:
        return self.real is not None


DOUBLE = KubeBackend("double")


@dataclass
class OperatorEnv:
    root: Path
    url: str
    cluster: Cluster
    kubectl: Kubectl
    kubelet: HttpKubelet
    backend: KubeBackend = DOUBLE
    agent_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    operator: Proc | None = None
    controller_address: str = ""
    #: Static-token user the operator authenticates as on the real server (None: the admin); a real
    #: backend sets the operator's ServiceAccount (examples/k8s/rbac.yaml applied).
    operator_user: str | None = None
    #: ``--resync``: seconds between the operator's relists of SpurJobs (short, so most tests see any
    #: change within one; a test of watch resumption sets it long so that only the watch can)
    resync: float = 2.0

    @property
    def namespace(self) -> str:
        """Where this test's SpurJobs and pods are (the real server's namespace for this test)."""
        return self.backend.namespace

    def kube_args(self) -> list[str]:
        """The operator's flags for the API server: the double's URL, or the real server's URL, CA,
        a token file and ``--namespace`` (the real server is shared by the session's tests)."""
        real = self.backend.real
        if real is None:
            return ["--kube-api", self.url]
        token_file = real.token_file(self.operator_user) if self.operator_user else real.workdir / "token"
        return [
            "--kube-api",
            self.url,
            "--kube-ca",
            str(real.ca_file),
            "--kube-token-file",
            str(token_file),
            "--namespace",
            self.namespace,
        ]

    def operator_argv(self, *extra: str) -> list[str]:
        return [
            str(BIN / "spur-k8s-operator"),
            "--controller",
            f"http://{self.controller_address or self.cluster.address}",
            "--listen",
            f"127.0.0.1:{self.agent_port}",
            "--address",
            f"127.0.0.1:{self.agent_port}",
            *self.kube_args(),
            "--health-addr",
            f"127.0.0.1:{self.health_port}",
            "--image",
            "registry.example/train:1",
            "--resync",
            str(self.resync),
            "--poll",
            "0.3",
            "--kill-grace",
            "0",
            *extra,
        ]

    def start_operator(self, *extra: str, env: dict[str, str] | None = None) -> Proc:
        self.operator = Proc(
            self.operator_argv(*extra), self.root / "operator.log", {**os.environ, **(env or {})}
        ).start()
        wait_for(self._operator_up, timeout=20, what="spur-k8s-operator to listen")
        return self.operator

    def _operator_up(self) -> bool:
        if self.operator and not self.operator.alive():
            raise AssertionError(f"spur-k8s-operator exited:\n{self.operator.log()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.agent_port), 0.5):
            return True
        return False

    def apply(self, manifest: str) -> str:
        return self.kubectl("apply", "-f", "-", input=manifest).stdout

    def spurjob(self, name: str) -> dict[str, Any]:
        return json.loads(self.kubectl("get", "spurjob", name, "-o", "json").stdout)

    def state(self, name: str) -> str:
        return self.kubectl("get", "spurjob", name, "-o", "jsonpath={.status.state}").stdout

    def wait_state(self, name: str, *states: str, timeout: float = 30) -> str:
        return wait_for(
            lambda: (s := self.state(name)) in states and s,
            timeout=timeout,
            what=f"spurjob {name} to be {states} (operator log:\n{self.log_tail()})",
        )

    def pods(self, job_id: int, namespace: str | None = None) -> list[dict[str, Any]]:
        out = self.kubectl(
            "get",
            "pods",
            "-n",
            namespace or self.namespace,
            "-l",
            f"spur.amd.com/job-id={job_id}",
            "-o",
            "json",
        )
        return json.loads(out.stdout)["items"]

    def wait_pods(self, job_id: int, count: int, namespace: str | None = None) -> list[dict[str, Any]]:
        return wait_for(
            lambda: len(p := self.pods(job_id, namespace)) == count and p,
            timeout=30,
            what=f"{count} pods of job {job_id}",
        )

    def set_phase(self, pods: list[dict[str, Any]], phase: str, **kwargs: Any) -> None:
        for pod in pods:
            self.kubelet.set_pod_phase(pod["metadata"]["namespace"], pod["metadata"]["name"], phase, **kwargs)

    def start_running(self, manifest: str, name: str = "training-run", pods: int = 2) -> tuple[int, list[dict[str, Any]]]:
        """Apply a SpurJob manifest and drive it to RUNNING with its ``pods`` pods Running (as the
        kubelet would report); returns the Spur job id and the pods."""
        self.apply(manifest)
        self.wait_state(name, "RUNNING")
        job_id = self.spurjob(name)["status"]["jobId"]
        running = self.wait_pods(job_id, pods)
        self.set_phase(running, "Running")
        return job_id, running

    def log_tail(self) -> str:
        return self.operator.log()[-3000:] if self.operator else ""

    def wait_nodes(self, *names: str, state: str = "idle", timeout: float = 30) -> None:
        self.cluster.wait_nodes(*names, state=state, timeout=timeout)

    def stop(self) -> None:
        if self.operator:
            self.operator.stop()


@contextlib.contextmanager
def _api(
    tmp: Path, backend: KubeBackend, double_args: tuple[str, ...] = ()
) -> Iterator[tuple[str, Kubectl, HttpKubelet]]:
    """The API server's URL, kubectl bound to it (in the test's namespace) and a kubelet for it;
    ``double_args`` are the double's command-line flags."""
    if backend.real is None:
        with kubeapi_process(tmp, *double_args) as url:
            yield url, Kubectl(url, tmp / "kube", cwd=tmp), HttpKubelet(url)
        return
    real = backend.real
    kubectl = Kubectl(real.server, tmp / "kube", cwd=tmp, config=real.kubeconfig_text(backend.namespace))
    yield real.server, kubectl, HttpKubelet(real.server, real.token, verify=real.ssl_context())


def clean_real(env: OperatorEnv) -> None:
    """What a test leaves on the shared real server that the next could see: its nodes (cluster
    scoped) and its SpurJobs' finalizers (no operator will remove them). Its namespace stays
    Terminating (no namespace controller), which no later test looks at."""
    kubectl = env.kubectl
    for name in env.kubelet.nodes:
        kubectl("delete", "node", name, "--ignore-not-found", "--wait=false", check=False)
    listed = kubectl("get", "spurjobs", "-o", "name", check=False).stdout.split()
    for obj in listed:
        kubectl("patch", obj, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
    kubectl("delete", "namespace", env.namespace, "--wait=false", check=False)


@contextlib.contextmanager
def operator_env(
    tmp: Path,
    backend: KubeBackend = DOUBLE,
    *,
    conf_extra: str = "",
    crd: bool = True,
    start_controller: bool = True,
    double_args: tuple[str, ...] = (),
) -> Iterator[OperatorEnv]:
    """A controller (unless ``start_controller`` is false: the test brings its own and sets
    ``controller_address``) and the API server of ``backend`` (the double started with
    ``double_args``) with the SpurJob CRD applied and two GPU nodes (no operator yet)."""
    with _api(tmp, backend, double_args) as (url, kubectl, kubelet):
        cluster = Cluster(tmp, conf_extra=conf_extra)
        env = OperatorEnv(tmp, url, cluster, kubectl, kubelet, backend)
        try:
            if start_controller:
                cluster.start_controller()
            if crd:
                kubectl("apply", "-f", str(EXAMPLES / "spurjob-crd.yaml"))
                if backend.is_real:  # served once the CRD is Established
                    kubectl("wait", "--for=condition=Established", "crd/spurjobs.spur.amd.com")
            if backend.is_real:
                # the operator runs as its ServiceAccount with the example's RBAC: the real
                # authorizer refuses any call the role does not grant
                kubectl("apply", "-f", str(EXAMPLES / "namespace.yaml"), "-f", str(EXAMPLES / "rbac.yaml"))
                env.operator_user = OPERATOR_SA.name
            kubelet.add_node("gpu-node-1", GPU_NODE)
            kubelet.add_node("gpu-node-2", GPU_NODE)
            yield env
        finally:
            env.stop()
            cluster.stop()
            if backend.is_real:
                clean_real(env)
            kubelet.close()
