"""spurctld's Inventory service (``spur.inventory.v1.Inventory``): removing a node from the cluster.

``RemoveNode`` is for daemons and administrators (``METHOD_PRIVILEGE``: the Kubernetes operator calls it
when a Kubernetes node is deleted). It is served by the leader; followers forward it with the
caller's metadata. The node's running jobs end NODE_FAIL (as when a node goes DOWN), then the node
leaves the inventory and so every partition. An unknown node is NOT_FOUND.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from spur.rpc.proto import inventory_pb2 as ipb
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode
from spur.state import commands as c

if TYPE_CHECKING:
    from spur.controller.app import Controller

__all__ = ["InventoryService", "SERVICE"]

log = logging.getLogger("spur.controller")

SERVICE = ipb.DESCRIPTOR.services_by_name["Inventory"]


class InventoryService:
    def __init__(self, ctl: Controller) -> None:
        self.ctl = ctl

    async def RemoveNode(
        self, request: ipb.RemoveNodeRequest, context: CallContext
    ) -> ipb.RemoveNodeResponse:
        if not request.name:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "node name is required")
        if not self.ctl.is_leader:
            from spur.rpc.stub import Stub

            leader = await self.ctl.leader_stub()
            remaining = context.time_remaining() if context.deadline is not None else None
            return await Stub(leader.channel, SERVICE).RemoveNode(
                request, timeout=remaining or 30.0, metadata=dict(context.metadata)
            )
        failed = await self.ctl.propose(c.RemoveNode(request.name, self.ctl.clock.wall()))
        self.ctl.last_seen.pop(request.name, None)
        log.info(
            "node %s removed (%s)%s",
            request.name,
            request.reason or "no reason given",
            f"; jobs {', '.join(map(str, failed))} ended NODE_FAIL" if failed else "",
        )
        self.ctl.kick_scheduler()
        return ipb.RemoveNodeResponse(failed_job_ids=failed)
