"""examples/k8s/rbac.yaml grants exactly what spur-k8s-operator calls: the operator runs every part
(jobs that complete, fail and are deleted, nodes that go NotReady, are cordoned and deleted, quotas
that are created, changed and removed) against the API double in this process, which records each
request; the verbs per resource it made are the ClusterRole's rules, no more, no less."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs

import pytest
import trio
import yaml

from integration.harness import BIN, Cluster, Proc, free_port
from integration.kubeapi import KubeAPI
from integration.kubeapi.kubectl import EXAMPLES, KUBECTL, Kubectl
from integration.kubeapi.resources import parse_resource_path
from integration.operator_harness import GPU_NODE, TRAINING_RUN, spurjob
from spur.k8s.operator.kube import USER_AGENT

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def _verb(method: str, path: str) -> tuple[str, str, str] | None:
    route, _, query = path.partition("?")
    rp = parse_resource_path(route)
    if rp is None:
        return None
    resource = rp.plural + (f"/{rp.subresource}" if rp.subresource else "")
    if method == "GET":
        verb = "get" if rp.name else ("watch" if parse_qs(query).get("watch") == ["true"] else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
    return rp.group, resource, verb


def _granted() -> set[tuple[str, str, str]]:
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "rbac.yaml").read_text()) if d]
    return {
        (group, resource, verb)
        for role in docs
        if role["kind"] in ("ClusterRole", "Role")
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


async def _until(predicate, timeout: float = 30, what: str = "") -> object:
    with trio.fail_after(timeout):
        while not (value := await predicate()):
            await trio.sleep(0.1)
    return value


async def test_the_operator_calls_exactly_what_rbac_grants(nursery: trio.Nursery, tmp_path: Path) -> None:
    api = KubeAPI(bookmark_interval=0.2)
    url = await nursery.start(api.serve)
    kubectl = Kubectl(url, tmp_path / "kube", cwd=tmp_path)
    cluster = Cluster(tmp_path, conf_extra='[admission]\nmode = "token"\n')  # node credentials kept too
    await trio.to_thread.run_sync(cluster.start_controller)
    created = await trio.to_thread.run_sync(lambda: cluster.cli("spur", "token", "create", "--uses", "2"))
    token = created.stdout.split()[-1]
    operator = None
    try:
        await kubectl.run("apply", "-f", str(EXAMPLES / "namespace.yaml"))
        await kubectl.run("apply", "-f", str(EXAMPLES / "spurjob-crd.yaml"))
        api.kubelet.add_node("gpu-node-1", GPU_NODE)
        api.kubelet.add_node("gpu-node-2", GPU_NODE)
        port = free_port()
        operator = Proc(
            [
                str(BIN / "spur-k8s-operator"),
                "--controller",
                cluster.address,
                "--kube-api",
                url,
                "--listen",
                f"127.0.0.1:{port}",
                "--address",
                f"127.0.0.1:{port}",
                "--enable-quota",
                "--quota-interval",
                "0.3",
                "--poll",
                "0.2",
                "--resync",
                "1",
                "--kill-grace",
                "0",
                "--join-token",
                token,
            ],
            tmp_path / "operator.log",
            cluster.env,
        ).start()

        async def spurjob_status(name: str) -> dict:
            out = await kubectl.run("get", "spurjob", name, "-o", "json", check=False)
            return json.loads(out.stdout).get("status", {}) if out.returncode == 0 else {}

        async def pods_of(job_id: int) -> list[str]:
            out = await kubectl.run("get", "pods", "-l", f"spur.amd.com/job-id={job_id}", "-o", "name")
            return [line.split("/", 1)[1] for line in out.stdout.split()]

        async def cli(*args: str) -> None:
            await trio.to_thread.run_sync(lambda: cluster.cli(*args))

        # a multi-node job that completes, one that fails, one deleted while running
        for manifest in (
            TRAINING_RUN,
            spurjob("fails", ["#SBATCH -N 1", "false"]),
            spurjob("deleted", ["#SBATCH -N 1", "sleep 1000"]),
        ):
            (tmp_path / "m.yaml").write_text(manifest)
            await kubectl.run("apply", "-f", str(tmp_path / "m.yaml"))
        ids = {}
        for name in ("training-run", "fails", "deleted"):
            ids[name] = await _until(lambda n=name: _job_id(spurjob_status, n))
        train = await _until(lambda: _n_pods(pods_of, ids["training-run"], 2))
        for pod in train:
            api.kubelet.set_pod_phase("default", pod, "Succeeded")
        (fail,) = await _until(lambda: _n_pods(pods_of, ids["fails"], 1))
        api.kubelet.set_pod_phase("default", fail, "Failed", exit_code=1)
        await _until(lambda: _state(spurjob_status, "training-run", "COMPLETED"))
        await _until(lambda: _state(spurjob_status, "fails", "FAILED"))
        await _until(lambda: _n_pods(pods_of, ids["deleted"], 1))
        await kubectl.run("delete", "spurjob", "deleted")
        await _until(lambda: _n_pods(pods_of, ids["deleted"], 0, empty_ok=True))
        # scancel of a running job: the virtual agent deletes its pods
        (tmp_path / "m.yaml").write_text(spurjob("scancelled", ["#SBATCH -N 1", "sleep 1000"]))
        await kubectl.run("apply", "-f", str(tmp_path / "m.yaml"))
        cancelled = await _until(lambda: _job_id(spurjob_status, "scancelled"))
        await _until(lambda: _n_pods(pods_of, cancelled, 1))
        await cli("scancel", str(cancelled))
        await _until(lambda: _state(spurjob_status, "scancelled", "CANCELLED"))

        # nodes: NotReady, cordoned, deleted
        api.kubelet.set_node_ready("gpu-node-1", False)
        await kubectl.run("cordon", "gpu-node-2")
        await kubectl.run("delete", "node", "gpu-node-1")

        # quotas: created, changed, removed
        async def quota_hard() -> dict:
            out = await kubectl.run(
                "get",
                "resourcequota",
                "spur-quota",
                "-n",
                "spur-acct-acct1",
                "-o",
                "jsonpath={.spec.hard}",
                check=False,
            )
            return json.loads(out.stdout) if out.returncode == 0 and out.stdout else {}

        await cli("sacctmgr", "-i", "add", "account", "acct1")
        await _until(lambda: _equal(quota_hard, {"pods": "0"}))  # created closed
        await cli("sacctmgr", "-i", "modify", "account", "name=acct1", "set", "grptres=cpu=4")
        await _until(lambda: _equal(quota_hard, {"requests.cpu": "4", "limits.cpu": "4"}))  # updated
        # an edited LimitRange is put back
        edit = {"spec": {"limits": [{"type": "Container", "default": {"cpu": "2"}}]}}
        await kubectl.run(
            "patch",
            "limitrange",
            "spur-defaults",
            "-n",
            "spur-acct-acct1",
            "--type",
            "merge",
            "-p",
            json.dumps(edit),
        )

        async def limits_restored() -> bool:
            out = await kubectl.run(
                "get",
                "limitrange",
                "spur-defaults",
                "-n",
                "spur-acct-acct1",
                "-o",
                "jsonpath={.spec.limits[0].default.cpu}",
            )
            return out.stdout == "1"

        await _until(limits_restored)
        await cli("sacctmgr", "-i", "delete", "account", "name=acct1")

        async def quota_gone() -> bool:
            out = await kubectl.run("get", "resourcequota", "-n", "spur-acct-acct1", "-o", "name")
            return out.stdout == ""

        await _until(quota_gone)
        await trio.sleep(1)  # one more pass of every loop
    finally:
        if operator is not None:
            operator.kill()
        cluster.stop()

    used = {
        verb
        for (method, path, _), agent in zip(api.requests, api.user_agents, strict=True)
        if agent == USER_AGENT and (verb := _verb(method, path)) is not None
    }
    assert used == _granted()


async def _equal(read, want: dict) -> bool:
    return await read() == want


async def _job_id(status, name: str) -> int | None:
    return (await status(name)).get("jobId")


async def _state(status, name: str, state: str) -> bool:
    return (await status(name)).get("state") == state


async def _n_pods(pods_of, job_id: int, n: int, empty_ok: bool = False):
    pods = await pods_of(job_id)
    if len(pods) != n:
        return None
    return pods or empty_ok
