"""spurctld wiring: Raft node + state machine + gRPC server + leader duties.

One Trio run; the root nursery supervises the Raft node, the gRPC server and the leadership
watcher. Leader-only duties live in a nursery inside a cancel scope that exists only while this
node leads; losing leadership cancels it so nothing leader-only survives a step-down.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from spur.config import SpurConfig
from spur.core.clock import Clock
from spur.core.job import Partition, PartitionState
from spur.raft.node import RaftNode, Role
from spur.raft.storage import RaftStorage
from spur.rpc.proto import spur_pb2
from spur.rpc.server import Server
from spur.rpc.status import RpcError, StatusCode
from spur.state import commands as c
from spur.state.machine import ClusterState, Rejected

if TYPE_CHECKING:
    import pluggy

    from spur.auth.keys import AuthSettings
    from spur.k8s.cluster.drift import DriftTracker
    from spur.k8s.cluster.task import K8sReconciler
    from spur.metrics.controller import ControllerMetrics
    from spur.rest.accounting_backend import AccountingBackend
    from spur.rpc.pool import ChannelPool
    from spur.rpc.stub import Stub
    from spur.rpc.tls import TlsContexts

log = logging.getLogger("spur.controller")

VERIFY_PROPOSED_ENV = "SPUR_VERIFY_PROPOSED"  # "1": see ClusterState.verify_proposed


class _NotifyingStateMachine:
    """Adapts ClusterState to Raft's StateMachine protocol and signals every applied entry."""

    def __init__(self, state: ClusterState, on_apply: Callable[[], None]) -> None:
        self.state = state
        self._on_apply = on_apply

    def apply(self, index: int, data: bytes, proposed: object | None = None) -> Any:
        result = self.state.apply(index, data, proposed)
        self._on_apply()
        return result

    def snapshot(self) -> bytes:
        return self.state.snapshot()

    def decode_snapshot(self, data: bytes) -> object:
        return self.state.decode_snapshot(data)

    def adopt(self, decoded: object) -> None:
        self.state.adopt(decoded)
        self._on_apply()

    def check_command(self, data: bytes) -> None:
        self.state.check_command(data)


def _proposal_error(exc: Exception) -> RpcError:
    """What a client hears when a proposal failed as a whole (not leader, storage, shutting down);
    an error that is none of those is re-raised."""
    from spur.controller.batching import BatcherStopped
    from spur.raft.node import NotLeader
    from spur.raft.storage import StorageError

    if isinstance(exc, BatcherStopped):
        return RpcError(StatusCode.UNAVAILABLE, f"{exc}; retry")
    if isinstance(exc, NotLeader):
        return RpcError(StatusCode.UNAVAILABLE, f"not the leader; retry (leader: {exc.leader_hint})")
    if isinstance(exc, StorageError):
        return RpcError(StatusCode.UNAVAILABLE, f"state could not be made durable: {exc}")
    raise exc


