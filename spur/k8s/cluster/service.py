"""spurctld's side of Spur-managed k0s: the K8sCluster service (``spur k8s ...``) and the leader duty
that runs the reconcile task.

- With ``[cluster] enabled = false`` every method answers FAILED_PRECONDITION with
  :data:`OFF_MESSAGE` (what the feature is and how to turn it on).
- Up, Down, AddNodes, RemoveNodes need a cluster admin (root, an admin token, an accounting
  Administrator); Status and a bare Kubeconfig need only an identity. Served by the leader; followers
  forward with the caller's metadata.
- Status asks every node's agent for its live k0s state (falling back to the last recorded one,
  with the reason, when the agent does not answer), and adds the leader's start state per node (start
  in flight since, failures in a row, last failure, next retry; see :mod:`spur.k8s.cluster.starter`).
- Kubeconfig: ``--admin`` (admin and ``allow_admin_kubeconfig = true``) returns the k0s cluster-admin
  kubeconfig from a running control plane; ``--user`` needs admin; both flags together are refused.
  The per-user ServiceAccount kubeconfig (bare / ``--user``) is minted through the cluster's
  Kubernetes API (:mod:`spur.k8s.cluster.kubeconfig`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from spur.k8s.cluster.mesh_link import mesh_ip
from spur.k8s.cluster.planner import (
    Inventory,
    PlanError,
    ScopeRequest,
    carve_pod_cidrs,
    plan_up,
    resolve_scope,
)
from spur.rpc.forwarding import served_by_leader
from spur.rpc.proto import k0s_pb2
from spur.rpc.proto import k8s_pb2 as kpb
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode
from spur.state import k8s_cluster as k

if TYPE_CHECKING:
    from spur.k8s.cluster.host import K8sControllerHost
    from spur.rpc.channel import Channel
    from spur.rpc.pool import ChannelPool
    from spur.rpc.stub import Stub

log = logging.getLogger("spur.k8s")

_Request = TypeVar("_Request")
_Response = TypeVar("_Response")

OFF_MESSAGE = (
    "Spur-managed Kubernetes is off ([cluster] enabled = false). To turn it on, set enabled = true "
    "in the [cluster] section of spur.conf on the controller and on every node, then restart "
    "spurctld and spurd."
)
STATUS_TIMEOUT = 5.0


def k0s_stub(channel: Channel) -> Stub:
    from spur.rpc.stub import Stub

    return Stub(channel, k0s_pb2.DESCRIPTOR.services_by_name["K0sAgent"])


class AgentCalls:
    """Calls to nodes' K0sAgent service over a pool of daemon-signed channels."""

    def __init__(self, ctl: K8sControllerHost, pool: ChannelPool) -> None:
        self.ctl = ctl
        self.pool = pool

    async def __call__(self, node: str, method: str, request: Any, timeout: float) -> Any:
        info = self.ctl.state.nodes.get(node)
        if info is None:
            raise RpcError(StatusCode.NOT_FOUND, f"node {node} is not registered")
        try:
            stub = await self.pool.stub(info.address, info.port)
        except OSError as exc:
            raise RpcError(StatusCode.UNAVAILABLE, f"cannot reach the agent of {node}: {exc}") from None
        return await getattr(stub, method)(request, timeout=timeout)


