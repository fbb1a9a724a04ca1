"""What the K8sCluster service and the k8s leader duty use of spurctld, and what the service's helpers
(kubeconfig.py, removal.py) use of the service.

``spur.controller.app.Controller`` builds ``spur.k8s.cluster.service.K8sClusterService`` and starts
``k8s_duty`` with itself; both are typed against :class:`K8sControllerHost`, so this package never
imports spur.controller (it sits below it). ``K8sClusterService`` imports its helpers and passes
itself; they are typed against :class:`ClusterServiceHost`, so the imports run one way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from spur.k8s.cluster.drift_task import DriftHost
from spur.rpc.forwarding import LeaderGate

if TYPE_CHECKING:
    import trio

    from spur.auth.guard import ServerAuth
    from spur.auth.identity import Identity
    from spur.config import SpurConfig
    from spur.core.clock import Clock
    from spur.k8s.cluster.planner import Inventory
    from spur.k8s.cluster.task import K8sReconciler
    from spur.rpc.server import CallContext
    from spur.rpc.tls import ClientTLS
    from spur.state.k8s_cluster import K8sClusterRecord
    from spur.state.machine import ClusterState

__all__ = ["ClusterServiceHost", "K8sControllerHost"]


class K8sControllerHost(LeaderGate, DriftHost, Protocol):
    """spurctld's controller as the K8sCluster service and ``k8s_duty`` see it (it also serves the
    service's calls on the leader: :class:`~spur.rpc.forwarding.LeaderGate`, and hands itself to the
    drift duty: :class:`~spur.k8s.cluster.drift_task.DriftHost`)."""

    @property
    def cfg(self) -> SpurConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def auth(self) -> ServerAuth: ...

    @property
    def client_tls(self) -> ClientTLS | None: ...

    @property
    def state(self) -> ClusterState: ...

    async def propose(self, cmd: Any) -> Any: ...

    @property
    def mesh_changed(self) -> trio.Event: ...

    k8s_reconciler: K8sReconciler | None  # set by k8s_duty while this controller leads


class ClusterServiceHost(Protocol):
    @property
    def ctl(self) -> K8sControllerHost: ...

    @property
    def record(self) -> K8sClusterRecord: ...

    def _inventory(self) -> Inventory: ...

    def _caller(self, context: CallContext) -> Identity: ...

    def _admin(self, context: CallContext, what: str) -> Identity: ...

    async def _call_agent(self, node: str, method: str, request: Any, timeout: float) -> Any: ...