class Controller:
    """A spurctld instance. ``run`` serves until cancelled."""

    def __init__(
        self,
        cfg: SpurConfig,
        *,
        state_dir: str | Path | None = None,
        listen: tuple[str, int] | None = None,
        node_id: int = 1,
        clock: Clock | None = None,
        config_path: str | Path | None = None,
        overrides: dict[str, Any] | None = None,
        auth: AuthSettings | None = None,
        tls: TlsContexts | None = None,
    ) -> None:
        """``auth``: resolved [auth] settings (spur.auth.keys.AuthSettings); read from ``cfg`` when None
        (raises spur.auth.keys.AuthConfigError for an unusable key or required mode without one).
        ``tls``: the daemon's spur.rpc.tls.TlsContexts; built from ``cfg.tls`` when None (raises
        spur.rpc.tls.TlsConfigError for files that cannot be used)."""
        from spur.auth.guard import ServerAuth
        from spur.auth.keys import load_settings

        self._overrides = dict(overrides or {})
        self.auth = ServerAuth(
            auth if auth is not None else load_settings(cfg.auth),
            daemon_name="spurctld",
            daemon_audience="controller",
        )
        self.cfg = cfg
        self.config_path = config_path
        self.node_id = node_id
        self.clock = clock or Clock()
        self.state_dir = Path(state_dir or cfg.controller.state_dir)
        self.listen = listen
        if tls is None:
            from spur.rpc.tls import TlsContexts, load_tls_settings

            tls = TlsContexts(load_tls_settings(cfg.tls), name="spurctld")
        # TLS on every port ([tls]); ``client_tls`` is what this controller presents to agents and peers.
        self.tls = tls
        self.client_tls = tls.client()
        self.state = ClusterState(history_max_jobs=cfg.accounting.history_max_jobs)
        # The test suites set it: every entry this leader applies as proposed is decoded and compared too.
        self.state.verify_proposed = os.environ.get(VERIFY_PROPOSED_ENV) == "1"
        self.auth.state = self.state  # accounting Administrators are admins too
        self._changed = trio.Event()
        # Set once this controller, as leader, has proposed its configuration (cluster id, partitions,
        # accounting); set too when it steps down, so waiters move on and meet NotLeader instead.
        self._leader_ready = trio.Event()
        self.scheduler_kick = trio.Event()
        from spur.controller.batching import ProposalBatcher

        self.machine = _NotifyingStateMachine(self.state, self._signal_change)
        self.storage = RaftStorage(self.state_dir / "raft", fsync=cfg.controller.wal_fsync)
        self.raft = RaftNode(
            credentials=self._raft_credentials(node_id),
            node_id=node_id,
            storage=self.storage,
            state_machine=self.machine,
            peers=list(cfg.controller.peers),
            snapshot_every=cfg.controller.snapshot_every,
            election_timeout=(
                cfg.controller.election_timeout_min_ms / 1000,
                cfg.controller.election_timeout_max_ms / 1000,
            ),
            heartbeat_interval=cfg.controller.heartbeat_ms / 1000,
            # Serializing 100k jobs takes seconds; a forked child does it while the loop goes on.
            fork_snapshots=True,
            server_tls=tls.server(peers_only=True),
            client_tls=self.client_tls,
        )
        # Concurrent proposals leave as one Raft entry (spur/controller/batching.py); runs in ``run``.
        self.batcher = ProposalBatcher(self.raft.propose)
        from spur.controller.intake import SubmitGate

        self.submit_gate = SubmitGate()  # bounded admission of submissions (spur/controller/intake.py)
        from spur.controller.immediate import ImmediateGrants

        self.immediate = ImmediateGrants(self)  # leader-only: grants decided at submission, in flight
        # Leader-only, not replicated: when each node last talked to us (trio clock).
        self.last_seen: dict[str, float] = {}
        from spur.controller.launch_watch import LaunchWatch

        self.launch_watch = LaunchWatch()  # leader-only: jobs missing from their node's heartbeats
        self.bound_port: int | None = None
        self.plugin_manager: pluggy.PluginManager | None = None
        self.peer_pool: ChannelPool | None = None  # to the other controllers, open while running
        self.grpc_server: Server | None = None  # its interceptor is the auth policy REST also runs
        self.metrics: ControllerMetrics | None = None  # when [metrics] enabled
        self.rest_port: int | None = None
        self.accounting_backend: AccountingBackend | None = None  # slurmdb entities over REST
        self.k8s_reconciler: K8sReconciler | None = None  # while the k8s duty runs
        self.k8s_drift: DriftTracker | None = None  # the drift sweep's tracker, kept across leaderships
        self.metrics_port: int | None = None
        from spur.accounting.runtime import AccountingRuntime

        self.accounting = AccountingRuntime(cfg.accounting.database_url)
        self.started_wall = self.clock.wall()
        self.config_loaded_at = self.started_wall  # last read of config_path (start, reconfigure, leading)
        self.mesh_changed = trio.Event()  # set when the mesh membership changed: reconcile now

    def _raft_credentials(self, node_id: int) -> Any:
        """This member's Raft credential (signed with the cluster key, whatever the auth mode); None, with
        one warning when there are other members, when there is no key: the Raft port is then open."""
        key = self.auth.settings.key
        if key:
            from spur.raft.auth import JwtRaftCredentials

            return JwtRaftCredentials(key, node_id)
        if self.cfg.controller.peers:
            log.warning(
                "the Raft port is unauthenticated: no [auth] jwt_key/jwt_key_file is set, so any process "
                "that reaches controller.raft_listen_addr can change the cluster state; set a key"
            )
        return None

    # ------------------------------------------------------------------ identity in the group

    @property
    def is_leader(self) -> bool:
        return self.raft.role is Role.LEADER

    @property
    def client_address(self) -> str:
        """The address other controllers and clients use for this one's gRPC service."""
        host, _port = self.listen or _split(self.cfg.controller.listen_addr, 6817)
        peers = list(self.cfg.controller.peers)
        if peers:
            host = _split(peers[self.node_id - 1], 6821)[0]
        elif host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return f"{host}:{self.bound_port}"

    def leader_address(self) -> str | None:
        """Client address of the current leader, when known (None during an election)."""
        if self.is_leader:
            return self.client_address
        leader = self.raft.leader_id
        return self.state.controllers.get(leader) if leader is not None else None

    async def leader_stub(self) -> Stub:
        address = self.leader_address()
        if address is None:
            raise RpcError(StatusCode.UNAVAILABLE, "no controller leader is known (election in progress)")
        assert self.peer_pool is not None  # open while the controller serves
        return await self.peer_pool.stub(address)

    # ------------------------------------------------------------------ change signalling

    def _signal_change(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_change(self) -> None:
        """Return after the next applied log entry."""
        await self._changed.wait()

    def change_event(self) -> trio.Event:
        """The event the next applied log entry sets. Taken before reading the state and waited on
        after acting on what was read, it misses no change made in between (``wait_change`` after an
        await point would: the entry applied meanwhile has already set and replaced its event)."""
        return self._changed

    def kick_scheduler(self) -> None:
        self.scheduler_kick.set()

    # ------------------------------------------------------------------ proposals

    async def propose(self, cmd: Any) -> Any:
        """Replicate ``cmd`` and return its result; a Rejected result becomes an RpcError."""
        [outcome] = await self.propose_many([cmd])
        if isinstance(outcome, RpcError):
            raise outcome
        return outcome

    async def propose_many(self, cmds: list[Any]) -> list[Any]:
        """Replicate ``cmds`` in their order (sharing Raft entries) and return, in order, each one's
        result or the RpcError it ended with (a Rejected result, or its entry's failure), so a caller
        can tell which of them were applied."""
        if self.batcher.running:
            outcomes = await self.batcher.propose_many(cmds)
        else:
            outcomes = []
            for cmd in cmds:
                try:
                    outcomes.append(await self.raft.propose(c.encode(cmd), cmd))
                except Exception as exc:
                    outcomes.append(exc)
        results: list[Any] = []
        for outcome in outcomes:
            if isinstance(outcome, Rejected):
                outcome = RpcError(StatusCode[outcome.code], outcome.message)
            elif isinstance(outcome, Exception) and not isinstance(outcome, RpcError):
                outcome = _proposal_error(outcome)
            results.append(outcome)
        return results

    async def leader_ready(self) -> None:
        """Wait until this leader has proposed its configuration (a call served earlier would see the
        defaults: no cluster id, the built-in partition, accounting not configured)."""
        await self._leader_ready.wait()

    @property
    def leader_is_ready(self) -> bool:
        """This controller leads and has proposed its configuration (:meth:`leader_ready` would not wait)."""
        return self.is_leader and self._leader_ready.is_set()

    async def read_barrier(self) -> None:
        """Wait until local state reflects every write committed before the call (leader only);
        losing or being unable to confirm leadership becomes UNAVAILABLE so clients retry elsewhere."""
        from spur.raft.node import NotLeader

        try:
            await self.raft.read_barrier()
        except NotLeader as exc:
            raise RpcError(StatusCode.UNAVAILABLE, f"not the leader; retry ({exc})") from None

    async def raft_propose_quiet(self, cmd: Any) -> Any:
        """Like ``propose`` for leader tasks: a refusal is logged and returned, not raised."""
        try:
            return await self.propose(cmd)
        except RpcError as exc:
            log.info("%s not applied: %s", type(cmd).__name__, exc)
            return exc

    # ------------------------------------------------------------------ running

    def configured_partitions(self) -> list[Partition]:
        parts = []
        for p in self.cfg.partitions:
            parts.append(
                Partition(
                    name=p.name,
                    state=PartitionState(p.state),
                    is_default=p.default,
                    nodes_expr=p.nodes,
                    max_time_secs=p.max_time_secs,
                    default_time_secs=p.default_time_secs,
                    enforce_limits=self.cfg.scheduler.enforce_part_limits,
                )
            )
        return parts

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        from spur.controller.service import ControllerService
        from spur.plugins import load_plugin_manager

        if self.plugin_manager is None:
            self.plugin_manager = load_plugin_manager("scheduler", self.cfg.scheduler.plugin)
        host, port = self.listen or _split(self.cfg.controller.listen_addr, 6817)
        from spur.auth.broker import serve_broker
        from spur.controller.auth_service import ControllerAuthService
        from spur.controller.surfaces import make_metrics, start_surfaces
        from spur.rpc.proto import auth_pb2

        self.metrics = make_metrics(self)

        # Authenticated from each call's HEADERS, before its body is read; server.interceptor is the same
        # policy for the REST layer.
        server = Server(
            authenticator=self.auth,
            observer=self.metrics.observe_rpc if self.metrics is not None else None,
        )
        service = ControllerService(self)
        server.add_service(spur_pb2.DESCRIPTOR.services_by_name["Controller"], service)
        from spur.controller.batch_service import CONTROLLER_BATCH, ControllerBatchService

        server.add_service(CONTROLLER_BATCH, ControllerBatchService(service))
        from spur.controller.admission import AdmissionService
        from spur.rpc.proto import admission_pb2

        server.add_service(admission_pb2.DESCRIPTOR.services_by_name["Admission"], AdmissionService(self))
        from spur.controller.accounting_service import SERVICE as ACCOUNTING
        from spur.controller.accounting_service import AccountingService

        accounting = AccountingService(self)
        server.add_service(ACCOUNTING, accounting)
        from spur.rest.accounting_backend import AccountingBackend

        self.accounting_backend = AccountingBackend(self, accounting)
        from spur.controller.mesh import MESH_SERVICE, MeshService

        self.mesh_service = MeshService(self)  # also read by the dashboard's Cluster page
        server.add_service(MESH_SERVICE, self.mesh_service)
        from spur.controller.inventory import SERVICE as INVENTORY
        from spur.controller.inventory import InventoryService

        server.add_service(INVENTORY, InventoryService(self))
        from spur.controller.config_report import SERVICE as CONFIG_REPORT
        from spur.controller.config_report import ConfigReportService

        server.add_service(CONFIG_REPORT, ConfigReportService(self))
        from spur.k8s.cluster.service import K8sClusterService
        from spur.rpc.proto import k8s_pb2

        self.k8s_service = K8sClusterService(self)  # also read by the dashboard's Cluster page
        server.add_service(k8s_pb2.DESCRIPTOR.services_by_name["K8sCluster"], self.k8s_service)
        server.add_service(auth_pb2.DESCRIPTOR.services_by_name["Auth"], ControllerAuthService(self))
        self.grpc_server = server
        from spur.controller.accounting_db_service import SERVICE as ACCOUNTING_DB
        from spur.controller.accounting_db_service import AccountingDbService

        server.add_service(ACCOUNTING_DB, AccountingDbService(self))
        from spur.rpc.pool import controller_pool

        raft_listen = (
            _split(self.cfg.controller.raft_listen_addr, 6821) if self.cfg.controller.peers else None
        )
        async with controller_pool(tls=self.client_tls) as self.peer_pool, trio.open_nursery() as nursery:
            await nursery.start(self.raft.run, raft_listen)
            await nursery.start(self.batcher.run, name="proposal-batcher")
            await nursery.start(serve_broker, self.auth, name="auth-broker")
            self.bound_port = await nursery.start(partial(server.serve, tls=self.tls.server()), host, port)
            await start_surfaces(self, nursery, service)
            nursery.start_soon(self._leadership_watch, name="leadership-watch")
            nursery.start_soon(self._announce_self, name="announce-self")
            log.info("spurctld listening on %s:%s (state in %s)", host, self.bound_port, self.state_dir)
            task_status.started(self.bound_port)

    def reload_tls(self) -> str | None:
        """Re-read the [tls] certificate, key and CA files for new connections (``scontrol reconfigure``,
        SIGHUP). None when done (or TLS is off); else one line, and the files in use stay in use."""
        return self.tls.reload()

    async def reconfigure(self) -> Any:
        """Re-read the config file and apply its live keys (leader only; followers keep theirs until
        they restart or lead). Returns a ``spur.controller.reconfig.Outcome`` (what was applied, which
        changed keys need a restart). A bad file changes nothing and raises an RpcError naming the problem.
        """
        from spur.controller.reconfig import load_for_reconfigure

        outcome = load_for_reconfigure(self)
        tls_error = self.reload_tls()
        if tls_error is not None:
            outcome.not_applied.append(f"tls (the certificates in use are kept: {tls_error})")
        self.cfg = outcome.cfg
        self.config_loaded_at = self.clock.wall()
        await self.propose(c.ConfigurePartitions(self.configured_partitions()))
        await self._configure_accounting()
        self.kick_scheduler()
        log.info(
            "reconfigured from %s: scheduler, partitions, node timeouts, accounting, priority, k8s drift correction",
            self.config_path,
        )
        if outcome.not_applied:
            log.warning("changed keys that need a restart: %s", ", ".join(outcome.not_applied))
        return outcome

    async def _configure_accounting(self) -> None:
        """Propose the ``[accounting]``/``[priority]`` settings the replicated state must agree on."""
        from spur.controller.accounting_service import accounting_settings

        wanted = accounting_settings(self)
        if not self.state.domains["accounting"].configured_as(wanted):  # type: ignore[attr-defined]
            await self.propose(wanted)

    async def _leadership_watch(self) -> None:
        role = self.raft.role
        while True:
            if role is Role.LEADER:
                if self._leader_ready.is_set():  # set by the last step-down; calls may already wait on
                    self._leader_ready = trio.Event()  # an unset one, which this leadership will set
                async with trio.open_nursery() as duties:
                    duties.start_soon(self._lead, duties, name="leader-duties")
                    role = await self.raft.wait_role_change(Role.LEADER)
                    duties.cancel_scope.cancel()
                self._leader_ready.set()
                log.info("stepped down (term %s); leader duties cancelled", self.raft.term)
            else:
                role = await self.raft.wait_role_change(role)

    async def _announce_self(self) -> None:
        """Keep this controller's client address in the replicated state (via the leader)."""
        from spur.rpc.proto import spur_pb2 as pb

        while True:
            if self.state.controllers.get(self.node_id) == self.client_address:
                # Announced: look again in a second (a restore or another cluster's snapshot may
                # replace the map) rather than wake on each of the many entries a busy leader applies.
                await trio.sleep(1.0)
                continue
            try:
                if self.is_leader:
                    await self.propose(c.AnnounceController(self.node_id, self.client_address))
                elif self.leader_address() is not None:
                    stub = await self.leader_stub()
                    info = pb.ControllerInfo(node_id=self.node_id, address=self.client_address)
                    await stub.RegisterController(info, timeout=5, metadata=self.auth.daemon_metadata())
            except RpcError as exc:
                log.debug("announcing this controller failed (will retry): %s", exc)
            with trio.move_on_after(1.0):
                await self.wait_change()

    async def _lead(self, duties: trio.Nursery) -> None:
        """Start the leader duties. Losing leadership meanwhile (a proposal answered "not the leader")
        ends this quietly instead of crashing spurctld: the leadership watch cancels the duties."""
        try:
            await self._start_duties(duties)
        except RpcError as exc:
            if self.is_leader or exc.code is not StatusCode.UNAVAILABLE:
                raise
            log.info("lost leadership while starting leader duties: %s", exc.message)

    async def _start_duties(self, duties: trio.Nursery) -> None:
        from spur.controller.duties import Dispatcher, HealthSweep, SchedulerLoop

        log.info("leader for term %s", self.raft.term)
        from spur.controller.reconfig import reread_for_leadership

        reread_for_leadership(self)
        if not self.state.cluster_id:
            import uuid

            cluster_id = await self.propose(c.InitClusterId(uuid.uuid4().hex))
            log.info("cluster id %s", cluster_id)
        wanted = self.configured_partitions()
        if [p for p in self.state.partitions.values()] != wanted:
            await self.propose(c.ConfigurePartitions(wanted))
        await self._configure_accounting()
        self._leader_ready.set()
        now = trio.current_time()
        for name in self.state.nodes:
            self.last_seen.setdefault(name, now)
        await duties.start(SchedulerLoop(self).run)
        await duties.start(Dispatcher(self).run)
        await duties.start(HealthSweep(self).run)
        from spur.controller.accounting_flusher import AccountingFlusher

        await duties.start(AccountingFlusher(self).run, name="accounting-flush")
        if self.cfg.network.wg_enabled:
            from spur.controller.mesh import MeshReconcile

            await duties.start(MeshReconcile(self).run, name="mesh-reconcile")
        if self.cfg.cluster.enabled:
            from spur.k8s.cluster.service import k8s_duty

            await duties.start(k8s_duty, self)


def _split(addr: str, default_port: int) -> tuple[str, int]:
    from spur.config import parse_addr

    return parse_addr(addr, default_port)


def interval_or_inf(secs: float) -> float:
    return math.inf if secs <= 0 else secs