async def k8s_duty(
    ctl: K8sControllerHost, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Leader duty: the reconcile task and the drift sweep with their agent channels (cancelled on
    step-down)."""
    from spur.k8s.cluster.task import K8sReconciler
    from spur.rpc.pool import ChannelPool

    async with ChannelPool(k0s_stub, metadata_provider=ctl.auth.daemon_metadata, tls=ctl.client_tls) as pool:
        reconciler = K8sReconciler(
            state=ctl.state,
            propose=ctl.propose,
            call_agent=AgentCalls(ctl, pool),
            cluster_cfg=ctl.cfg.cluster,
            wg_enabled=ctl.cfg.network.wg_enabled,
            now=ctl.clock.wall,
            metrics=getattr(getattr(ctl, "metrics", None), "k8s", None),
            on_mesh_change=lambda: ctl.mesh_changed.set(),
        )
        ctl.k8s_reconciler = reconciler
        try:
            async with trio.open_nursery() as nursery:
                from spur.k8s.cluster.drift_task import drift_duty

                await nursery.start(drift_duty, ctl, reconciler.call_agent, name="k8s-drift-sweep")
                await reconciler.run(task_status=task_status)
        finally:
            ctl.k8s_reconciler = None


def _leader_only(
    method: Callable[[K8sClusterService, _Request, CallContext], Awaitable[_Response]],
) -> Callable[[K8sClusterService, _Request, CallContext], Coroutine[Any, Any, _Response]]:
    """Refuse while the feature is off; otherwise serve on the leader (followers forward)."""
    on_leader = served_by_leader(kpb.DESCRIPTOR.services_by_name["K8sCluster"], timeout=60.0)(method)

    @functools.wraps(method)
    async def serve(self: K8sClusterService, request: _Request, context: CallContext) -> _Response:
        if not self.ctl.cfg.cluster.enabled:
            raise RpcError(StatusCode.FAILED_PRECONDITION, OFF_MESSAGE)
        return await on_leader(self, request, context)

    return serve


def _plan_error(exc: PlanError) -> RpcError:
    return RpcError(StatusCode.FAILED_PRECONDITION, str(exc))


class K8sClusterService:
    """``spur.k8s.v1.K8sCluster`` (see the module docstring)."""

    def __init__(self, ctl: K8sControllerHost) -> None:
        self.ctl = ctl
        self._pool: ChannelPool | None = None

    # ------------------------------------------------------------------ helpers

    def _admin(self, context: CallContext, what: str) -> Any:
        from spur.auth.callers import require_admin as _require_admin

        return _require_admin(context, what, self.ctl.state)

    def _caller(self, context: CallContext) -> Any:
        from spur.auth.callers import caller as _caller

        return _caller(context)

    @property
    def record(self) -> k.K8sClusterRecord:
        return self.ctl.state.domain(k.K8sClusterDomain).record

    def _inventory(self) -> Inventory:
        state = self.ctl.state
        return Inventory(
            nodes=tuple(state.nodes),
            partitions={p.name: tuple(state.partition_nodes(p)) for p in state.partitions.values()},
            features={n.name: tuple(n.features) for n in state.nodes.values()},
        )

    def _kick(self) -> None:
        reconciler = getattr(self.ctl, "k8s_reconciler", None)
        if reconciler is not None:
            reconciler.kick()

    async def _call_agent(self, node: str, method: str, request: Any, timeout: float) -> Any:
        from spur.rpc.pool import ChannelPool

        info = self.ctl.state.nodes.get(node)
        if info is None:
            raise RpcError(StatusCode.NOT_FOUND, f"node {node} is not registered")
        async with ChannelPool(
            k0s_stub, metadata_provider=self.ctl.auth.daemon_metadata, tls=self.ctl.client_tls
        ) as pool:
            return await AgentCalls(self.ctl, pool)(node, method, request, timeout)

    async def _status(self, message: str = "", live: bool = True) -> kpb.K8sClusterStatus:
        rec = self.record
        reconciler = getattr(self.ctl, "k8s_reconciler", None)
        starts = reconciler.starts if reconciler is not None else {}
        nodes: dict[str, kpb.K8sNodeInfo] = {}
        for name, node in sorted(rec.nodes.items()):
            start = starts.get(name)
            nodes[name] = kpb.K8sNodeInfo(
                name=name, role=node.role, component_state=node.component_state, reason=node.reason,
                pod_cidr=node.pod_cidr, mesh_ip=node.mesh_ip,
            )
            if start is not None:
                nodes[name].start_in_flight_since = start.in_flight_since or 0.0
                nodes[name].start_failures = start.failures
                nodes[name].start_failure = start.reason
                nodes[name].start_retry_at = start.retry_at or 0.0

        async def ask(name: str) -> None:
            try:
                st = await self._call_agent(name, "Status", k0s_pb2.K0sStatusRequest(), STATUS_TIMEOUT)
            except (RpcError, OSError) as exc:
                info = nodes[name]
                info.reason = info.reason or f"agent not reachable: {getattr(exc, 'message', exc)}"
                return
            info = nodes[name]
            info.component_state = st.component_state
            info.enabled = st.enabled
            if st.detail:
                info.reason = st.detail
            elif st.component_state == "active":
                info.reason = ""

        if live:
            async with trio.open_nursery() as nursery:
                for name in nodes:
                    if rec.nodes[name].component_state != "pending":
                        nursery.start_soon(ask, name)
        outside = self._drift_lines(rec, nodes)
        return kpb.K8sClusterStatus(
            phase=rec.phase,
            control_planes=rec.control_planes,
            scoped=rec.scoped,
            nodes=list(nodes.values()),
            outside=outside,
            phase_since=rec.phase_since,
            reset=rec.reset,
            message=message,
        )

    def _drift_lines(self, rec: k.K8sClusterRecord, nodes: dict[str, kpb.K8sNodeInfo]) -> list[kpb.K8sNodeInfo]:
        """Fill each node's drift/stray state from this leader's drift sweep; return the nodes
        outside the cluster that have some (leader-local: the status RPC is served by the leader)."""
        tracker = getattr(self.ctl, "k8s_drift", None)
        if tracker is None or rec.phase == k.DOWN:
            return []
        now = trio.current_time()
        for name, info in nodes.items():
            info.drift = tracker.describe(name, now)
        outside = []
        for name in sorted(tracker.tracks):
            if name not in nodes:
                text = tracker.describe(name, now)
                if text:
                    outside.append(kpb.K8sNodeInfo(name=name, drift=text))
        return outside

    # ------------------------------------------------------------------ methods

    @_leader_only
    async def Up(self, request: kpb.K8sUpRequest, context: CallContext) -> kpb.K8sClusterStatus:
        ident = self._admin(context, "bringing up the Kubernetes cluster (spur k8s up)")
        cfg = self.ctl.cfg.cluster
        await self.ctl.read_barrier()
        if self.record.phase != k.DOWN:
            return await self._status(f"the cluster is already {self.record.phase}; nothing changed", live=False)
        try:
            plan = plan_up(
                ScopeRequest(request.nodes, request.partition, tuple(request.selectors)),
                self._inventory(),
                explicit_control_planes=tuple(request.control_plane_nodes),
                replicas=request.replicas,
                conf_node=cfg.control_plane_node,
                conf_replicas=cfg.control_plane_replicas,
                pod_cidr=cfg.pod_cidr,
            )
        except PlanError as exc:
            raise _plan_error(exc) from None
        result = await self.ctl.propose(
            k.K8sUp(
                scoped=plan.scoped,
                members=list(plan.members),
                control_planes=list(plan.control_planes),
                roles=plan.roles,
                pod_cidrs=plan.pod_cidrs,
                mesh_ips={n: mesh_ip(self.ctl.state, n) or "" for n in plan.members},
                time=self.ctl.clock.wall(),
            )
        )
        log.info(
            "k8s up by %s: control plane %s, %d node(s)%s", ident.user, ",".join(plan.control_planes),
            len(plan.members), " (scoped)" if plan.scoped else "",
        )
        self._kick()
        started = result.get("started")
        return await self._status("provisioning started" if started else "nothing changed", live=False)

    @_leader_only
    async def Status(self, request: kpb.K8sStatusRequest, context: CallContext) -> kpb.K8sClusterStatus:
        self._caller(context)
        await self.ctl.read_barrier()
        return await self._status()

    @_leader_only
    async def Down(self, request: kpb.K8sDownRequest, context: CallContext) -> kpb.K8sClusterStatus:
        ident = self._admin(context, "tearing down the Kubernetes cluster (spur k8s down)")
        result = await self.ctl.propose(k.K8sDown(reset=request.reset, time=self.ctl.clock.wall()))
        log.info("k8s down%s by %s (was %s)", " --reset" if request.reset else "", ident.user, result["was"])
        self._kick()
        what = "stopping and resetting" if request.reset else "stopping"
        nodes = ", ".join(result["nodes"]) or "no node"
        return await self._status(f"{what} k0s on {nodes}", live=False)

    @_leader_only
    async def AddNodes(self, request: kpb.K8sNodesRequest, context: CallContext) -> kpb.K8sNodesResponse:
        self._admin(context, "adding nodes to the Kubernetes cluster (spur k8s add-nodes)")
        await self.ctl.read_barrier()
        rec = self.record
        if rec.phase == k.DOWN:
            raise RpcError(StatusCode.FAILED_PRECONDITION, "the cluster is down; bring it up with spur k8s up first")
        if not rec.scoped:
            raise RpcError(
                StatusCode.FAILED_PRECONDITION,
                "this cluster spans the whole inventory: every registered node joins it by itself",
            )
        scope = ScopeRequest(request.nodes, request.partition, tuple(request.selectors))
        if scope.empty:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "name the nodes to add with --nodes, --partition or --selector")
        try:
            chosen = resolve_scope(scope, self._inventory())
            new = [n for n in chosen if n not in rec.nodes]
            existing = {n: node.pod_cidr for n, node in rec.nodes.items() if node.pod_cidr}
            cidrs = carve_pod_cidrs(self.ctl.cfg.cluster.pod_cidr, [*existing, *new], existing)
        except PlanError as exc:
            raise _plan_error(exc) from None
        if not new:
            return kpb.K8sNodesResponse(message="every selected node is already in the cluster; nothing changed")
        result = await self.ctl.propose(
            k.K8sAddNodes(
                roles=dict.fromkeys(new, "worker"),
                pod_cidrs={n: cidrs[n] for n in new},
                mesh_ips={n: mesh_ip(self.ctl.state, n) or "" for n in new},
                time=self.ctl.clock.wall(),
            )
        )
        self._kick()
        added = result["added"]
        return kpb.K8sNodesResponse(nodes=added, message=f"added as worker(s): {', '.join(added)}")

    @_leader_only
    async def RemoveNodes(self, request: kpb.K8sNodesRequest, context: CallContext) -> kpb.K8sNodesResponse:
        from spur.k8s.cluster.removal import remove_nodes

        self._admin(context, "removing nodes from the Kubernetes cluster (spur k8s remove-nodes)")
        await self.ctl.read_barrier()
        return await remove_nodes(self, request)

    @_leader_only
    async def Kubeconfig(
        self, request: kpb.K8sKubeconfigRequest, context: CallContext
    ) -> kpb.K8sKubeconfigResponse:
        from spur.k8s.cluster.kubeconfig import serve_kubeconfig

        return await serve_kubeconfig(self, request, context)
