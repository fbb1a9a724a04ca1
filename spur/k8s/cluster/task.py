"""The leader's k8s reconcile task: a thin loop around :func:`spur.k8s.cluster.reconcile.decide`.

Every ``interval`` seconds it asks each applied node's agent for its live k0s state (recording
changes with ``K8sNodeReport``), then performs the decided actions through the agents' K0sAgent
service: apply (minting the join token on a running control plane first), teardown after ``down``,
enrollment of newly registered nodes, phase changes. It runs in the leader-duties nursery, so a
step-down cancels it. Time comes from ``now`` (wall clock in spurctld; Trio's clock in tests, so
MockClock drives the provisioning timeout). Join tokens are passed from agent to agent and never
logged or stored in the replicated state.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from spur.k8s.cluster import reconcile as r
from spur.k8s.cluster.gpu_resources import status_patch, to_advertise
from spur.k8s.cluster.mesh_link import mesh_ip
from spur.k8s.cluster.planner import carve_pod_cidrs
from spur.k8s.cluster.pod_routes import pod_cidr_changes, wanted_pod_cidrs
from spur.rpc.proto import k0s_pb2
from spur.rpc.status import RpcError
from spur.state import k8s_cluster as k

log = logging.getLogger("spur.k8s.reconcile")

CALL_TIMEOUT = 30.0
APPLY_TIMEOUT = 900.0  # long enough for a k0s download


class AgentCaller(Protocol):
    async def __call__(self, node: str, method: str, request: Any, timeout: float) -> Any: ...


class K8sReconciler:
    """See the module docstring. ``propose`` replicates a state command and returns its result."""

    def __init__(
        self,
        *,
        state: Any,
        propose: Callable[[Any], Awaitable[Any]],
        call_agent: AgentCaller,
        cluster_cfg: Any,
        wg_enabled: bool = False,
        now: Callable[[], float] = time.time,
        interval: float = 2.0,
        metrics: Any = None,
        on_mesh_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.state = state
        self.propose = propose
        self.call_agent = call_agent
        self.cfg = cluster_cfg
        self.wg_enabled = wg_enabled
        self.now = now
        self.interval = interval
        self.metrics = metrics
        self.on_mesh_change = on_mesh_change
        self._busy: set[str] = set()
        self.wake = trio.Event()
        # GPU extended resources this leader patched onto Nodes, and per node (retry at, failures, last error)
        self._advertised: dict[str, dict[str, str]] = {}
        self._gpu_retry: dict[str, tuple[float, int, str]] = {}
        self._gpu_busy = False

    @property
    def record(self) -> k.K8sClusterRecord:
        return self.state.domains["k8s_cluster"].record

    def kick(self) -> None:
        self.wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                began = time.perf_counter()
                try:
                    await self.tick(nursery)
                except RpcError as exc:  # a proposal refused or leadership lost mid-tick
                    log.info("k8s reconcile tick could not commit: %s", exc)
                except Exception:  # a bug must not take spurctld down; the next tick starts afresh
                    log.exception("k8s reconcile tick failed")
                if self.metrics is not None:
                    self.metrics.observe_k8s_reconcile(time.perf_counter() - began, self.record)
                with trio.move_on_after(self.interval):
                    await self.wake.wait()
                self.wake = trio.Event()

    # ------------------------------------------------------------------ one pass

    async def tick(self, nursery: trio.Nursery) -> None:
        rec = self.record
        if rec.phase != k.DOWN:
            await self._refresh(rec)
        rec = self.record
        registered = [n for n, node in self.state.nodes.items() if not node.down]
        for action in r.decide(rec, registered, self.now(), float(self.cfg.k8s_provisioning_timeout_secs)):
            if isinstance(action, r.SetPhase):
                log.info("k8s cluster phase -> %s%s", action.phase, f" ({action.reasons})" if action.reasons else "")
                await self.propose(k.K8sSetPhase(action.phase, dict(action.reasons), self.now()))
            elif isinstance(action, r.EnrollNodes):
                await self._enroll(action.nodes)
            elif action.node not in self._busy:
                self._busy.add(action.node)
                if isinstance(action, r.ApplyNode):
                    nursery.start_soon(self._apply, action, name=f"k8s-apply-{action.node}")
                else:
                    nursery.start_soon(self._teardown, action, name=f"k8s-teardown-{action.node}")
        if self.wg_enabled:
            await self._sync_mesh_pod_cidrs()
        self._start_gpu_advertising(nursery)

    # ------------------------------------------------------------------ GPU extended resources

    def _start_gpu_advertising(self, nursery: trio.Nursery) -> None:
        """Patch GPU workers' Nodes with amd.com/gpu / nvidia.com/gpu (:mod:`.gpu_resources`) in the
        background, one batch at a time; a failed node is retried with a growing delay (up to 5 min)."""
        rec = self.record
        for gone in [n for n in self._advertised if n not in rec.nodes]:
            del self._advertised[gone]
        if self._gpu_busy:
            return
        now = self.now()
        wanted = to_advertise(
            rec.phase,
            {n: (node.role, node.component_state) for n, node in rec.nodes.items()},
            {n: [g.vendor for g in node.gpus] for n, node in self.state.nodes.items()},
            self._advertised,
        )
        wanted = {n: res for n, res in wanted.items() if self._gpu_retry.get(n, (0.0, 0, ""))[0] <= now}
        if wanted:
            self._gpu_busy = True
            nursery.start_soon(self._advertise_gpus, wanted, name="k8s-gpu-resources")

    async def _advertise_gpus(self, wanted: dict[str, dict[str, str]]) -> None:
        from spur.k8s.cluster.kubeclient import KubeClient, KubeError, parse_kubeconfig

        try:
            rec = self.record
            try:
                source = next(cp for cp in rec.control_planes if rec.nodes[cp].component_state == "active")
                resp = await self.call_agent(
                    source, "AdminKubeconfig", k0s_pb2.K0sKubeconfigRequest(), CALL_TIMEOUT
                )
                client = KubeClient(parse_kubeconfig(resp.kubeconfig))
            except (RpcError, OSError, KubeError, StopIteration, KeyError) as exc:
                reason = getattr(exc, "message", None) or str(exc) or "no control plane is running"
                for node in wanted:
                    self._gpu_failed(node, f"no Kubernetes API client: {reason}")
                return
            for node, resources in wanted.items():
                path = f"/api/v1/nodes/{urllib.parse.quote(node)}/status"
                try:
                    await trio.to_thread.run_sync(
                        client.request, "PATCH", path, status_patch(resources), "application/merge-patch+json"
                    )
                except KubeError as exc:
                    self._gpu_failed(node, str(exc))
                    continue
                self._advertised[node] = dict(resources)
                self._gpu_retry.pop(node, None)
                log.info("k8s: node %s advertises %s", node, ", ".join(f"{k}={v}" for k, v in resources.items()))
        finally:
            self._gpu_busy = False

    def _gpu_failed(self, node: str, reason: str) -> None:
        _at, failures, last = self._gpu_retry.get(node, (0.0, 0, ""))
        delay = min(self.interval * 2**failures, 300.0)
        self._gpu_retry[node] = (self.now() + delay, failures + 1, reason)
        # a Node not registered with the API yet (404) is expected right after k0s starts
        level = logging.DEBUG if reason == last or ": 404 " in reason else logging.WARNING
        log.log(level, "k8s: cannot advertise the GPUs of %s yet (retry in %gs): %s", node, delay, reason)

    async def _sync_mesh_pod_cidrs(self) -> None:
        """Attach each cluster node's pod /24 to its mesh entry, clear those no longer in the cluster
        (:mod:`spur.k8s.cluster.pod_routes`), and wake the mesh reconcile when anything changed."""
        from spur.state.mesh import SetMeshPodCidr

        mesh = getattr(self.state, "domains", {}).get("mesh")
        if mesh is None:
            return
        rec = self.record
        wanted = wanted_pod_cidrs(rec.phase, {n: node.pod_cidr for n, node in rec.nodes.items()})
        meshed = {m.node: m.pod_cidr for m in mesh.members()}
        changes = pod_cidr_changes(wanted, meshed, self.cfg.pod_cidr)
        for node, cidr in changes:
            await self.propose(SetMeshPodCidr(node, cidr))
            log.info("k8s: mesh %s pod CIDR of %s%s", "routes" if cidr else "no longer routes", node,
                     f" ({cidr})" if cidr else "")
        if changes:
            self.on_mesh_change()

    async def _refresh(self, rec: k.K8sClusterRecord) -> None:
        async def one(name: str, node: k.K8sNode) -> None:
            try:
                st = await self.call_agent(name, "Status", k0s_pb2.K0sStatusRequest(), CALL_TIMEOUT)
                state, reason = st.component_state, st.detail
            except (RpcError, OSError) as exc:
                state, reason = "unreachable", f"agent not reachable: {getattr(exc, 'message', exc)}"
            if state != node.component_state or (reason and reason != node.reason) or (
                state == "active" and node.reason
            ):
                await self.propose(k.K8sNodeReport(name, state, reason, self.now()))

        async with trio.open_nursery() as nursery:
            for name, node in rec.nodes.items():
                if node.component_state != "pending" and name not in self._busy:
                    nursery.start_soon(one, name, node)

    def _address(self, name: str) -> str:
        if self.wg_enabled:
            ip = mesh_ip(self.state, name)
            if ip:
                return ip
        node = self.state.nodes.get(name)
        return node.address if node is not None else ""

    async def _apply(self, action: r.ApplyNode) -> None:
        rec = self.record
        try:
            token = ""
            if action.token_role:
                source = next(cp for cp in rec.control_planes if rec.nodes[cp].component_state == "active")
                resp = await self.call_agent(
                    source, "CreateToken", k0s_pb2.K0sTokenRequest(role=action.token_role), CALL_TIMEOUT
                )
                token = resp.token
            request = k0s_pb2.K0sApplyRequest(
                role=action.role,
                control_plane_count=len(rec.control_planes),
                pod_cidr=self.cfg.pod_cidr,
                service_cidr=self.cfg.service_cidr,
                advertise_address=self._address(action.node),
                control_plane_addresses=[a for a in map(self._address, rec.control_planes) if a],
                join_token=token,
            )
            if self.metrics is not None:
                self.metrics.k8s_attempt(action.role)
            log.info("k8s: starting k0s %s on %s", action.role, action.node)
            st = await self.call_agent(action.node, "Apply", request, APPLY_TIMEOUT)
            await self.propose(k.K8sNodeReport(action.node, st.component_state or "activating", st.detail, self.now()))
        except (RpcError, OSError, StopIteration) as exc:
            reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            log.warning("k8s: starting k0s on %s failed: %s", action.node, reason)
            if self.metrics is not None:
                self.metrics.k8s_failure(action.role)
            try:
                await self.propose(k.K8sNodeReport(action.node, "pending", reason, self.now()))
            except RpcError:
                pass
        finally:
            self._busy.discard(action.node)

    async def _teardown(self, action: r.TeardownNode) -> None:
        method, request = (
            ("Reset", k0s_pb2.K0sResetRequest()) if action.reset else ("Stop", k0s_pb2.K0sStopRequest())
        )
        try:
            await self.call_agent(action.node, method, request, APPLY_TIMEOUT)
            log.info("k8s down: k0s %s on %s", "reset" if action.reset else "stopped", action.node)
        except (RpcError, OSError) as exc:
            log.warning(
                "k8s down: could not %s k0s on %s (%s); it is no longer tracked",
                method.lower(), action.node, getattr(exc, "message", exc),
            )
        finally:
            try:
                await self.propose(k.K8sTornDown(action.node, self.now()))
            finally:
                self._busy.discard(action.node)

    async def _enroll(self, nodes: tuple[str, ...]) -> None:
        rec = self.record
        existing = {n: node.pod_cidr for n, node in rec.nodes.items() if node.pod_cidr}
        cidrs = carve_pod_cidrs(self.cfg.pod_cidr, [*existing, *nodes], existing)
        await self.propose(
            k.K8sAddNodes(
                roles=dict.fromkeys(nodes, "worker"),
                pod_cidrs={n: cidrs[n] for n in nodes},
                mesh_ips={n: mesh_ip(self.state, n) or "" for n in nodes},
                time=self.now(),
                enroll=True,
            )
        )
        log.info("k8s: enrolled %s as worker(s)", ", ".join(nodes))
