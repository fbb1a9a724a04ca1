"""``spur.inventory.v1.Inventory``: taking nodes out of the inventory. Served by the leader (followers
forward with the caller's metadata).

- ``RemoveNodes`` (admin; ``scontrol delete NodeName=``): a node with running jobs is refused. A removed
  node's spurd that is still running registers again at its next heartbeat, so stop it first.
- ``RemoveNode`` (daemon or admin, see ``METHOD_PRIVILEGE``; the Kubernetes operator calls it when a
  Kubernetes node is deleted): the node is gone for good, so its running jobs end NODE_FAIL.

Either way the node's mesh entry is released by the mesh reconcile and it leaves every peer list.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from spur.rpc.forwarding import served_by_leader
from spur.rpc.proto import inventory_pb2
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode
from spur.state import commands as c

if TYPE_CHECKING:
    from spur.controller.host import ControllerHost

log = logging.getLogger("spur.controller.inventory")

SERVICE = inventory_pb2.DESCRIPTOR.services_by_name["Inventory"]


class InventoryService:
    def __init__(self, ctl: ControllerHost) -> None:
        self.ctl = ctl

    @served_by_leader(SERVICE)
    async def RemoveNodes(
        self, request: inventory_pb2.RemoveNodesRequest, context: CallContext
    ) -> inventory_pb2.RemoveNodesResponse:
        from spur.auth.callers import require_admin as _require_admin

        ident = _require_admin(context, "removing nodes (scontrol delete NodeName=...)", self.ctl.state)
        from spur.core.hostlist import HostlistError, expand

        try:
            names = expand(request.nodes)
        except HostlistError as exc:
            raise RpcError(StatusCode.INVALID_ARGUMENT, f"Invalid node name specified: {exc}") from None
        if not names:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "Invalid node name specified: none given")
        removed = await self.ctl.propose(c.RemoveNode(names, self.ctl.clock.wall()))
        for name in removed:
            self.ctl.last_seen.pop(name, None)
        self.ctl.mesh_changed.set()
        log.info("nodes removed from the inventory by %s: %s", ident.user, ",".join(removed))
        return inventory_pb2.RemoveNodesResponse(removed=removed)

    @served_by_leader(SERVICE)
    async def RemoveNode(
        self, request: inventory_pb2.RemoveNodeRequest, context: CallContext
    ) -> inventory_pb2.RemoveNodeResponse:
        if not request.name:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "node name is required")
        failed = await self.ctl.propose(c.ForgetNode(request.name, self.ctl.clock.wall()))
        self.ctl.last_seen.pop(request.name, None)
        self.ctl.mesh_changed.set()
        log.info(
            "node %s removed (%s)%s",
            request.name,
            request.reason or "no reason given",
            f"; jobs {', '.join(map(str, failed))} ended NODE_FAIL" if failed else "",
        )
        self.ctl.kick_scheduler()
        return inventory_pb2.RemoveNodeResponse(failed_job_ids=failed)
