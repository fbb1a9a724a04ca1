"""Playing kubelet and the node lifecycle: the status a pod or node reports in each situation.

The builders (``pod_status``, ``node_status``) are pure. ``Kubelet`` applies them to an in-process
``Store``; ``HttpKubelet`` applies them to a double in another process through the API itself
(``PUT .../status``, as a real kubelet does), so both test styles drive pods the same way.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from integration.kubeapi.resources import BUILTIN
from integration.kubeapi.store import Store, rfc3339

PHASES = ("Pending", "Running", "Succeeded", "Failed")
_PODS = next(rt for rt in BUILTIN if rt.key == ("", "pods"))
_NODES = next(rt for rt in BUILTIN if rt.key == ("", "nodes"))


def pod_status(
    pod: dict[str, Any],
    phase: str,
    *,
    now: float,
    exit_code: int | None = None,
    reason: str | None = None,
    message: str | None = None,
    pod_ip: str = "10.244.0.10",
) -> dict[str, Any]:
    """The status kubelet reports for ``pod`` in ``phase``.

    ``Running``: every container running and ready. ``Succeeded``/``Failed``: every container
    terminated with ``exit_code`` (default 0 / 1) and ``reason`` (default Completed / Error; use
    ``OOMKilled`` with 137 for an out-of-memory kill). ``Failed`` with ``DeadlineExceeded``: the pod
    outlived ``activeDeadlineSeconds``: the pod's own reason says so and its containers were killed
    (137, Error). ``Pending`` with a ``reason`` such as
    ``ErrImagePull`` or ``ImagePullBackOff``: containers waiting with that reason and ``message``.
    """
    if phase not in PHASES:
        raise ValueError(f"unknown pod phase {phase!r} (one of {', '.join(PHASES)})")
    stamp = rfc3339(now)
    status = copy.deepcopy(pod.get("status") or {})
    containers = (pod.get("spec") or {}).get("containers") or []
    running = phase == "Running"
    statuses = []
    for c in containers:
        entry: dict[str, Any] = {
            "name": c.get("name", ""),
            "image": c.get("image", ""),
            "imageID": "",
            "ready": running,
            "restartCount": 0,
            "started": running,
        }
        if phase == "Running":
            entry["state"] = {"running": {"startedAt": stamp}}
        elif phase in ("Succeeded", "Failed"):
            code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
            why = reason or ("Completed" if phase == "Succeeded" else "Error")
            if reason == "DeadlineExceeded":
                code, why = 137, "Error"
            term = {
                "exitCode": code,
                "reason": why,
                "startedAt": status.get("startTime", stamp),
                "finishedAt": stamp,
            }
            if message:
                term["message"] = message
            entry["state"] = {"terminated": term}
        else:
            waiting: dict[str, Any] = {"reason": reason or "ContainerCreating"}
            if message:
                waiting["message"] = message
            entry["state"] = {"waiting": waiting}
        statuses.append(entry)
    status["phase"] = phase
    status["containerStatuses"] = statuses
    if phase == "Failed" and reason == "DeadlineExceeded":
        status["reason"] = "DeadlineExceeded"
        status["message"] = "Pod was active on the node longer than the specified deadline"
    status.setdefault("startTime", stamp)
    if phase != "Pending":
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    status["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp},
        {"type": "Initialized", "status": "True", "lastTransitionTime": stamp},
        {"type": "ContainersReady", "status": "True" if running else "False", "lastTransitionTime": stamp},
        {"type": "Ready", "status": "True" if running else "False", "lastTransitionTime": stamp},
    ]
    return status


def node_status(
    node: dict[str, Any], *, ready: bool, now: float, allocatable: dict[str, str] | None = None
) -> dict[str, Any]:
    """The status of a node whose kubelet reports Ready (or NotReady), with its allocatable resources."""
    stamp = rfc3339(now)
    status = copy.deepcopy(node.get("status") or {})
    if allocatable is not None:
        status["allocatable"] = dict(allocatable)
        status["capacity"] = dict(allocatable)
    status.setdefault(
        "nodeInfo", {"kubeletVersion": "v1.32.0", "architecture": "amd64", "operatingSystem": "linux"}
    )
    status["addresses"] = status.get("addresses") or [
        {"type": "Hostname", "address": node["metadata"]["name"]},
        {"type": "InternalIP", "address": "10.0.0.1"},
    ]
    status["conditions"] = [
        {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": "kubelet is posting ready status" if ready else "container runtime is down",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
    ]
    return status


def new_node(name: str, allocatable: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Node object as it is first registered (status is set separately)."""
    node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels}, "spec": {}}


