"""In-process Raft clusters over real loopback sockets, for tests and benchmarks.

`open_cluster` starts N members (each with its own storage directory, its own Raft gRPC server on a free
loopback port, and a `KeyValue` state machine) sharing one `FaultSwitch`. Members can be stopped (their
task is cancelled: a crash as far as the others can tell) and restarted from their storage. Every
(term, leader) pair any member reaches is recorded in `Cluster.leaders`; two leaders in one term raise
`AssertionError` at once.
"""

from __future__ import annotations

import json
import random
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import trio

from spur.raft.faults import FaultSwitch
from spur.raft.node import NotLeader, RaftNode, Role
from spur.raft.storage import RaftStorage


def _not_leader(node: RaftNode) -> bool:
    return node.role is not Role.LEADER


class KeyValue:
    """A tiny state machine: JSON commands ``{"put": [key, value]}`` and ``{"add": [key, n]}``.

    `put` returns the previous value, `add` the new total. `applied` counts, per command ``id`` field,
    how many times a command was applied (part of the replicated state, so it survives snapshots).
    `handed` records, by log index, the proposer's objects Raft handed to `apply` (not state: each
    member's own); the commands are always read from the bytes.
    """

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.applied: dict[str, int] = {}
        self.handed: dict[int, object] = {}

    def apply(self, index: int, data: bytes, proposed: object | None = None) -> Any:
        if proposed is not None:
            self.handed[index] = proposed
        cmd = json.loads(data)
        if "id" in cmd:
            self.applied[cmd["id"]] = self.applied.get(cmd["id"], 0) + 1
        if "put" in cmd:
            key, value = cmd["put"]
            previous = self.data.get(key)
            self.data[key] = value
            return previous
        key, n = cmd["add"]
        self.data[key] = self.data.get(key, 0) + n
        return self.data[key]

    def snapshot(self) -> bytes:
        return json.dumps({"data": self.data, "applied": self.applied}, sort_keys=True).encode()

    def restore(self, data: bytes) -> None:
        state = json.loads(data)
        self.data, self.applied = state["data"], state["applied"]

    def decode_snapshot(self, data: bytes) -> object:
        state = json.loads(data)
        if not isinstance(state, dict) or not isinstance(state.get("data"), dict):
            raise ValueError("not a KeyValue snapshot")
        if not isinstance(state.get("applied"), dict):
            raise ValueError("not a KeyValue snapshot")
        return state

    def adopt(self, decoded: object) -> None:
        assert isinstance(decoded, dict)
        self.data, self.applied = decoded["data"], decoded["applied"]

    def check_command(self, data: bytes) -> None:
        cmd = json.loads(data)
        if not isinstance(cmd, dict) or not ("put" in cmd or "add" in cmd):
            raise ValueError("a KeyValue command is an object with 'put' or 'add'")


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports that were free a moment ago."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass(eq=False)
class Member:
    """One member slot: its node and state machine while running, its storage directory always."""

    id: int
    directory: Path
    node: RaftNode | None = None
    sm: KeyValue | None = None
    scope: trio.CancelScope | None = None
    stopped: trio.Event = field(default_factory=trio.Event)
    storage: RaftStorage | None = None


