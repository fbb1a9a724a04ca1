"""The real kubectl (v1.32) against the Kubernetes API double: the deployment guide's commands and
the everyday verbs the operator's users run (get/watch/delete/patch/cordon/drain).

Each kubectl call gets a fresh HOME (no discovery cache carried over) and a kubeconfig with a token
user pointing at the double over plain http.
"""

from __future__ import annotations

import base64
import json
import shlex
import subprocess
from pathlib import Path

import pytest
import trio

from integration.k8s_harness import kubeapi_process
from integration.kubeapi import HttpKubelet, KubeAPI
from integration.kubeapi.kubectl import EXAMPLES, KUBECTL, Kubectl

ROOT = EXAMPLES.parents[1]

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

#: docs/kubernetes.md's SpurJob, as the deployment guide writes it.
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

#: The deployment guide's Deploy section, in order, exactly as written there.
DEPLOY = [
    "kubectl apply -f examples/k8s/namespace.yaml",
    "kubectl apply -f examples/k8s/rbac.yaml",
    "kubectl apply -f examples/k8s/spurjob-crd.yaml",
    "kubectl create secret generic spur-config --from-file=spur.conf=examples/k8s/spur.conf -n spur",
    "kubectl create secret generic spur-tls --from-file=ca.crt=spur-tls/ca.crt "
    "--from-file=tls.crt=spur-tls/spur-k8s.crt --from-file=tls.key=spur-tls/spur-k8s.key -n spur",
    "kubectl apply -f examples/k8s/spurctld.yaml",
    "kubectl apply -f examples/k8s/spurd.yaml",
    "kubectl apply -f examples/k8s/operator.yaml",
    "kubectl apply -f examples/k8s/pdb.yaml",
]


@pytest.fixture
def api_process(tmp_path: Path):
    """The double as its own process (``python -m integration.kubeapi --port 0``); yields its URL."""
    with kubeapi_process(tmp_path, "--bookmark-interval", "0.2") as url:
        yield url


@pytest.fixture
async def api(nursery) -> KubeAPI:
    double = KubeAPI(bookmark_interval=0.2)
    await nursery.start(double.serve)
    return double


@pytest.fixture
def kubectl(api: KubeAPI, tmp_path: Path) -> Kubectl:
    assert api.url
    return Kubectl(api.url, tmp_path / "kube", cwd=ROOT)


def _run_as_written(k: Kubectl, command: str) -> subprocess.CompletedProcess:
    argv = shlex.split(command)
    assert argv[0] == "kubectl"
    return k(*argv[1:])


