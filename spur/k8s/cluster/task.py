"""The leader's k8s reconcile task: a thin loop around :func:`spur.k8s.cluster.reconcile.decide`.

Every ``interval`` seconds it asks each applied node's agent for its live k0s state (recording
changes with ``K8sNodeReport``), feeds the readings to the starter's rules
(:mod:`spur.k8s.cluster.starter`), then performs the decided actions through the agents' K0sAgent
service: start (minting the join token on a running control plane first), teardown after ``down``,
enrollment of newly registered nodes, phase changes. It runs in the leader-duties nursery, so a
step-down cancels it. Time comes from ``now`` (wall clock in spurctld; Trio's clock in tests, so
MockClock drives the provisioning timeout). Join tokens are passed from agent to agent and never
logged or stored in the replicated state.

The starter's per-node state (``starts``: start in flight, failures in a row, last reason, next
retry) lives on this object only, so it starts over with each leadership. A start with no answer
within ``START_TIMEOUT`` (900 s) is abandoned and counts as failed. A failed start is logged, kept
as the node's reason in the record (shown by ``spur k8s status``) and counted on
``spur_k8s_start_failures_total``.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import trio

from spur.k8s.cluster import reconcile as r
from spur.k8s.cluster import starter as s
from spur.k8s.cluster.gpu_resources import status_patch, to_advertise
from spur.k8s.cluster.mesh_link import mesh_ip
from spur.k8s.cluster.planner import carve_pod_cidrs
from spur.k8s.cluster.pod_routes import pod_cidr_changes, wanted_pod_cidrs
from spur.rpc.proto import k0s_pb2
from spur.rpc.status import RpcError
from spur.state import k8s_cluster as k

if TYPE_CHECKING:
    from spur.config.model import ClusterConfig
    from spur.state.machine import ClusterState

log = logging.getLogger("spur.k8s.reconcile")

CALL_TIMEOUT = 30.0
APPLY_TIMEOUT = s.START_TIMEOUT  # long enough for a k0s download


class _NoAnswer(Exception):
    """A start that cannot be sent or got no answer in time (its message is the node's reason)."""


class AgentCaller(Protocol):
    async def __call__(self, node: str, method: str, request: Any, timeout: float) -> Any: ...


class ReconcileMetrics(Protocol):
    """What the reconcile task counts (``spur.metrics.k8s.K8sMetrics``, which sits above this package)."""

    def observe_k8s_reconcile(self, seconds: float, record: k.K8sClusterRecord) -> None: ...

    def k8s_attempt(self, role: str) -> None: ...

    def k8s_failure(self, role: str) -> None: ...

    def k8s_start_failure(self, role: str) -> None: ...


class K8sReconciler:
    """See the module docstring. ``propose`` replicates a state command and returns its result."""

    def __init__(
        self,
        *,
        state: ClusterState,
        propose: Callable[[Any], Awaitable[Any]],
        call_agent: AgentCaller,
        cluster_cfg: ClusterConfig,
        wg_enabled: bool = False,
        now: Callable[[], float] = time.time,
        interval: float = 2.0,
        metrics: ReconcileMetrics | None = None,
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
        self.starts: dict[str, s.StartState] = {}
        self._down: set[str] = set()
        self.wake = trio.Event()
        # GPU extended resources this leader patched onto Nodes, and per node (retry at, failures, last error)
        self._advertised: dict[str, dict[str, str]] = {}
        self._gpu_retry: dict[str, tuple[float, int, str]] = {}
        self._gpu_busy = False

    @property
    def record(self) -> k.K8sClusterRecord:
        return self.state.domain(k.K8sClusterDomain).record

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
        readings: dict[str, tuple[str, str]] = {}
        if rec.phase != k.DOWN:
            readings = await self._refresh(rec)
        rec = self.record
        unavailable = await self._observe(rec, readings)
        registered = [n for n, node in self.state.nodes.items() if not node.down]
        actions = r.decide(
            rec, registered, self.now(), float(self.cfg.k8s_provisioning_timeout_secs), self.starts, unavailable
        )
        for action in actions:
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
        if self.wg_enabled and self.cfg.cni == "calico":
            # Only Calico (bird, no overlay) routes pod traffic over the mesh; kube-router carries it in
            # its own IPIP tunnel, where a /24 route on spur0 would take those packets away from it.
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

    async def _refresh(self, rec: k.K8sClusterRecord) -> dict[str, tuple[str, str]]:
        """Read every applied node's k0s; returns node -> (component state, detail) as read."""
        readings: dict[str, tuple[str, str]] = {}

        async def one(name: str, node: k.K8sNode) -> None:
            try:
                st = await self.call_agent(name, "Status", k0s_pb2.K0sStatusRequest(), CALL_TIMEOUT)
                state, reason = st.component_state, st.detail
            except (RpcError, OSError) as exc:
                state, reason = "unreachable", f"agent not reachable: {getattr(exc, 'message', exc)}"
            readings[name] = (state, reason)
            if state != node.component_state or (reason and reason != node.reason) or (
                state == "active" and node.reason
            ):
                await self.propose(k.K8sNodeReport(name, state, reason, self.now()))

        async with trio.open_nursery() as nursery:
            for name, node in rec.nodes.items():
                if node.component_state != "pending" and name not in self._busy:
                    nursery.start_soon(one, name, node)
        return readings

    async def _observe(self, rec: k.K8sClusterRecord, readings: dict[str, tuple[str, str]]) -> set[str]:
        """Feed this tick's readings and the nodes' down/up changes to the starter's state; returns
        the cluster nodes that cannot be started now (Spur node down or not registered)."""
        now = self.now()
        down = {n for n, node in self.state.nodes.items() if node.down}
        for name in sorted(self._down - down):
            if name in self.starts:
                self.starts[name] = s.back_from_down(self.starts[name])
        self._down = down
        active = rec.phase in (k.PROVISIONING, k.READY)
        for name in list(self.starts):  # forget nodes that left the cluster, and all waits outside it
            if self.starts[name].in_flight_since is None and (name not in rec.nodes or not active):
                del self.starts[name]
        if not active:
            return set(rec.nodes)
        for name, (state, detail) in sorted(readings.items()):
            before = self.starts.get(name, s.IDLE)
            after, failed = s.observed(before, state, detail, now)
            if after == before:
                continue
            if after == s.IDLE:
                self.starts.pop(name, None)
            else:
                self.starts[name] = after
            if after.retry_at is not None and after.failures > before.failures:
                await self._start_failed(name, rec.nodes[name].role, after, counted=failed)
        return {n for n in rec.nodes if n in down or n not in self.state.nodes}

    async def _start_failed(self, name: str, role: str, st: s.StartState, *, counted: bool) -> None:
        """Log a failure, keep its reason on the node's record, count it when it was a start's."""
        log.warning(
            "k8s: k0s on %s %s: %s (failure %d in a row; next start in %gs)",
            name, "did not start" if counted else "is not running", st.reason, st.failures,
            (st.retry_at or 0.0) - self.now(),
        )
        if counted and self.metrics is not None:
            self.metrics.k8s_failure(role)
            self.metrics.k8s_start_failure(role)
        node = self.record.nodes.get(name)
        if node is not None and node.reason != st.reason:
            await self.propose(k.K8sNodeReport(name, node.component_state, st.reason, self.now()))

    def _address(self, name: str) -> str:
        if self.wg_enabled:
            ip = mesh_ip(self.state, name)
            if ip:
                return ip
        node = self.state.nodes.get(name)
        return node.address if node is not None else ""

    async def _apply(self, action: r.ApplyNode) -> None:
        rec = self.record
        name = action.node
        self.starts[name] = s.start_sent(self.starts.get(name, s.IDLE), self.now())
        try:
            try:
                with trio.move_on_after(s.START_TIMEOUT) as waited:
                    st = await self._start(rec, action)
                if waited.cancelled_caught:
                    raise _NoAnswer(f"no answer to the k0s start within {s.START_TIMEOUT:g}s")
            except (RpcError, OSError, _NoAnswer) as exc:
                reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
                after = s.start_failed(self.starts.get(name, s.IDLE), reason, self.now())
                self._set_start(name, after)
                await self._start_failed(name, action.role, after, counted=True)
                return
            after, failed = s.start_answered(self.starts.get(name, s.IDLE), st.component_state, st.detail, self.now())
            self._set_start(name, after)
            await self.propose(k.K8sNodeReport(name, st.component_state or "activating", st.detail, self.now()))
            if failed:
                await self._start_failed(name, action.role, after, counted=True)
        except RpcError as exc:  # a proposal refused or leadership lost: the next tick reads the node again
            log.info("k8s: could not record the start of k0s on %s: %s", name, exc)
        finally:
            self._busy.discard(name)
            current = self.starts.get(name)
            if current is not None and current.in_flight_since is not None:  # cancelled mid-start
                self._set_start(name, replace(current, in_flight_since=None))

    def _set_start(self, name: str, st: s.StartState) -> None:
        if st == s.IDLE:
            self.starts.pop(name, None)
        else:
            self.starts[name] = st

    async def _start(self, rec: k.K8sClusterRecord, action: r.ApplyNode) -> Any:
        """Mint the join token (when the role needs one) and send the start; the agent's status."""
        token = ""
        if action.token_role:
            source = next(
                (cp for cp in rec.control_planes if cp in rec.nodes and rec.nodes[cp].component_state == "active"),
                None,
            )
            if source is None:
                raise _NoAnswer("no running control plane to mint a join token on")
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
        # the RPC deadline is a little later than ours, so the 900 s rule reads the same on any transport
        return await self.call_agent(action.node, "Apply", request, APPLY_TIMEOUT + CALL_TIMEOUT)

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
