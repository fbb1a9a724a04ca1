"""What the controller's parts (its gRPC services, duties, surfaces) may use of the ``Controller``.

``spur.controller.app.Controller`` builds the parts and hands itself to them; the parts are typed
against :class:`ControllerHost` instead of importing ``app``, so the imports run one way: ``app``
imports its parts, the parts import this module, and this module imports only lower layers. The
``Controller`` matches the Protocol by its shape (no base class); its plain attributes satisfy the
read-only properties.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pluggy
    import trio

    from spur.accounting.runtime import AccountingRuntime
    from spur.auth.guard import ServerAuth
    from spur.config import SpurConfig
    from spur.controller.immediate import ImmediateGrants
    from spur.controller.intake import SubmitGate
    from spur.core.clock import Clock
    from spur.core.job import Partition
    from spur.k8s.cluster.task import K8sReconciler
    from spur.metrics.controller import ControllerMetrics
    from spur.raft.node import RaftNode
    from spur.rpc.pool import ChannelPool
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.server import Server
    from spur.rpc.stub import Stub
    from spur.rpc.tls import ClientTLS, TlsContexts
    from spur.state.machine import ClusterState

__all__ = ["ControllerHost", "HeartbeatWatch"]


class HeartbeatWatch(Protocol):
    """The leader's launch watch (``spur.controller.launch_watch.LaunchWatch``) as the heartbeat
    handler uses it: the jobs a node's heartbeats have been missing for too long."""

    def quiet(self, ctl: ControllerHost, request: pb.HeartbeatRequest, now: float) -> bool: ...

    async def heartbeat(self, ctl: ControllerHost, request: pb.HeartbeatRequest, now: float) -> list[int]: ...


class ControllerHost(Protocol):
    """The controller as its parts see it (plain attributes are the ones the parts assign)."""

    # Configuration and identity.
    cfg: SpurConfig

    @property
    def config_path(self) -> str | Path | None: ...

    @property
    def _overrides(self) -> dict[str, Any]: ...

    config_loaded_at: float

    @property
    def node_id(self) -> int: ...

    @property
    def state_dir(self) -> Path: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def started_wall(self) -> float: ...

    @property
    def auth(self) -> ServerAuth: ...

    @property
    def tls(self) -> TlsContexts: ...

    @property
    def client_tls(self) -> ClientTLS | None: ...

    # Replicated state and the Raft group.
    @property
    def state(self) -> ClusterState: ...

    @property
    def raft(self) -> RaftNode: ...

    @property
    def is_leader(self) -> bool: ...

    @property
    def client_address(self) -> str: ...

    def leader_address(self) -> str | None: ...

    async def leader_stub(self) -> Stub: ...

    async def leader_ready(self) -> None: ...

    @property
    def leader_is_ready(self) -> bool: ...

    async def read_barrier(self) -> None: ...

    async def propose(self, cmd: Any) -> Any: ...

    async def propose_many(self, cmds: list[Any]) -> list[Any]: ...

    async def raft_propose_quiet(self, cmd: Any) -> Any: ...

    async def wait_change(self) -> None: ...

    def change_event(self) -> trio.Event: ...

    def configured_partitions(self) -> list[Partition]: ...

    async def reconfigure(self) -> Any: ...

    def reload_tls(self) -> str | None: ...

    # Leader-side bookkeeping (not replicated).
    scheduler_kick: trio.Event

    def kick_scheduler(self) -> None: ...

    mesh_changed: trio.Event

    @property
    def submit_gate(self) -> SubmitGate: ...

    @property
    def last_seen(self) -> dict[str, float]: ...

    @property
    def immediate(self) -> ImmediateGrants: ...

    @property
    def launch_watch(self) -> HeartbeatWatch: ...

    @property
    def accounting(self) -> AccountingRuntime: ...

    # Set by ``Controller.run`` and the surfaces (the plugin, the peers' channels, the served ports).
    @property
    def plugin_manager(self) -> pluggy.PluginManager | None: ...

    @property
    def peer_pool(self) -> ChannelPool | None: ...

    @property
    def grpc_server(self) -> Server | None: ...

    @property
    def bound_port(self) -> int | None: ...

    metrics: ControllerMetrics | None
    k8s_reconciler: K8sReconciler | None
    rest_port: int | None
    metrics_port: int | None