def test_deploy_sequence_as_written_then_pods_run(api_process: str, tmp_path: Path) -> None:
    k = Kubectl(api_process, tmp_path / "kube", cwd=ROOT)
    # The guide's `spur cert` commands write spur-tls/ in the user's directory: here, tmp_path.
    from spur.rpc.certs import ensure_ca, issue

    ensure_ca(tmp_path / "spur-tls", cluster_name="spur-k8s")
    issue(tmp_path / "spur-tls", "spur-k8s", dns=["spurctld.spur.svc.cluster.local"])
    in_tmp = Kubectl(api_process, tmp_path / "kube", cwd=tmp_path)
    outputs = [_run_as_written(in_tmp if "spur-tls/" in c else k, c).stdout for c in DEPLOY]
    assert outputs == [
        "namespace/spur created\n",
        "serviceaccount/spur-operator created\n"
        "clusterrole.rbac.authorization.k8s.io/spur-operator created\n"
        "role.rbac.authorization.k8s.io/spur-operator created\n"
        "rolebinding.rbac.authorization.k8s.io/spur-operator created\n"
        "clusterrolebinding.rbac.authorization.k8s.io/spur-operator created\n",
        "customresourcedefinition.apiextensions.k8s.io/spurjobs.spur.amd.com created\n",
        "secret/spur-config created\n",
        "secret/spur-tls created\n",
        "service/spurctld created\nstatefulset.apps/spurctld created\n",
        "configmap/spurd-config created\ndaemonset.apps/spurd created\n",
        "deployment.apps/spur-k8s-operator created\n",
        "poddisruptionbudget.policy/spurctld created\n",
    ]
    conf = k("get", "secret", "spur-config", "-n", "spur", "-o", "jsonpath={.data.spur\\.conf}").stdout
    assert base64.b64decode(conf) == (EXAMPLES / "spur.conf").read_bytes()

    # The StatefulSet's three controllers exist (Pending until a kubelet runs them).
    table = _run_as_written(k, "kubectl get pods -n spur").stdout.splitlines()
    assert table[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert {"spurctld-0", "spurctld-1", "spurctld-2"} <= set(rows)
    assert any(name.startswith("spur-k8s-operator-") for name in rows)
    assert rows["spurctld-0"][1:3] == ["0/1", "Pending"]

    # A node joins: the DaemonSet gets a spurd pod on it; a kubelet runs everything.
    kubelet = HttpKubelet(api_process)
    try:
        kubelet.add_node("gpu-1", {"cpu": "64", "memory": "512Gi", "amd.com/gpu": "8"})
        pods = k("get", "pods", "-n", "spur", "-o", "jsonpath={.items[*].metadata.name}").stdout.split()
        assert any(p.startswith("spurd-") for p in pods)
        for pod in pods:
            kubelet.set_pod_phase("spur", pod, "Running")
    finally:
        kubelet.close()
    table = _run_as_written(k, "kubectl get pods -n spur").stdout.splitlines()[1:]
    assert len(table) == len(pods) and all(line.split()[1:3] == ["1/1", "Running"] for line in table)

    # Re-applying an unchanged manifest changes nothing.
    assert _run_as_written(k, "kubectl apply -f examples/k8s/spurctld.yaml").stdout == (
        "service/spurctld unchanged\nstatefulset.apps/spurctld unchanged\n"
    )


async def test_spurjob_apply_and_status_through_the_status_subresource(
    api: KubeAPI, kubectl: Kubectl, tmp_path: Path
) -> None:
    await kubectl.run("apply", "-f", "examples/k8s/spurjob-crd.yaml")
    (tmp_path / "job.yaml").write_text(TRAINING_RUN)
    out = await kubectl.run("apply", "-f", str(tmp_path / "job.yaml"))
    assert out.stdout == "spurjob.spur.amd.com/training-run created\n"
    state = ["get", "spurjob", "training-run", "-o", "jsonpath={.status.state}"]
    assert (await kubectl.run(*state)).stdout == ""

    # what the operator will do: a merge patch of the status subresource over HTTP
    import httpx

    status = {
        "status": {"state": "RUNNING", "jobId": 42, "nodes": "gpu-[1-2]"},
        "spec": {"script": "ignored"},
    }
    async with httpx.AsyncClient(base_url=api.url or "") as http:
        resp = await http.patch(
            "/apis/spur.amd.com/v1alpha1/namespaces/default/spurjobs/training-run/status",
            content=json.dumps(status),
            headers={"Content-Type": "application/merge-patch+json"},
        )
    assert resp.status_code == 200 and resp.json()["spec"]["script"].startswith("#!/bin/bash")
    assert (await kubectl.run(*state)).stdout == "RUNNING"
    table = (await kubectl.run("get", "spurjobs")).stdout.splitlines()
    assert table[0].split() == ["NAME", "STATE", "JOBID", "NODES", "AGE"]
    assert table[1].split()[:4] == ["training-run", "RUNNING", "42", "gpu-[1-2]"]

    # A user's re-apply of a changed spec keeps the status the operator wrote.
    (tmp_path / "job.yaml").write_text(TRAINING_RUN.replace("train.py", "train.py --epochs 3"))
    assert (
        await kubectl.run("apply", "-f", str(tmp_path / "job.yaml"))
    ).stdout == "spurjob.spur.amd.com/training-run configured\n"
    assert (await kubectl.run(*state)).stdout == "RUNNING"
    script = (await kubectl.run("get", "sj", "training-run", "-o", "jsonpath={.spec.script}")).stdout
    assert script.endswith("torchrun --nnodes=2 train.py --epochs 3\n")
    # kubectl sent a merge patch for the custom resource (no strategic merge for CRs).
    assert ("PATCH", "application/merge-patch+json") in {
        (m, ct) for m, p, ct in api.requests if "spurjobs/training-run" in p
    }


async def _read_until(
    stream: trio.abc.ReceiveStream, buffer: bytearray, needle: bytes, timeout: float = 20
) -> str:
    with trio.move_on_after(timeout):
        while needle not in buffer:
            chunk = await stream.receive_some(65536)
            if not chunk:
                raise AssertionError(f"stream ended before {needle!r}: {buffer.decode()!r}")
            buffer.extend(chunk)
        return buffer.decode()
    raise AssertionError(f"no {needle!r} within {timeout}s; got {buffer.decode()!r}")


async def test_get_watch_sees_changes(api: KubeAPI, kubectl: Kubectl) -> None:
    await kubectl.run("apply", "-f", "examples/k8s/spurjob-crd.yaml")
    jobs = api.store.registry.by_key("spur.amd.com", "spurjobs")
    assert jobs is not None
    api.store.create(jobs, "default", {"metadata": {"name": "watched"}, "spec": {"script": "#!/bin/sh\n"}})
    proc = await trio.lowlevel.open_process(
        kubectl.argv(["get", "spurjobs", "-w"]),
        env=kubectl.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert proc.stdout is not None
        buf = bytearray()
        await _read_until(proc.stdout, buf, b"watched")
        api.store.patch(
            jobs,
            "default",
            "watched",
            "application/merge-patch+json",
            {"status": {"state": "RUNNING", "jobId": 7}},
            subresource="status",
        )
        text = await _read_until(proc.stdout, buf, b"RUNNING")
        lines = [line.split() for line in text.splitlines() if line.strip()]
        assert lines[0][:4] == ["NAME", "STATE", "JOBID", "NODES"]
        assert lines[-1][:3] == ["watched", "RUNNING", "7"]
        api.store.create(jobs, "default", {"metadata": {"name": "second"}, "spec": {"script": "#!/bin/sh\n"}})
        await _read_until(proc.stdout, buf, b"second")
    finally:
        proc.kill()
        await proc.wait()
    watches = [p for m, p, _ in api.requests if m == "GET" and "watch=true" in p]
    assert watches and "resourceVersion=" in watches[0]  # list, then watch from the list's version


async def test_delete_waits_for_the_finalizer(api: KubeAPI, kubectl: Kubectl) -> None:
    await kubectl.run("apply", "-f", "examples/k8s/spurjob-crd.yaml")
    jobs = api.store.registry.by_key("spur.amd.com", "spurjobs")
    assert jobs is not None
    api.store.create(
        jobs,
        "default",
        {
            "metadata": {"name": "held", "finalizers": ["spur.amd.com/cancel-job"]},
            "spec": {"script": "#!/bin/sh\n"},
        },
    )
    async with trio.open_nursery() as nursery:
        result: dict = {}

        async def delete() -> None:
            result["proc"] = await kubectl.run("delete", "spurjob", "held", "--timeout=30s", check=False)

        nursery.start_soon(delete)
        with trio.fail_after(20):
            while not api.store.get(jobs, "default", "held")["metadata"].get("deletionTimestamp"):
                await trio.sleep(0.02)
        shown = await kubectl.run("get", "spurjob", "held", "-o", "jsonpath={.metadata.deletionTimestamp}")
        assert shown.stdout  # marked, still there: the finalizer holds it
        assert "proc" not in result  # kubectl delete is still waiting for it to go
        await kubectl.run(
            "patch", "spurjob", "held", "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
        )
    assert result["proc"].returncode == 0 and result["proc"].stdout == 'spurjob.spur.amd.com "held" deleted\n'
    gone = await kubectl.run("get", "spurjob", "held", check=False)
    assert gone.returncode == 1
    assert gone.stderr.strip() == 'Error from server (NotFound): spurjobs.spur.amd.com "held" not found'


STATEFULSET = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: ctl, namespace: default}
spec:
  replicas: 3
  serviceName: ctl
  selector: {matchLabels: {app: ctl}}
  template:
    metadata: {labels: {app: ctl}}
    spec:
      containers: [{name: ctl, image: "spur:test"}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: ctl, namespace: default}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: ctl}}
