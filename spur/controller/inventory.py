"""``spur.inventory.v1.Inventory``: removing nodes from the inventory (``scontrol delete NodeName=``).

Admin only, served by the leader (followers forward with the caller's metadata). A node with running
jobs is refused. A removed node's spurd that is still running registers again at its next heartbeat,
so stop it first; its mesh entry is released by the mesh reconcile and it leaves every peer list.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from spur.rpc.proto import inventory_pb2
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode
from spur.state import commands as c

if TYPE_CHECKING:
    from spur.controller.app import Controller

log = logging.getLogger("spur.controller.inventory")

SERVICE = inventory_pb2.DESCRIPTOR.services_by_name["Inventory"]


class InventoryService:
    def __init__(self, ctl: Controller) -> None:
        self.ctl = ctl

    async def RemoveNodes(
        self, request: inventory_pb2.RemoveNodesRequest, context: CallContext
    ) -> inventory_pb2.RemoveNodesResponse:
        from spur.controller.service import _require_admin

        if not self.ctl.is_leader:
            from spur.rpc.stub import Stub

            leader = await self.ctl.leader_stub()
            remaining = context.time_remaining() if context.deadline is not None else None
            return await Stub(leader.channel, SERVICE).RemoveNodes(
                request, timeout=remaining or 30.0, metadata=dict(context.metadata)
            )
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
