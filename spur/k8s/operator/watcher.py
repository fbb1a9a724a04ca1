"""The node watcher: every Kubernetes node (or those matching ``--node-selector``) as a Spur node.

It lists the nodes and registers each (:func:`spur.k8s.operator.nodes.registration`), then watches
them: a changed node is registered again when its resources changed, and its Ready/cordon state is
carried to Spur with ``UpdateNode`` (:func:`spur.k8s.operator.nodes.state_actions`); a deleted node
(or one that no longer matches the selector) is removed with ``Inventory.RemoveNode``. Heartbeats
for every registered node go out each ``heartbeat_interval_secs`` the controller asked for (at
registration, then in each heartbeat answer), listing the jobs the virtual agent runs there; a heartbeat answered ``known=false`` registers that node again.

Node credentials (``[admission] mode = "token"``): the credential the controller hands out at a node's
first admitted registration is kept in the Secret ``credential_secret`` (one key per node), read
back when the operator starts, so a restarted operator neither needs a fresh join token nor loses
its nodes; a removed node's key is dropped.

Errors, as documented: a transport error during a registration restarts the watcher, which lists
every node again (after a short backoff); a refusal that is not a transport error (for example a
missing admission token) is logged and the registration is tried again at that node's next event.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from typing import Any

import trio

from spur.core.admission import CREDENTIAL_METADATA_KEY
from spur.k8s.operator.kube import KubeClient, KubeError, WatchExpired, path_of, watch_from
from spur.k8s.operator.link import ControllerLink, TransportError
from spur.k8s.operator.nodes import (
    desired_state,
    gpu_resource,
    registration,
    selected,
    state_actions,
)
from spur.rpc.proto import inventory_pb2 as ipb
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode

__all__ = ["NodeWatcher"]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("spur")
    except PackageNotFoundError:
        return "0.1.0"


VERSION = _version()

log = logging.getLogger("spur.k8s.operator.nodes")

CONTROLLER = pb.DESCRIPTOR.services_by_name["Controller"]
INVENTORY = ipb.DESCRIPTOR.services_by_name["Inventory"]


class _Restart(Exception):
    """A transport error during a registration: start over with a full list."""


class NodeWatcher:
    def __init__(
        self,
        kube: KubeClient,
        link: ControllerLink,
        *,
        address: str,
        port: int,
        selector: dict[str, str],
        running_on: Callable[[str], list[int]],
        unreported_on: Callable[[str], list[int]],
        gpu_resources: dict[str, str],
        join_token: str = "",
        restart_backoff: float = 1.0,
        resync: float = 300.0,
        on_cluster_name: Callable[[str], None] = lambda name: None,
        credential_secret: tuple[str, str] | None = None,
        admin_metadata: Callable[[], dict[str, str] | None] = lambda: None,
    ) -> None:
        # Headers for UpdateNode, an administrator's action a daemon credential may not take.
        self.admin_metadata = admin_metadata
        self.kube = kube
        self.link = link
        self.address = address
        self.port = port
        self.selector = selector
        self.running_on = running_on
        self.unreported_on = unreported_on
        self.gpu_resources = gpu_resources
        self.join_token = join_token
        self.restart_backoff = restart_backoff
        self.resync = resync
        self.on_cluster_name = on_cluster_name
        self.credential_secret = credential_secret
        self._secret_loaded = False
        self.registered: dict[str, pb.RegisterNodeRequest] = {}
        self.credentials: dict[str, str] = {}
        self.heartbeat_interval = 30.0
        self.restarts = 0
        self.synced = trio.Event()

    def credential_metadata(self, name: str) -> dict[str, str] | None:
        credential = self.credentials.get(name)
        return {CREDENTIAL_METADATA_KEY: credential} if credential else None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._heartbeats, name="node-heartbeats")
            task_status.started()
            while True:
                try:
                    await self._list_and_watch()
                except _Restart as exc:
                    self.restarts += 1
                    log.warning("node watcher restarting after a transport error: %s", exc)
                    await trio.sleep(self.restart_backoff)
                except WatchExpired:
                    continue
                except KubeError as exc:
                    log.warning("node watch failed (%s); listing again", exc)
                    await trio.sleep(self.restart_backoff)

    def _secret_path(self, named: bool = True) -> str:
        assert self.credential_secret is not None
        namespace, name = self.credential_secret
        return path_of(plural="secrets", namespace=namespace, name=name if named else None)

    async def _load_credentials(self) -> None:
        if self.credential_secret is None or self._secret_loaded:
            return
        try:
            secret = await self.kube.get(self._secret_path())
        except KubeError as exc:
            log.warning("cannot read the node credentials in Secret %s/%s: %s", *self.credential_secret, exc)
            secret = None
        for node, value in ((secret or {}).get("data") or {}).items():
            self.credentials.setdefault(node, base64.b64decode(value).decode())
        self._secret_loaded = True

    async def _store_credential(self, name: str, credential: str | None) -> None:
        """Keep (or, with None, drop) a node's credential in the Secret; a failure is logged."""
        if self.credential_secret is None:
            return
        value = None if credential is None else base64.b64encode(credential.encode()).decode()
        try:
            try:
                await self.kube.merge_patch(self._secret_path(), {"data": {name: value}})
            except KubeError as exc:
                if exc.status != 404 or value is None:
                    raise
                namespace, secret = self.credential_secret
                await self.kube.create(
                    self._secret_path(named=False),
                    {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "metadata": {"name": secret, "namespace": namespace},
                        "type": "Opaque",
                        "data": {name: value},
                    },
                )
        except KubeError as exc:
            log.warning(
                "node %s: cannot keep its credential in Secret %s/%s: %s", name, *self.credential_secret, exc
            )

    async def _list_and_watch(self) -> None:
        await self._load_credentials()
        path = path_of(plural="nodes")
        listed = await self.kube.list(path)
        present = set()
        for node in listed.get("items") or []:
            present.add(node["metadata"]["name"])
            await self.sync(node, force=True)
        for name in [n for n in self.registered if n not in present]:
            await self.remove(name)
        self.synced.set()
        version = (listed.get("metadata") or {}).get("resourceVersion", "0")
        with trio.move_on_after(self.resync):
            async for kind, node in watch_from(self.kube, path, version):
                if kind == "DELETED":
                    await self.remove(node["metadata"]["name"])
                else:
                    await self.sync(node)

    async def sync(self, node: dict[str, Any], *, force: bool = False) -> None:
        """Register ``node`` (when new, changed or ``force``) and carry its state to Spur."""
        name = node["metadata"]["name"]
        if not selected(node, self.selector):
            if name in self.registered:
                await self.remove(name)
            return
        if not (node.get("status") or {}).get("allocatable"):
            return  # the kubelet has not reported the node's resources yet: its next event will
        resource, _vendor, _count = gpu_resource(node)
        self.gpu_resources[name] = resource
        try:
            request = registration(node, address=self.address, port=self.port, version=VERSION)
        except ValueError as exc:
            log.warning("node %s not registered: %s", name, exc)
            return
        previous = self.registered.get(name)
        if force or previous is None or _resources(previous) != _resources(request):
            if not await self._register(name, request):
                return
        await self._carry_state(name, desired_state(node))

    async def _register(self, name: str, request: pb.RegisterNodeRequest) -> bool:
        if self.join_token and name not in self.credentials:
            request.join_token = self.join_token
        try:
            response = await self.link.call(
                CONTROLLER, "RegisterNode", request, metadata=self.credential_metadata(name)
            )
        except TransportError as exc:
            raise _Restart(f"registering node {name}: {exc}") from None
        except RpcError as exc:
            self.registered.pop(name, None)
            log.warning("controller refused node %s (%s); trying again at its next event", name, exc)
            return False
        request.join_token = ""
        self.registered[name] = request
        if response.node_credential:
            self.credentials[name] = response.node_credential
            await self._store_credential(name, response.node_credential)
        if response.heartbeat_interval_secs:
            self.heartbeat_interval = float(response.heartbeat_interval_secs)
        if response.cluster_name:
            self.on_cluster_name(response.cluster_name)
        log.info(
            "registered node %s (%d cpus, %d MiB, %d gpus)",
            name,
            request.cpus,
            request.memory_mb,
            len(request.gpus),
        )
        return True

    async def _carry_state(self, name: str, desired: str) -> None:
        try:
            nodes = await self.link.call(CONTROLLER, "GetNodes", pb.GetNodesRequest(names=[name]))
            current = next((n for n in nodes.nodes if n.name == name), None)
            if current is None:
                return
            for action, reason in state_actions(desired, current.state, current.reason):
                await self.link.call(
                    CONTROLLER,
                    "UpdateNode",
                    pb.UpdateNodeRequest(nodes=name, state=action, reason=reason),
                    metadata=self.admin_metadata(),
                )
                log.info("node %s: %s%s", name, action, f" ({reason})" if reason else "")
        except TransportError as exc:
            raise _Restart(f"updating node {name}: {exc}") from None
        except RpcError as exc:
            log.warning("node %s: state change refused (%s)", name, exc)

    async def remove(self, name: str) -> None:
        self.registered.pop(name, None)
        if self.credentials.pop(name, None) is not None:
            await self._store_credential(name, None)
        self.gpu_resources.pop(name, None)
        try:
            await self.link.call(
                INVENTORY, "RemoveNode", ipb.RemoveNodeRequest(name=name, reason="kubernetes node deleted")
            )
            log.info("node %s removed", name)
        except TransportError as exc:
            raise _Restart(f"removing node {name}: {exc}") from None
        except RpcError as exc:
            if exc.code is not StatusCode.NOT_FOUND:
                log.warning("controller refused to remove node %s (%s)", name, exc)

    async def _heartbeats(self) -> None:
        while True:
            await trio.sleep(self.heartbeat_interval)
            for name in list(self.registered):
                beat = pb.HeartbeatRequest(
                    name=name,
                    running_job_ids=self.running_on(name),
                    unreported_job_ids=self.unreported_on(name),
                )
                try:
                    answer = await self.link.call(
                        CONTROLLER, "Heartbeat", beat, attempts=1, metadata=self.credential_metadata(name)
                    )
                except RpcError as exc:
                    log.warning("heartbeat of node %s failed (%s)", name, exc)
                    continue
                if answer.heartbeat_interval_secs:  # the leader's current one (scontrol reconfigure)
                    self.heartbeat_interval = float(answer.heartbeat_interval_secs)
                if not answer.known and name in self.registered:
                    log.warning("controller does not know node %s; registering it again", name)
                    request = self.registered.pop(name)
                    try:
                        await self._register(name, request)
                    except _Restart as exc:
                        log.warning("%s", exc)


def _resources(request: pb.RegisterNodeRequest) -> tuple[Any, ...]:
    return (request.cpus, request.memory_mb, len(request.gpus), request.address, request.port)
