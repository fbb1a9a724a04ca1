"""spurd's side of the WireGuard mesh: the MeshAgent service (``spur net ...`` and the leader's push).

Decision (documented in docs/mesh.md): the ``spur net`` commands do not touch the interface
themselves. They run as root on the node and ask the local spurd (``MeshAgent`` on the agent port);
spurd owns the interface, the key and the backend, because the leader's reconcile pushes go to it
anyway and both paths must use the same state.

- ``Join``: load or create the X25519 private key (``<state_dir>/mesh/private.key``, mode 0600,
  never sent anywhere), publish the public key and endpoint to the controller (``Mesh/Join``), which
  answers with the node's mesh address and the member set; create the interface (backend chosen at
  run time), give it the address, bring it up and apply the peers. Idempotent.
- ``Leave``: ``Mesh/Leave`` (the address is released), delete the interface and the key.
- ``ApplyDelta`` (leader push of what changed since the set this agent holds; it asks for the
  whole set when it holds another), ``Apply`` (leader push of the whole set) and ``ApplyWanted``
  (``spur net mesh --apply``): rebuild the interface if it
  vanished (reboot, wireguard-go killed), then add/update/prune peers, AllowedIPs and pod-CIDR routes.
  A push also republishes a detected endpoint that moved (the node got another address).
- ``Status``: interface, backend, peers with handshake and bytes, and what differs from the
  controller's view.

After a spurd restart on a joined node, :meth:`MeshAgent.rejoin` publishes the key and endpoint again
(with retries until the node is registered) and rebuilds the interface.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from spur.net import links
from spur.net.backend import BackendError, WgBackend, new_private_key, public_key_of, select_backend
from spur.net.endpoint import endpoint_from_address
from spur.net.model import Member, desired_peers, diff_peers, pod_routes
from spur.net.reconcile import member_from_proto, merge_member_delta
from spur.rpc.proto import mesh_pb2
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode

log = logging.getLogger("spur.agent.mesh")

MESH_SERVICE = mesh_pb2.DESCRIPTOR.services_by_name["Mesh"]
AGENT_SERVICE = mesh_pb2.DESCRIPTOR.services_by_name["MeshAgent"]


class MeshAgent:
    """``spur.mesh.v1.MeshAgent`` (see the module docstring)."""

    def __init__(
        self,
        *,
        node: str,
        state_dir: Path,
        ifname: str,
        listen_port: int,
        endpoint: str | None,
        call_controller: Callable[..., Awaitable[Any]],
        controller_target: Callable[[], str],
        backend: str = "auto",
    ) -> None:
        self.node = node
        self.dir = state_dir / "mesh"
        self.ifname = ifname
        self.listen_port = listen_port
        self.endpoint_option = endpoint
        self._call = call_controller
        self._target = controller_target
        self._prefer = backend
        self._backend: WgBackend | None = None
        self._lock = trio.Lock()
        self.last_set: mesh_pb2.MemberSet | None = None

    # ------------------------------------------------------------------ local state

    @property
    def key_path(self) -> Path:
        return self.dir / "private.key"

    @property
    def joined_path(self) -> Path:
        return self.dir / "joined.json"

    def joined(self) -> bool:
        return self.joined_path.exists() and self.key_path.exists()

    def backend(self) -> WgBackend:
        if self._backend is None:
            try:
                self._backend = select_backend(self.ifname, self._prefer)
            except BackendError as exc:
                raise RpcError(StatusCode.FAILED_PRECONDITION, str(exc)) from None
        return self._backend

    def _private_key(self, *, create: bool) -> str | None:
        """The stored private key; with ``create``, a new one (not yet stored) when there is none."""
        try:
            return self.key_path.read_text().strip()
        except FileNotFoundError:
            return new_private_key() if create else None

    def _store_key(self, key: str) -> None:
        """Write the private key, mode 0600 from the start (never readable by others, never logged)."""
        if self.key_path.exists():
            return
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key + "\n")
        log.info("new WireGuard key pair for %s (public %s)", self.ifname, public_key_of(key))

    async def _endpoint(self) -> str:
        if self.endpoint_option:
            return self.endpoint_option
        from spur.agent.controller_link import local_address_towards

        return endpoint_from_address(await local_address_towards(self._target()), self.listen_port)

    # ------------------------------------------------------------------ work

    async def _publish(self, key: str) -> mesh_pb2.MemberSet:
        """Publish the public key and endpoint; the controller's ``wg_port`` is the one the device
        listens on, so a detected endpoint is published again with it when this node's config differs."""
        request = mesh_pb2.JoinRequest(
            node=self.node, public_key=public_key_of(key), endpoint=await self._endpoint()
        )
        answer = await self._call("Join", request, service=MESH_SERVICE)
        if answer.listen_port and answer.listen_port != self.listen_port and not self.endpoint_option:
            log.info(
                "using the controller's [network] wg_port %d (this node has %d)",
                answer.listen_port,
                self.listen_port,
            )
            self.listen_port = answer.listen_port
            request.endpoint = await self._endpoint()
            answer = await self._call("Join", request, service=MESH_SERVICE)
        return answer

    async def _apply(self, member_set: mesh_pb2.MemberSet) -> mesh_pb2.ApplyResult:
        """Make the interface match ``member_set`` (caller holds the lock)."""
        key = self._private_key(create=False)
        if key is None or not self.joined_path.exists():
            raise RpcError(
                StatusCode.FAILED_PRECONDITION, f"node {self.node} has not joined the mesh (spur net join)"
            )
        members = [member_from_proto(m) for m in member_set.members]
        me = next((m for m in members if m.node == self.node), None)
        address = me.address if me is not None else (member_set.address or self._saved_address())
        if not address:
            raise RpcError(
                StatusCode.FAILED_PRECONDITION, f"the controller has no mesh address for node {self.node}"
            )
        backend = self.backend()
        result = mesh_pb2.ApplyResult()
        try:
            if not await backend.exists():
                await backend.create(key, member_set.listen_port or self.listen_port)
                result.recreated = True
            elif (await backend.device()).listen_port != (member_set.listen_port or self.listen_port):
                await backend.create(key, member_set.listen_port or self.listen_port)
            prefix = ipaddress.ip_network(member_set.cidr, strict=False).prefixlen if member_set.cidr else 32
            await links.set_address_and_up(self.ifname, address, prefix)
            actual = (await backend.device()).peers
            wanted = desired_peers(members, self.node)
            diff = diff_peers(actual, wanted)
            await backend.apply(diff)
            if member_set.cidr:
                await links.sync_routes(self.ifname, pod_routes(members, self.node, member_set.cidr))
        except BackendError as exc:
            raise RpcError(StatusCode.INTERNAL, f"mesh interface {self.ifname}: {exc}") from None
        result.added = sum(1 for p in diff.upsert if p.public_key not in actual)
        result.updated = len(diff.upsert) - result.added
        result.removed = len(diff.remove)
        self.last_set = member_set
        self._save(address, member_set)
        return result

    def _save(self, address: str, member_set: mesh_pb2.MemberSet) -> None:
        data = {"address": address, "cidr": member_set.cidr, "listen_port": member_set.listen_port}
        tmp = self.joined_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(self.joined_path)

    def _saved_address(self) -> str:
        try:
            return str(json.loads(self.joined_path.read_text()).get("address", ""))
        except (OSError, ValueError):
            return ""

    async def join(self) -> mesh_pb2.NetStatus:
        async with self._lock:
            self.backend()  # no WireGuard on this host: say so before publishing anything
            key = self._private_key(create=True)
            assert key is not None
            member_set = await self._publish(key)
            self._store_key(key)  # only once the controller accepted it: a refused join leaves nothing
            if not self.joined_path.exists():
                self._save(member_set.address, member_set)
            await self._apply(member_set)
            log.info(
                "joined the mesh as %s on %s (%s backend)",
                member_set.address,
                self.ifname,
                self.backend().name,
            )
        return await self.status()

    async def leave(self) -> mesh_pb2.NetStatus:
        async with self._lock:
            await self._call("Leave", mesh_pb2.LeaveRequest(node=self.node), service=MESH_SERVICE)
            try:
                if await self.backend().exists() or await links.link_index(self.ifname) is not None:
                    await self.backend().destroy()
            except BackendError as exc:
                raise RpcError(StatusCode.INTERNAL, f"mesh interface {self.ifname}: {exc}") from None
            self.joined_path.unlink(missing_ok=True)
            self.key_path.unlink(missing_ok=True)
            self.last_set = None
            log.info("left the mesh: %s removed, key deleted, address released", self.ifname)
        return await self.status()

    async def apply(self, member_set: mesh_pb2.MemberSet) -> mesh_pb2.ApplyResult:
        """A push: apply it; when this node's detected endpoint moved (a new address), publish the
        new one so the next push carries it to the peers."""
        async with self._lock:
            return await self._apply_push(member_set)

    async def _apply_push(self, member_set: mesh_pb2.MemberSet) -> mesh_pb2.ApplyResult:
        """:meth:`apply` with the lock held."""
        result = await self._apply(member_set)
        me = next((m for m in member_set.members if m.node == self.node), None)
        if me is not None and not self.endpoint_option:
            detected = await self._endpoint()
            if detected != me.endpoint:
                log.info("endpoint moved from %s to %s: publishing it", me.endpoint, detected)
                key = self._private_key(create=False)
                assert key is not None
                await self._publish(key)
        return result

    async def apply_delta(self, delta: mesh_pb2.MemberDelta) -> mesh_pb2.ApplyResult:
        """A push of what changed since the set this agent holds: merged into it and applied as
        :meth:`apply`; ``need_whole_set`` (nothing applied) when the held set is not the delta's base
        (none held since spurd started, or pushes were missed)."""
        async with self._lock:
            merged = merge_member_delta(self.last_set, delta)
            if merged is None:
                held = self.last_set.version if self.last_set is not None else None
                log.info(
                    "mesh delta %d->%d does not apply to the held set (%s): asking for the whole set",
                    delta.base_version,
                    delta.version,
                    "none" if held is None else f"version {held}",
                )
                return mesh_pb2.ApplyResult(need_whole_set=True)
            return await self._apply_push(merged)

    async def wanted(self) -> mesh_pb2.MemberSet:
        return await self._call("Members", mesh_pb2.MembersRequest(node=self.node), service=MESH_SERVICE)

    async def rejoin(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """On start of a joined node: publish again and rebuild the interface (retrying until the
        node is registered and a controller answers)."""
        task_status.started()
        if not self.joined():
            return
        delay = 0.5
        while True:
            try:
                async with self._lock:
                    if not self.joined():
                        return
                    key = self._private_key(create=False)
                    assert key is not None
                    await self._apply(await self._publish(key))
                log.info("mesh interface %s restored after restart", self.ifname)
                return
            except RpcError as exc:
                log.info("restoring the mesh interface failed (retrying): %s", exc.message)
            await trio.sleep(delay)
            delay = min(delay * 2, 10.0)

    async def status(self) -> mesh_pb2.NetStatus:
        out = mesh_pb2.NetStatus(joined=self.joined(), interface=self.ifname, listen_port=self.listen_port)
        key = self._private_key(create=False)
        if key is not None:
            out.public_key = public_key_of(key)
        try:
            backend = self.backend()
            out.backend = backend.name
        except RpcError as exc:
            out.disagreements.append(exc.message)
            return out
        info = await links.link_info(self.ifname)
        actual: dict[str, Any] = {}
        if info is not None:
            out.interface_up, addrs = info
            out.address = addrs[0] if addrs else ""
            try:
                device = await backend.device()
                actual = device.peers
                out.listen_port = device.listen_port or out.listen_port
            except BackendError as exc:
                out.disagreements.append(f"cannot read {self.ifname}: {exc}")
        try:
            wanted_set = await self.wanted()
        except RpcError as exc:
            wanted_set = None
            out.disagreements.append(f"controller not reachable: {exc.message}")
        members: list[Member] = [member_from_proto(m) for m in wanted_set.members] if wanted_set else []
        by_key = {m.public_key: m.node for m in members}
        for key_b64, peer in sorted(actual.items(), key=lambda kv: by_key.get(kv[0], "~" + kv[0])):
            out.peers.append(
                mesh_pb2.PeerStatus(
                    node=by_key.get(key_b64, ""),
                    public_key=key_b64,
                    endpoint=peer.endpoint,
                    allowed_ips=list(peer.allowed_ips),
                    last_handshake=peer.last_handshake,
                    rx_bytes=peer.rx_bytes,
                    tx_bytes=peer.tx_bytes,
                )
            )
        if wanted_set is not None:
            out.disagreements.extend(disagreements(self.node, out, members, actual, wanted_set))
        return out


def disagreements(
    node: str, status: mesh_pb2.NetStatus, members: list[Member], actual: dict[str, Any], wanted_set: mesh_pb2.MemberSet
) -> list[str]:
    """Human-readable differences between this node's interface and the controller's view."""
    out: list[str] = []
    me = next((m for m in members if m.node == node), None)
    if not status.joined and me is None:
        return out
    if status.joined and me is None:
        out.append(f"the controller has no mesh entry with a key for node {node} (run spur net join)")
    if me is not None and status.public_key and me.public_key != status.public_key:
        out.append("the controller holds another public key for this node (run spur net join)")
    if not status.interface_up:
        out.append(f"interface {status.interface} is missing or down")
    if me is not None and status.address and status.address.split("/")[0] != me.address:
        out.append(f"interface address {status.address} but the controller assigned {me.address}")
    wanted = desired_peers(members, node)
    diff = diff_peers(actual, wanted)
    names = {m.public_key: m.node for m in members}
    for change in diff.upsert:
        what = "missing" if change.public_key not in actual else "out of date"
        out.append(f"peer {names.get(change.public_key, change.public_key)} {what}")
    for key in diff.remove:
        out.append(f"peer {key} is not a member (would be pruned)")
    return out


class MeshAgentServicer:
    """The gRPC face of :class:`MeshAgent`."""

    def __init__(self, agent: MeshAgent) -> None:
        self.agent = agent

    async def JoinMesh(self, request: mesh_pb2.NetEmpty, context: CallContext) -> mesh_pb2.NetStatus:
        return await self.agent.join()

    async def LeaveMesh(self, request: mesh_pb2.NetEmpty, context: CallContext) -> mesh_pb2.NetStatus:
        return await self.agent.leave()

    async def Apply(self, request: mesh_pb2.MemberSet, context: CallContext) -> mesh_pb2.ApplyResult:
        return await self.agent.apply(request)

    async def ApplyDelta(self, request: mesh_pb2.MemberDelta, context: CallContext) -> mesh_pb2.ApplyResult:
        return await self.agent.apply_delta(request)

    async def ApplyWanted(self, request: mesh_pb2.NetEmpty, context: CallContext) -> mesh_pb2.ApplyResult:
        return await self.agent.apply(await self.agent.wanted())

    async def Wanted(self, request: mesh_pb2.NetEmpty, context: CallContext) -> mesh_pb2.MemberSet:
        return await self.agent.wanted()

    async def Status(self, request: mesh_pb2.NetEmpty, context: CallContext) -> mesh_pb2.NetStatus:
        return await self.agent.status()