"""


async def test_cordon_and_drain_honour_the_disruption_budget(
    api: KubeAPI, kubectl: Kubectl, tmp_path: Path
) -> None:
    for name in ("node-a", "node-b"):
        api.kubelet.add_node(name, {"cpu": "8", "memory": "32Gi"})
    (tmp_path / "sts.yaml").write_text(STATEFULSET)
    await kubectl.run("apply", "-f", str(tmp_path / "sts.yaml"))
    pods = api.store.registry.by_key("", "pods")
    assert pods is not None
    for i in range(3):  # the scheduler's part: all three on node-a; then the kubelet runs them
        api.store.patch(
            pods, "default", f"ctl-{i}", "application/merge-patch+json", {"spec": {"nodeName": "node-a"}}
        )
        api.kubelet.set_pod_phase("default", f"ctl-{i}", "Running")

    assert (await kubectl.run("cordon", "node-b")).stdout == "node/node-b cordoned\n"
    nodes = (await kubectl.run("get", "nodes")).stdout
    assert "node-b   Ready,SchedulingDisabled" in nodes and "node-a   Ready " in nodes
    assert ("PATCH", "application/strategic-merge-patch+json") in {
        (m, ct) for m, p, ct in api.requests if p.startswith("/api/v1/nodes/node-b")
    }

    drain = await kubectl.run("drain", "node-a", "--timeout=3s", check=False)
    assert drain.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget" in drain.stderr
    running = (
        await kubectl.run(
            "get", "pods", "--field-selector", "spec.nodeName=node-a,status.phase=Running", "-o", "name"
        )
    ).stdout.split()
    assert len(running) == 2  # exactly one eviction fitted the budget (2 of 3 must stay)
    assert (
        api.store.get(api.store.registry.by_key("", "nodes"), None, "node-a")["spec"]["unschedulable"] is True
    )

    await kubectl.run("patch", "pdb", "ctl", "--type=merge", "-p", '{"spec":{"minAvailable":0}}')
    drained = await kubectl.run("drain", "node-a", "--timeout=10s")
    assert drained.stdout.rstrip().endswith("node/node-a drained")
    left = (await kubectl.run("get", "pods", "--field-selector", "spec.nodeName=node-a", "-o", "name")).stdout
    assert left == ""
    assert (await kubectl.run("uncordon", "node-a")).stdout == "node/node-a uncordoned\n"


async def test_patch_flavours(api: KubeAPI, kubectl: Kubectl) -> None:
    await kubectl.run("apply", "-f", "examples/k8s/namespace.yaml")
    await kubectl.run("apply", "-f", "examples/k8s/operator.yaml")
    image = ["get", "deploy", "spur-k8s-operator", "-n", "spur", "-o"]
    strategic = '{"spec":{"template":{"spec":{"containers":[{"name":"operator","image":"spur:2"}]}}}}'
    await kubectl.run("patch", "deployment", "spur-k8s-operator", "-n", "spur", "-p", strategic)
    got = (
        await kubectl.run(
            *image,
            "jsonpath={.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].args[0]}",
        )
    ).stdout
    assert got == "spur:2 --controller"  # strategic: the container merged by name, its args kept
    env = '{"spec":{"template":{"spec":{"containers":[{"name":"operator","env":[{"name":"EXTRA","value":"1"}]}]}}}}'
    await kubectl.run("patch", "deployment", "spur-k8s-operator", "-n", "spur", "-p", env)
    names = (await kubectl.run(*image, "jsonpath={.spec.template.spec.containers[0].env[*].name}")).stdout
    assert names == "POD_IP EXTRA"  # env merged by name
    await kubectl.run(
        "patch",
        "deployment",
        "spur-k8s-operator",
        "-n",
        "spur",
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/replicas","value":2}]',
    )
    assert (await kubectl.run(*image, "jsonpath={.spec.replicas}")).stdout == "2"
    merge = '{"spec":{"template":{"spec":{"containers":[{"name":"operator","image":"spur:3"}]}}}}'
    await kubectl.run("patch", "deployment", "spur-k8s-operator", "-n", "spur", "--type=merge", "-p", merge)
    got = (
        await kubectl.run(
            *image,
            "jsonpath={.spec.template.spec.containers[0].image}|{.spec.template.spec.containers[0].args}",
        )
    ).stdout
    assert got == "spur:3|"  # merge patch: the list was replaced whole


async def test_selectors_errors_and_namespaces(api: KubeAPI, kubectl: Kubectl) -> None:
    pods = api.store.registry.by_key("", "pods")
    assert pods is not None
    for name, labels in (("a", {"tier": "ctl"}), ("b", {"tier": "agent"}), ("c", {})):
        api.store.create(
            pods,
            "default",
            {
                "metadata": {"name": name, "labels": labels},
                "spec": {"containers": [{"name": "x", "image": "i"}]},
            },
        )
    names = ["-o", "jsonpath={.items[*].metadata.name}"]
    assert (await kubectl.run("get", "pods", "-l", "tier in (ctl,agent)", *names)).stdout == "a b"
    assert (await kubectl.run("get", "pods", "-l", "!tier", *names)).stdout == "c"
    assert (await kubectl.run("get", "pods", "-l", "tier!=ctl", *names)).stdout == "b c"
    assert (await kubectl.run("get", "pods", "--field-selector", "metadata.name=b", *names)).stdout == "b"
    bad = await kubectl.run("get", "pods", "--field-selector", "spec.bogus=1", check=False)
    assert bad.returncode == 1 and "field label not supported: spec.bogus" in bad.stderr
    missing = await kubectl.run("get", "pod", "nope", check=False)
    assert missing.stderr.strip() == 'Error from server (NotFound): pods "nope" not found'
    await kubectl.run("create", "namespace", "team")
    dup = await kubectl.run("create", "namespace", "team", check=False)
    assert dup.stderr.strip() == 'Error from server (AlreadyExists): namespaces "team" already exists'
    await kubectl.run("create", "configmap", "cfg", "-n", "team", "--from-literal=a=b")
    assert (await kubectl.run("delete", "namespace", "team")).stdout == 'namespace "team" deleted\n'
    gone = await kubectl.run("get", "configmap", "cfg", "-n", "team", check=False)
    assert gone.returncode == 1


async def test_strict_field_validation_like_the_real_server(
    api: KubeAPI, kubectl: Kubectl, tmp_path: Path
) -> None:
    await kubectl.run("apply", "-f", "examples/k8s/spurjob-crd.yaml")
    typo = (EXAMPLES / "pdb.yaml").read_text().replace("minAvailable:", "minAvailible:")
    (tmp_path / "pdb.yaml").write_text(typo.replace("namespace: spur", "namespace: default"))
    bad = await kubectl.run("apply", "-f", str(tmp_path / "pdb.yaml"), check=False)
    assert bad.returncode == 1
    assert 'strict decoding error: unknown field "spec.minAvailible"' in bad.stderr
    (tmp_path / "job.yaml").write_text(TRAINING_RUN.replace("  script: |", "  scrip: |"))
    bad = await kubectl.run("apply", "-f", str(tmp_path / "job.yaml"), check=False)
    assert bad.returncode == 1 and 'unknown field "spec.scrip"' in bad.stderr
    (tmp_path / "job.yaml").write_text(TRAINING_RUN.replace("  script: |\n", "  partition: gpu\n  x: |\n"))
    # without validation (kubectl --validate=false sends fieldValidation=Ignore) the CRD schema
    # still applies: the required script is missing
    ignored = await kubectl.run("apply", "--validate=false", "-f", str(tmp_path / "job.yaml"), check=False)
    assert ignored.returncode == 1
    assert (
        ignored.stderr.strip()
        == "The SpurJob \"training-run\" is invalid: spec: 'script' is a required property"
    )
    # ... and an undeclared field is dropped, not refused
    (tmp_path / "job.yaml").write_text(TRAINING_RUN.replace("spec:\n", "spec:\n  colour: blue\n"))
    await kubectl.run("apply", "--validate=false", "-f", str(tmp_path / "job.yaml"))
    spec = (await kubectl.run("get", "spurjob", "training-run", "-o", "jsonpath={.spec}")).stdout
    assert "colour" not in spec and "torchrun" in spec
    pdbs = api.store.registry.by_key("policy", "poddisruptionbudgets")
    assert pdbs is not None and api.store.list(pdbs, None)[0] == []  # the refused PDB was not stored


async def test_graceful_pod_deletion_waits_for_the_kubelet(nursery, tmp_path: Path) -> None:
    api = KubeAPI(graceful_pods=True)
    await nursery.start(api.serve)
    assert api.url
    kubectl = Kubectl(api.url, tmp_path / "kube", cwd=ROOT)
    api.kubelet.add_node("n1", {"cpu": "4", "memory": "8Gi"})
    pods = api.store.registry.by_key("", "pods")
    assert pods is not None
    api.store.create(
        pods,
        "default",
        {
            "metadata": {"name": "task"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
        },
    )
    api.kubelet.set_pod_phase("default", "task", "Running")
    await kubectl.run("delete", "pod", "task", "--grace-period=12", "--wait=false")
    row = (await kubectl.run("get", "pods")).stdout.splitlines()[1].split()
    assert row[:3] == ["task", "1/1", "Terminating"]
    grace = await kubectl.run("get", "pod", "task", "-o", "jsonpath={.metadata.deletionGracePeriodSeconds}")
    assert grace.stdout == "12"
    async with trio.open_nursery() as inner:
        done: dict = {}

        async def delete_and_wait() -> None:
            done["proc"] = await kubectl.run("delete", "pod", "task", "--timeout=30s")

        inner.start_soon(delete_and_wait)
        seen = len(api.requests)
        with trio.fail_after(20):  # the second kubectl asked, and now watches the pod until it goes
            while not any(m == "GET" and "watch=true" in p for m, p, _ in api.requests[seen:]):
                await trio.sleep(0.02)
        assert "proc" not in done
        assert api.store.get(pods, "default", "task")["metadata"]["deletionTimestamp"]
        api.kubelet.confirm_deletion("default", "task")
    assert done["proc"].stdout == 'pod "task" deleted\n'
    assert (await kubectl.run("get", "pods", "-o", "name")).stdout == ""


async def test_reapplying_an_edited_manifest_converges_to_the_file(
    api: KubeAPI, kubectl: Kubectl, tmp_path: Path
) -> None:
    """kubectl's three-way strategic merge patches (list items merged by key, removed ones
    deleted with ``$patch: delete``, ``$setElementOrder``) leave exactly what the file says."""
    import yaml

    await kubectl.run("apply", "-f", "examples/k8s/namespace.yaml")
    (deploy,) = yaml.safe_load_all((EXAMPLES / "operator.yaml").read_text())
    path = tmp_path / "operator.yaml"

    async def apply_and_compare() -> None:
        path.write_text(yaml.safe_dump(deploy))
        await kubectl.run("apply", "-f", str(path))
        got = json.loads(
            (await kubectl.run("get", "deploy", "spur-k8s-operator", "-n", "spur", "-o", "json")).stdout
        )
        assert (
            got["spec"]["template"]["spec"]["containers"] == deploy["spec"]["template"]["spec"]["containers"]
        )

    await apply_and_compare()
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    container["ports"] = container["ports"][1:]
    container["env"].append({"name": "SPUR_LOG", "value": "debug"})
    container["args"] = container["args"][:2]
    del container["livenessProbe"]
    deploy["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "busybox:1"})
    await apply_and_compare()
    deploy["spec"]["template"]["spec"]["containers"].pop()
    container["env"] = container["env"][1:]
    await apply_and_compare()
    patches = [ct for m, p, ct in api.requests if m == "PATCH" and "spur-k8s-operator" in p]
    assert patches == ["application/strategic-merge-patch+json"] * 2


def test_exec_runs_in_the_pods_environment(tmp_path: Path) -> None:
    envs = tmp_path / "exec-env"
    envs.mkdir()
    (envs / "default_p1.env").write_text("GREETING=hello from p1\n")
    with kubeapi_process(tmp_path, "--exec-env-dir", str(envs)) as url:
        kubectl = Kubectl(url, tmp_path / "kube")
        kubectl("run", "p1", "--image=busybox")
        kubectl("run", "p2", "--image=busybox")
        out = kubectl("exec", "p1", "--", "sh", "-c", "echo $GREETING; echo oops >&2")
        assert (out.stdout, out.stderr) == ("hello from p1\n", "oops\n")
        failed = kubectl("exec", "p1", "--", "sh", "-c", "exit 3", check=False)
        assert failed.returncode == 3 and "command terminated with exit code 3" in failed.stderr
        assert kubectl("exec", "p2", "--", "true", check=False).returncode != 0  # no environment: refused
        missing = kubectl("exec", "nope", "--", "true", check=False)
        assert missing.returncode != 0 and 'pods "nope" not found' in missing.stderr


async def test_create_deployment_is_decoded_from_protobuf(api: KubeAPI, kubectl: Kubectl) -> None:
    out = await kubectl.run("create", "deployment", "web", "--image=nginx", "--replicas=2")
    assert out.stdout == "deployment.apps/web created\n"
    posted = [ct for m, p, ct in api.requests if m == "POST" and "/deployments" in p]
    assert posted == ["application/vnd.kubernetes.protobuf"]  # kubectl's typed client, as on a cluster
    got = json.loads((await kubectl.run("get", "deployment", "web", "-o", "json")).stdout)
    assert got["spec"]["replicas"] == 2
    assert got["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    template = got["spec"]["template"]
    assert template["metadata"] == {"labels": {"app": "web"}}
    assert template["spec"]["containers"] == [{"name": "nginx", "image": "nginx", "resources": {}}]
    assert (await kubectl.run("get", "deployment", "web")).stdout.splitlines()[1].split()[0] == "web"
    pods = (await kubectl.run("get", "pods", "-l", "app=web", "-o", "name")).stdout.split()
    assert len(pods) == 2  # the double's workload controller made the Deployment's pods


def test_run_interactive_attaches_and_removes_the_pod(tmp_path: Path) -> None:
    envs = tmp_path / "exec-env"
    envs.mkdir()
    (envs / "default_probe.env").write_text("GREETING=hello from probe\n")
    with kubeapi_process(tmp_path, "--interactive-pods", "--exec-env-dir", str(envs)) as url:
        kubectl = Kubectl(url, tmp_path / "kube")
        out = kubectl(
            "run",
            "-it",
            "--rm",
            "probe",
            "--image=busybox",
            "--",
            "sh",
            input='echo "$GREETING"; echo oops >&2; exit\n',
        )
        assert out.stdout == 'hello from probe\npod "probe" deleted\n'
        assert "oops" in out.stderr
        assert kubectl("get", "pods", "-o", "name").stdout == ""
        again = kubectl("run", "-it", "--rm", "probe", "--image=busybox", "--", "sh", input="echo again\n")
        assert again.stdout == 'again\npod "probe" deleted\n'  # a new pod of the same name runs anew
        # without --rm and with restart Never, kubectl reports the container's exit status as its own
        failed = kubectl(
            "run",
            "-i",
            "--restart=Never",
            "probe2",
            "--image=busybox",
            "--",
            "sh",
            input="exit 3\n",
            check=False,
        )
        assert failed.returncode == 3, failed.stderr
        phase = kubectl("get", "pod", "probe2", "-o", "jsonpath={.status.phase}").stdout
        assert phase == "Failed"
        refused = kubectl("attach", "probe2", "-i", check=False)  # the process has ended
        assert refused.returncode != 0
        bad = kubectl(
            "run",
            "-i",
            "--restart=Never",
            "bad",
            "--image=busybox",
            "--command",
            "--",
            "/no/such/program",
            input="",
            check=False,
        )
        assert bad.returncode == 128, bad  # the container could not start: the pod Failed
        assert "failed to start container process" in bad.stderr and "/no/such/program" in bad.stderr
