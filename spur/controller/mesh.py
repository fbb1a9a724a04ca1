"""spurctld's side of the WireGuard mesh: the Mesh service and the leader's reconcile task.

- ``Mesh/Join`` (daemon: spurd on ``spur net join``): allocate the node's mesh address from
  ``[network] wg_cidr`` (or keep the one it holds) and record its public key and endpoint. A malformed
  key or endpoint is refused (INVALID_ARGUMENT) and logged; nothing changes and other nodes are not
  affected. A full ``wg_cidr`` is RESOURCE_EXHAUSTED naming the node and the range.
- ``Mesh/Leave`` (daemon): release the address.
- ``Mesh/Members`` (any user): the member set the controller wants for a node.
- ``Mesh/SetPodCidr`` (admin): route a pod CIDR to a node over the mesh (in-process code proposes
  :class:`spur.state.mesh.SetMeshPodCidr` directly).
- :class:`MeshReconcile` (leader duty ``mesh-reconcile``): every ``wg_reconcile_interval_secs``, or as
  soon as the membership changes, release addresses of nodes gone from the inventory and push the
  member set to every meshed agent: what changed since the set it holds (``MeshAgent/ApplyDelta``),
  or the whole set (``MeshAgent/Apply``) to an agent that holds no set of this leader's. The decision is
  :func:`spur.net.reconcile.plan_reconcile`; this task only performs it.

Followers forward Join/Leave/Members to the leader with the caller's metadata.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import trio

from spur.net.model import Member
from spur.net.reconcile import build_member_delta, build_member_set, plan_reconcile
from spur.rpc.forwarding import served_by_leader
from spur.rpc.proto import mesh_pb2
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode
from spur.state.mesh import JoinMesh, LeaveMesh, MeshDomain, SetMeshPodCidr

if TYPE_CHECKING:
    from spur.controller.host import ControllerHost
    from spur.rpc.pool import ChannelPool
    from spur.rpc.stub import Stub

log = logging.getLogger("spur.controller.mesh")

MESH_SERVICE = mesh_pb2.DESCRIPTOR.services_by_name["Mesh"]
AGENT_SERVICE = mesh_pb2.DESCRIPTOR.services_by_name["MeshAgent"]
PUSH_TIMEOUT = 10.0


def mesh_domain(ctl: ControllerHost) -> MeshDomain:
    domain = ctl.state.domains["mesh"]
    assert isinstance(domain, MeshDomain)
    return domain


def member_set_for(ctl: ControllerHost, node: str) -> mesh_pb2.MemberSet:
    domain = mesh_domain(ctl)
    net = ctl.cfg.network
    return build_member_set(
        domain.members(),
        cidr=net.wg_cidr,
        listen_port=net.wg_port,
        version=domain.version,
        node=node,
        address=domain.address_of(node) or "",
    )


_leader_only = served_by_leader(MESH_SERVICE)


class MeshService:
    """``spur.mesh.v1.Mesh`` on the controller port (see the module docstring)."""

    def __init__(self, ctl: ControllerHost) -> None:
        self.ctl = ctl

    def _enabled(self) -> None:
        if not self.ctl.cfg.network.wg_enabled:
            raise RpcError(
                StatusCode.FAILED_PRECONDITION,
                "the WireGuard mesh is disabled on the controller: set [network] wg_enabled = true",
            )

    def _node(self, node: str, context: CallContext, what: str) -> None:
        from spur.controller.admission import check_node_credential

        if not node:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "a node name is required")
        check_node_credential(self.ctl, node, context, what)

    @_leader_only
    async def Join(self, request: mesh_pb2.JoinRequest, context: CallContext) -> mesh_pb2.MemberSet:
        self._enabled()
        self._node(request.node, context, "mesh join")
        cmd = JoinMesh(
            request.node,
            self.ctl.cfg.network.wg_cidr,
            request.public_key,
            request.endpoint,
            self.ctl.clock.wall(),
        )
        try:
            entry = await self.ctl.propose(cmd)
        except RpcError as exc:
            log.warning("mesh join of node %s (from %s) refused: %s", request.node, context.peer, exc.message)
            raise
        log.info("node %s in the mesh at %s (endpoint %s)", entry.node, entry.address, entry.endpoint)
        self.ctl.mesh_changed.set()
        return member_set_for(self.ctl, request.node)

    @_leader_only
    async def Leave(self, request: mesh_pb2.LeaveRequest, context: CallContext) -> mesh_pb2.LeaveResponse:
        self._node(request.node, context, "mesh leave")
        released = await self.ctl.propose(LeaveMesh(request.node, self.ctl.clock.wall()))
        if released:
            log.info("node %s left the mesh; its address is released", request.node)
            self.ctl.mesh_changed.set()
        return mesh_pb2.LeaveResponse(released=bool(released))

    @_leader_only
    async def Members(self, request: mesh_pb2.MembersRequest, context: CallContext) -> mesh_pb2.MemberSet:
        await self.ctl.read_barrier()
        return member_set_for(self.ctl, request.node)

    @_leader_only
    async def SetPodCidr(self, request: mesh_pb2.SetPodCidrRequest, context: CallContext) -> mesh_pb2.Member:
        from spur.auth.callers import require_admin as _require_admin

        ident = _require_admin(context, "routing pod CIDRs over the mesh", self.ctl.state)
        entry = await self.ctl.propose(SetMeshPodCidr(request.node, request.pod_cidr))
        log.info("pod CIDR of node %s set to %r by %s", entry.node, entry.pod_cidr, ident.user)
        self.ctl.mesh_changed.set()
        return mesh_pb2.Member(
            node=entry.node,
            public_key=entry.public_key,
            endpoint=entry.endpoint,
            address=entry.address,
            pod_cidr=entry.pod_cidr,
        )


class MeshReconcile:
    """Leader duty: keep every meshed agent's peers equal to the membership (module docstring)."""

    def __init__(self, ctl: ControllerHost) -> None:
        self.ctl = ctl
        self.previous: dict[str, Member] = {}
        self.previous_version: int | None = None  # the domain version ``previous`` was taken at
        # node -> the version of the set this leader last pushed to it successfully
        self.holds: dict[str, int] = {}
        self.without_delta: set[str] = set()  # agents that do not serve ApplyDelta (older spurd)
        self.passes = 0
        self.last_pass_bytes = 0  # protobuf bytes of the last pass's pushes (the bench reads it)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        from spur.rpc.pool import agent_pool

        task_status.started()
        async with agent_pool(self.ctl.auth.daemon_metadata, tls=self.ctl.client_tls) as pool:
            while True:
                self.ctl.mesh_changed = trio.Event()
                try:
                    await self.reconcile(pool)
                except RpcError as exc:
                    log.warning("mesh reconcile could not commit: %s", exc)
                with trio.move_on_after(self.ctl.cfg.network.wg_reconcile_interval_secs):
                    await self.ctl.mesh_changed.wait()

    async def reconcile(self, pool: ChannelPool) -> dict[str, str]:
        """One pass; returns node -> outcome ("ok" or the error) of each push."""
        ctl = self.ctl
        domain = mesh_domain(ctl)
        for node in domain.departed():
            await ctl.propose(LeaveMesh(node, ctl.clock.wall()))
            log.info("node %s left the inventory: its mesh address is released", node)
        began = time.perf_counter()
        plan = plan_reconcile(domain.members(), self.previous, [])
        message = build_member_set(
            list(plan.members.values()),
            cidr=ctl.cfg.network.wg_cidr,
            listen_port=ctl.cfg.network.wg_port,
            version=domain.version,
        )
        if plan.added or plan.removed or plan.changed:
            log.info(
                "mesh membership: %d members (added %s, removed %s, changed %s) in %.1f ms",
                len(plan.members),
                ",".join(plan.added) or "-",
                ",".join(plan.removed) or "-",
                ",".join(plan.changed) or "-",
                (time.perf_counter() - began) * 1000,
            )
        delta = None
        if self.previous_version is not None:
            delta = build_member_delta(
                plan,
                base_version=self.previous_version,
                version=message.version,
                cidr=ctl.cfg.network.wg_cidr,
                listen_port=ctl.cfg.network.wg_port,
            )
        base_version, version = self.previous_version, message.version
        self.previous, self.previous_version = plan.members, version
        self.holds = {n: v for n, v in self.holds.items() if n in plan.members}
        outcomes: dict[str, str] = {}
        pushed = 0

        async def send(stub: Stub, node_name: str) -> Any:
            nonlocal pushed
            if (
                delta is not None
                and node_name not in self.without_delta
                and self.holds.get(node_name) == base_version
            ):
                try:
                    pushed += delta.ByteSize()
                    result = await stub.ApplyDelta(delta, timeout=PUSH_TIMEOUT)
                    if not result.need_whole_set:
                        return result
                except RpcError as exc:
                    if exc.code != StatusCode.UNIMPLEMENTED:
                        raise
                    self.without_delta.add(node_name)
                    log.info(
                        "node %s takes no mesh deltas (an older spurd): pushing it whole sets", node_name
                    )
            pushed += message.ByteSize()
            return await stub.Apply(message, timeout=PUSH_TIMEOUT)

        async def push(node_name: str) -> None:
            node = ctl.state.nodes.get(node_name)
            if node is None:
                return
            try:
                channel_stub = await pool.stub(node.address, node.port)
                from spur.rpc.stub import Stub

                stub = Stub(channel_stub.channel, AGENT_SERVICE)
                result = await send(stub, node_name)
            except RpcError as exc:
                self.holds.pop(node_name, None)
                outcomes[node_name] = exc.message
                log.warning("mesh push to node %s failed: %s", node_name, exc.message)
                return
            self.holds[node_name] = version
            outcomes[node_name] = "ok"
            if result.added or result.updated or result.removed or result.recreated:
                log.info(
                    "mesh push to %s: +%d ~%d -%d peers%s",
                    node_name,
                    result.added,
                    result.updated,
                    result.removed,
                    " (interface rebuilt)" if result.recreated else "",
                )

        async with trio.open_nursery() as nursery:
            for node_name in plan.push_to:
                nursery.start_soon(push, node_name)
        self.passes += 1
        self.last_pass_bytes = pushed
        return outcomes
