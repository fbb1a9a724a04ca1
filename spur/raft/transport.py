"""Raft messages over the project's gRPC layer: the `Raft` service and the client side to every peer.

Server side: `RaftService` forwards each RPC to the member's handler methods (``on_request_vote``,
``on_append_entries``, ``on_install_snapshot``); register it with
``Server.add_service(RAFT_SERVICE, RaftService(node))``. `RaftNode.run` does this itself on its listen
address; the class is public so a process can also host the service on a server of its own.

Client side: `PeerClients` keeps one channel (one HTTP/2 connection, reopened after a failure) per peer
for as long as the member runs; every call carries a deadline and, when the member has one, its Raft
credential (`spur.raft.auth`). Both sides consult the optional `FaultSwitch` (see `spur.raft.faults`).

A call whose context carries a verified sender (``context.identity`` a `RaftPeer`, set by
`spur.raft.auth.raft_interceptor`) must name that sender as its leader or candidate id: any other id is
refused with PERMISSION_DENIED before the member sees the request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import trio
from google.protobuf.message import Message

from spur.raft.auth import OutgoingCredential, RaftPeer
from spur.raft.faults import FaultSwitch
from spur.rpc.channel import open_channel
from spur.rpc.proto import raft_pb2 as pb
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import Stub

if TYPE_CHECKING:
    from spur.rpc.tls import ClientTLS

RAFT_SERVICE = pb.DESCRIPTOR.services_by_name["Raft"]

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


class RaftHandler(Protocol):
    """What `RaftService` serves: the receiving member's side of each RPC."""

    @property
    def node_id(self) -> int: ...

    async def on_request_vote(self, request: pb.RequestVoteRequest) -> pb.RequestVoteResponse: ...

    async def on_append_entries(self, request: pb.AppendEntriesRequest) -> pb.AppendEntriesResponse: ...

    async def on_install_snapshot(self, request: pb.InstallSnapshotRequest) -> pb.InstallSnapshotResponse: ...


class RaftService:
    """The gRPC servicer of the `spur.raft.v1.Raft` service for one member."""

    def __init__(self, handler: RaftHandler, faults: FaultSwitch | None = None) -> None:
        self._handler = handler
        self._faults = faults

    async def RequestVote(
        self, request: pb.RequestVoteRequest, context: CallContext
    ) -> pb.RequestVoteResponse:
        return await self._serve(request.candidate_id, self._handler.on_request_vote, request, context)

    async def AppendEntries(
        self, request: pb.AppendEntriesRequest, context: CallContext
    ) -> pb.AppendEntriesResponse:
        return await self._serve(request.leader_id, self._handler.on_append_entries, request, context)

    async def InstallSnapshot(
        self, request: pb.InstallSnapshotRequest, context: CallContext
    ) -> pb.InstallSnapshotResponse:
        return await self._serve(request.leader_id, self._handler.on_install_snapshot, request, context)

    async def _serve(
        self, src: int, handler: Callable[[Req], Awaitable[Resp]], request: Req, context: CallContext
    ) -> Resp:
        sender = context.identity
        if isinstance(sender, RaftPeer) and sender.member != src:
            raise RpcError(
                StatusCode.PERMISSION_DENIED,
                f"the request names member {src} but its credential is member {sender.member}'s",
            )
        me = self._handler.node_id
        if self._faults is not None and self._faults.drops(src, me):
            await trio.sleep_forever()  # the request is "lost": the caller's deadline ends the call
        response = await handler(request)
        if self._faults is not None and self._faults.drops(me, src):
            await trio.sleep_forever()  # the reply is "lost" although the request took effect
        return response


class PeerClients:
    """Calls to the other members of a group, by member id. Made by `open_peer_clients`."""

    def __init__(self, node_id: int, stubs: Mapping[int, Stub], faults: FaultSwitch | None) -> None:
        self._node_id = node_id
        self._stubs = dict(stubs)
        self._faults = faults

    async def call(self, peer: int, method: str, request: Message, timeout: float) -> Any:
        """Call `method` on member `peer` with a deadline of `timeout` seconds; raises RpcError on failure
        (DEADLINE_EXCEEDED for a message the fault switch drops)."""
        stub = self._stubs[peer]
        if self._faults is not None:
            delay = self._faults.delay_of(self._node_id, peer)
            if self._faults.drops(self._node_id, peer):
                await trio.sleep(timeout)
                raise RpcError(
                    StatusCode.DEADLINE_EXCEEDED, f"message to member {peer} dropped (fault switch)"
                )
            if delay:
                await trio.sleep(delay)
        return await getattr(stub, method)(request, timeout=timeout)


@asynccontextmanager
async def open_peer_clients(
    node_id: int,
    addresses: Mapping[int, str],
    *,
    connect_timeout: float,
    faults: FaultSwitch | None = None,
    credential: OutgoingCredential | None = None,
    tls: ClientTLS | None = None,
) -> AsyncIterator[PeerClients]:
    """Channels to each ``{member id: "host:port"}`` in `addresses` for the duration of the block; every
    call carries `credential`'s metadata when one is given (`tls`: spur.rpc.tls.ClientTLS for every
    channel; None = plaintext)."""
    provider = credential.outgoing_metadata if credential is not None else None
    async with AsyncExitStack() as stack:
        stubs = {}
        for peer, address in addresses.items():
            channel = await stack.enter_async_context(
                open_channel(
                    address,
                    connect_timeout=connect_timeout,
                    keepalive_interval=10.0,
                    metadata_provider=provider,
                    tls=tls,
                )
            )
            stubs[peer] = Stub(channel, RAFT_SERVICE)
        yield PeerClients(node_id, stubs, faults)