class Kubelet:
    """Acts as every node's kubelet against an in-process ``Store``."""

    def __init__(self, store: Store, clock: Any = time.time) -> None:
        self.store = store
        self.clock = clock

    def set_pod_phase(self, namespace: str, name: str, phase: str, **kwargs: Any) -> dict[str, Any]:
        pod = self.store.get(_PODS, namespace, name)
        pod["status"] = pod_status(pod, phase, now=self.clock(), **kwargs)
        return self.store.update(_PODS, namespace, name, pod, subresource="status")

    def confirm_deletion(self, namespace: str, name: str) -> None:
        """The pod's containers have stopped: finish its graceful deletion (grace period 0)."""
        self.store.delete(_PODS, namespace, name, {"gracePeriodSeconds": 0})

    def write_log(self, namespace: str, name: str, text: str) -> None:
        """Append ``text`` to what ``kubectl logs`` shows for the pod (its containers' output)."""
        self.store.get(_PODS, namespace, name)
        key = (namespace, name)
        self.store.pod_logs[key] = self.store.pod_logs.get(key, "") + text

    def add_node(
        self,
        name: str,
        allocatable: dict[str, str],
        *,
        ready: bool = True,
        labels: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        created = self.store.create(_NODES, None, new_node(name, allocatable, labels))
        created["status"] = node_status(created, ready=ready, now=self.clock(), allocatable=allocatable)
        return self.store.update(_NODES, None, name, created, subresource="status")

    def set_node_ready(self, name: str, ready: bool) -> dict[str, Any]:
        node = self.store.get(_NODES, None, name)
        node["status"] = node_status(node, ready=ready, now=self.clock())
        return self.store.update(_NODES, None, name, node, subresource="status")

    def cordon(self, name: str, unschedulable: bool = True) -> dict[str, Any]:
        return self.store.patch(
            _NODES,
            None,
            name,
            "application/merge-patch+json",
            {"spec": {"unschedulable": unschedulable or None}},
        )


class HttpKubelet:
    """The same operations against a double in another process, or a real API server, through the API."""

    def __init__(
        self, base_url: str, token: str | None = None, clock: Any = time.time, verify: Any = True
    ) -> None:
        """``verify``: an ``ssl.SSLContext`` trusting an https server (the real kube-apiserver)."""
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(
            base_url=base_url, headers=headers, timeout=10, verify=verify, trust_env=verify is True
        )
        self.nodes: list[str] = []  # added by this kubelet (a shared real server removes them after a test)
        self.clock = clock

    def close(self) -> None:
        self.http.close()

    def _ok(self, resp: Any) -> dict[str, Any]:
        if resp.status_code >= 400:
            raise RuntimeError(f"{resp.request.method} {resp.request.url}: {resp.status_code} {resp.text}")
        return resp.json()

    def set_pod_phase(self, namespace: str, name: str, phase: str, **kwargs: Any) -> dict[str, Any]:
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        pod = self._ok(self.http.get(path))
        pod["status"] = pod_status(pod, phase, now=self.clock(), **kwargs)
        return self._ok(self.http.put(f"{path}/status", json=pod))

    def confirm_deletion(self, namespace: str, name: str) -> None:
        """The pod's containers have stopped: finish its graceful deletion (grace period 0)."""
        resp = self.http.request(
            "DELETE",
            f"/api/v1/namespaces/{namespace}/pods/{name}",
            json={"kind": "DeleteOptions", "gracePeriodSeconds": 0},
        )
        self._ok(resp)

    def add_node(
        self,
        name: str,
        allocatable: dict[str, str],
        *,
        ready: bool = True,
        labels: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        created = self._ok(self.http.post("/api/v1/nodes", json=new_node(name, allocatable, labels)))
        self.nodes.append(name)
        created["status"] = node_status(created, ready=ready, now=self.clock(), allocatable=allocatable)
        return self._ok(self.http.put(f"/api/v1/nodes/{name}/status", json=created))

    def set_node_ready(self, name: str, ready: bool) -> dict[str, Any]:
        node = self._ok(self.http.get(f"/api/v1/nodes/{name}"))
        node["status"] = node_status(node, ready=ready, now=self.clock())
        return self._ok(self.http.put(f"/api/v1/nodes/{name}/status", json=node))

    def cordon(self, name: str, unschedulable: bool = True) -> dict[str, Any]:
        return self._ok(
            self.http.patch(
                f"/api/v1/nodes/{name}",
                content=b'{"spec":{"unschedulable":%s}}' % (b"true" if unschedulable else b"null"),
                headers={"Content-Type": "application/merge-patch+json"},
            )
        )
