"""``spur k8s remove-nodes``: take workers out of a running scoped cluster, gracefully.

For each node, in order: refuse what :func:`spur.k8s.cluster.planner.check_removal` refuses (a node of
a whole-inventory cluster, a node outside the cluster, a control plane, the last worker) and a node
running Spur jobs (``--force`` skips only that guard; the jobs keep running); mark it as being
removed; cordon it and evict its pods through the Kubernetes API (evictions honour
PodDisruptionBudgets; a blocked eviction is retried until ``--drain-timeout``, after which the
removal stops there unless ``--force``, which then deletes the remaining pods); then stop k0s, run
``k0s reset`` and delete the Kubernetes Node; finally forget the node. DaemonSet pods are not
evicted (their controller would put them back).
"""

from __future__ import annotations

import time
import urllib.parse
from typing import TYPE_CHECKING

import trio

from spur.k8s.cluster.planner import PlanError, ScopeRequest, check_removal, resolve_scope
from spur.rpc.proto import k0s_pb2
from spur.rpc.proto import k8s_pb2 as kpb
from spur.rpc.status import RpcError, StatusCode
from spur.state import k8s_cluster as k

if TYPE_CHECKING:
    from spur.k8s.cluster.host import ClusterServiceHost
    from spur.k8s.cluster.kubeclient import KubeClient
    from spur.state.machine import ClusterState

DEFAULT_DRAIN_TIMEOUT = 120.0
RETRY_SECS = 1.0


def running_jobs_on(state: ClusterState, node: str) -> list[int]:
    from spur.core.job import JobState

    return sorted(
        job.job_id
        for job in state.jobs.values()
        if job.state in (JobState.RUNNING, JobState.COMPLETING, JobState.SUSPENDED)
        and any(a.node == node for a in job.allocation)
    )


def _evictable(pod: dict) -> bool:
    meta = pod.get("metadata", {})
    if "kubernetes.io/config.mirror" in meta.get("annotations", {}):
        return False
    return not any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences", []))


def eviction_version(client: KubeClient) -> str:
    """The Eviction API version the server takes: ``policy/v1`` (Kubernetes 1.22+), else
    ``policy/v1beta1`` (a 1.21 or older server answers 400 to a policy/v1 Eviction), as kubectl
    drain picks it from discovery."""
    from spur.k8s.cluster.kubeclient import KubeError

    try:
        client.request("GET", "/apis/policy/v1")
    except KubeError as exc:
        if exc.status == 404:
            return "policy/v1beta1"
        raise
    return "policy/v1"


def drain(client: KubeClient, node: str, timeout: float, force: bool) -> str:
    """Blocking: cordon ``node`` and evict its pods. Returns what happened; raises KubeError, or
    PlanError when a PodDisruptionBudget (or slow pods) blocks past ``timeout`` without ``force``."""
    from spur.k8s.cluster.kubeclient import KubeError

    path = f"/api/v1/nodes/{urllib.parse.quote(node)}"
    try:
        client.request("PATCH", path, {"spec": {"unschedulable": True}}, "application/merge-patch+json")
    except KubeError as exc:
        if exc.status == 404:
            return "not a Kubernetes node (never joined); nothing to drain"
        raise
    deadline = time.monotonic() + timeout
    version = eviction_version(client)
    selector = urllib.parse.quote(f"spec.nodeName={node}")
    forced = 0
    while True:
        pods = [p for p in client.request("GET", f"/api/v1/pods?fieldSelector={selector}").get("items", [])
                if _evictable(p)]
        if not pods:
            return "drained" + (f" ({forced} pod(s) deleted past a PodDisruptionBudget or the timeout)" if forced else "")
        blocked = []
        for pod in pods:
            ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            if pod["metadata"].get("deletionTimestamp"):
                continue
            pod_path = f"/api/v1/namespaces/{urllib.parse.quote(ns)}/pods/{urllib.parse.quote(name)}"
            try:
                client.request("POST", f"{pod_path}/eviction", {
                    "apiVersion": version, "kind": "Eviction", "metadata": {"name": name, "namespace": ns}})
            except KubeError as exc:
                if exc.status == 404:
                    continue
                if exc.status != 429:
                    raise
                blocked.append(f"{ns}/{name}")
                if force and time.monotonic() >= deadline:
                    client.request("DELETE", pod_path)
                    forced += 1
        if time.monotonic() >= deadline and not force:
            what = f"evicting {', '.join(blocked)} would violate a PodDisruptionBudget" if blocked else \
                f"{len(pods)} pod(s) still terminating"
            raise PlanError(
                f"drain of {node} timed out after {timeout:g}s: {what}; the node stays cordoned and in the "
                "cluster (--force evicts past the budget)"
            )
        time.sleep(RETRY_SECS)


async def remove_nodes(svc: ClusterServiceHost, request: kpb.K8sNodesRequest) -> kpb.K8sNodesResponse:
    from spur.k8s.cluster.kubeclient import KubeClient, KubeError, parse_kubeconfig
    from spur.k8s.cluster.kubeconfig import admin_kubeconfig

    rec = svc.record
    if rec.phase == k.DOWN:
        raise RpcError(StatusCode.FAILED_PRECONDITION, "the cluster is down; there is nothing to remove")
    try:
        scope = ScopeRequest(request.nodes, request.partition, tuple(request.selectors))
        if scope.empty:
            raise PlanError("name the nodes to remove with --nodes")
        names = list(resolve_scope(scope, svc._inventory()))
        check_removal(names, scoped=rec.scoped, roles={n: node.role for n, node in rec.nodes.items()})
    except PlanError as exc:
        raise RpcError(StatusCode.FAILED_PRECONDITION, str(exc)) from None
    if not request.force:
        for name in names:
            jobs = running_jobs_on(svc.ctl.state, name)
            if jobs:
                raise RpcError(
                    StatusCode.FAILED_PRECONDITION,
                    f"node {name} is running Spur jobs ({', '.join(map(str, jobs))}); drain it for Spur first "
                    "(spur node drain) or pass --force (the jobs keep running)",
                )
    timeout = request.drain_timeout_secs or DEFAULT_DRAIN_TIMEOUT
    client = KubeClient(parse_kubeconfig(await admin_kubeconfig(svc)))
    notes = []
    for name in names:
        await svc.ctl.propose(k.K8sForgetNode(name, forget=False, time=svc.ctl.clock.wall()))
        try:
            how = await trio.to_thread.run_sync(drain, client, name, timeout, request.force)
        except PlanError as exc:
            raise RpcError(StatusCode.DEADLINE_EXCEEDED, str(exc)) from None
        except KubeError as exc:
            raise RpcError(StatusCode.UNAVAILABLE, f"drain of {name} failed: {exc}") from None
        for method, req in (("Stop", k0s_pb2.K0sStopRequest()), ("Reset", k0s_pb2.K0sResetRequest())):
            try:
                await svc._call_agent(name, method, req, 300.0)
            except RpcError as exc:
                raise RpcError(exc.code, f"{method.lower()} of k0s on {name} failed: {exc.message}") from None
        try:
            await trio.to_thread.run_sync(client.request, "DELETE", f"/api/v1/nodes/{urllib.parse.quote(name)}")
        except KubeError as exc:
            if exc.status != 404:
                raise RpcError(StatusCode.UNAVAILABLE, f"deleting Kubernetes node {name} failed: {exc}") from None
        await svc.ctl.propose(k.K8sForgetNode(name, forget=True, time=svc.ctl.clock.wall()))
        notes.append(f"{name}: {how}, k0s stopped and reset")
    return kpb.K8sNodesResponse(nodes=names, message="removed " + "; ".join(notes))