class Cluster:
    """A running in-process cluster; made by `open_cluster`."""

    def __init__(
        self, nursery: trio.Nursery, directory: Path, size: int, node_options: dict[str, Any]
    ) -> None:
        self.nursery = nursery
        self.faults = FaultSwitch()
        self.peers = [f"127.0.0.1:{port}" for port in free_ports(size)]
        self.members = {i: Member(i, directory / f"n{i}") for i in range(1, size + 1)}
        self.leaders: dict[int, int] = {}  # term -> leader id
        self.fsync = node_options.pop("fsync", False)
        self.options = node_options
        self._seed = node_options.pop("seed", 1)
        self.key: bytes | None = node_options.pop("key", None)  # each member's Raft credential key
        self._changed = trio.Event()

    def _signal(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def node(self, member: int) -> RaftNode:
        """The running node of `member` (AssertionError if it is stopped)."""
        node = self.members[member].node
        assert node is not None, f"member {member} is not running"
        return node

    def running(self) -> list[RaftNode]:
        return [m.node for m in self.members.values() if m.node is not None]

    def state(self, member: int) -> KeyValue:
        sm = self.members[member].sm
        assert sm is not None, f"member {member} is not running"
        return sm

    async def start(self, member: int, **overrides: Any) -> RaftNode:
        """Start (or restart, from its storage) `member`."""
        slot = self.members[member]
        assert slot.node is None, f"member {member} is already running"
        slot.stopped = trio.Event()
        slot.storage = RaftStorage(slot.directory, fsync=self.fsync)
        slot.sm = KeyValue()
        options = {**self.options, **overrides}
        if self.key is not None and "credentials" not in options:
            from spur.raft.auth import JwtRaftCredentials

            options["credentials"] = JwtRaftCredentials(self.key, member)
        slot.node = RaftNode(
            node_id=member,
            storage=slot.storage,
            state_machine=slot.sm,
            peers=self.peers,
            faults=self.faults,
            rng=random.Random(self._seed * 1000 + member + len(self.leaders)),
            **options,
        )
        await self.nursery.start(self._host, slot)
        self._signal()
        return slot.node

    async def _host(self, slot: Member, *, task_status: trio.TaskStatus[None]) -> None:
        assert slot.node is not None and slot.storage is not None
        node = slot.node
        try:
            with trio.CancelScope() as slot.scope:
                async with trio.open_nursery() as nursery:
                    await nursery.start(node.run)
                    nursery.start_soon(self._watch, node)
                    task_status.started()
        finally:
            slot.storage.close()
            slot.node = slot.sm = slot.scope = None
            slot.stopped.set()
            self._signal()

    async def _watch(self, node: RaftNode) -> None:
        role = node.role
        while True:
            role = await node.wait_role_change(role)
            if role is Role.LEADER:
                other = self.leaders.setdefault(node.term, node.node_id)
                assert other == node.node_id, f"two leaders in term {node.term}: {other} and {node.node_id}"
            self._signal()

    async def stop(self, member: int) -> None:
        """Crash `member`: cancel its task (its server goes away) and wait until it is gone."""
        slot = self.members[member]
        if slot.scope is not None:
            slot.scope.cancel()
        await slot.stopped.wait()

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds; re-checked on every state change of any running member."""
        while not predicate():
            changed = self._changed
            async with trio.open_nursery() as nursery:

                async def wake(node: RaftNode) -> None:
                    await node.wait_for(predicate)
                    nursery.cancel_scope.cancel()

                async def wake_on_cluster(changed: trio.Event = changed) -> None:
                    await changed.wait()
                    nursery.cancel_scope.cancel()

                for node in self.running():
                    nursery.start_soon(wake, node)
                nursery.start_soon(wake_on_cluster)

    def leader(self) -> RaftNode | None:
        """The running member that is leader in the highest term, if any."""
        leaders = [n for n in self.running() if n.role is Role.LEADER]
        return max(leaders, key=lambda n: n.term) if leaders else None

    async def wait_leader(self, among: set[int] | None = None) -> RaftNode:
        """Wait for a leader (among `among` when given) that has committed its term's no-op."""

        def found() -> bool:
            node = self.leader()
            return (
                node is not None
                and (among is None or node.node_id in among)
                and node.commit_index >= node.term_start_index
            )

        await self.until(found)
        node = self.leader()
        assert node is not None
        return node

    async def propose(self, command: dict[str, Any]) -> Any:
        """Propose at the current leader (waiting for one), retrying while none is known. Not idempotent:
        only for commands that tolerate a retry after NotLeader."""
        while True:
            node = await self.wait_leader()
            try:
                return await node.propose(json.dumps(command).encode())
            except NotLeader:
                await self.until(partial(_not_leader, node))


@asynccontextmanager
async def open_cluster(directory: Path, size: int, **node_options: Any) -> AsyncIterator[Cluster]:
    """Start a `size`-member cluster with its storage under `directory`; stopped when the block exits.

    `node_options` go to every RaftNode (``election_timeout``, ``heartbeat_interval``, ...), plus
    ``fsync`` (storage fsync, default False), ``seed`` (election timer randomness) and ``key`` (the cluster
    key: each member then sends and requires a Raft credential, `spur.raft.auth.JwtRaftCredentials`).
    """
    async with trio.open_nursery() as nursery:
        cluster = Cluster(nursery, Path(directory), size, dict(node_options))
        for member in cluster.members:
            await cluster.start(member)
        try:
            yield cluster
        finally:
            nursery.cancel_scope.cancel()
