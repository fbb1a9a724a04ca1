"""What the K8sCluster service's helpers (kubeconfig.py, removal.py) use of the service.

``spur.k8s.cluster.service.K8sClusterService`` imports those helpers and passes itself; they are
typed against :class:`ClusterServiceHost`, so the imports run one way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from spur.auth.identity import Identity
    from spur.controller.host import ControllerHost
    from spur.k8s.cluster.planner import Inventory
    from spur.rpc.server import CallContext
    from spur.state.k8s_cluster import K8sClusterRecord

__all__ = ["ClusterServiceHost"]


class ClusterServiceHost(Protocol):
    @property
    def ctl(self) -> ControllerHost: ...

    @property
    def record(self) -> K8sClusterRecord: ...

    def _inventory(self) -> Inventory: ...

    def _caller(self, context: CallContext) -> Identity: ...

    def _admin(self, context: CallContext, what: str) -> Identity: ...

    async def _call_agent(self, node: str, method: str, request: Any, timeout: float) -> Any: ...
