"""A Raft member driving a deterministic state machine from a durable log.

Only the one-member group is implemented: at start the node loads its storage, replays snapshot and log
into the state machine, starts a new term in which it votes for itself (persisted before it acts as
leader), and from then on commits every proposal as soon as it is durable. Terms, votes, indexes and roles
are real Raft ones so that elections and replication slot in later without changing this API.

Concurrency model: one writer task takes every proposal queued while the previous append was being written
and fsync'd, appends them as one batch (group commit: one fsync for many proposals), then applies them in
log order. Storage calls run in worker threads so the event loop keeps serving.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from spur.raft.storage import HardState, LogEntry, RaftStorage, Snapshot, StorageError

log = logging.getLogger(__name__)

#: Most proposals written as one append; bounds the size of one write and of one apply burst.
MAX_BATCH = 4096


class StateMachine(Protocol):
    """What Raft drives. All three must be deterministic and do no I/O."""

    def apply(self, index: int, data: bytes) -> Any:
        """Apply the committed command `data` at log `index`; the return value is the proposer's result.

        If it raises, the exception is raised to the proposer instead, and the entry still counts as
        applied, so the state machine must leave its state unchanged when it raises (replay on restart
        hits the same exception and ignores it).
        """
        ...

    def snapshot(self) -> bytes:
        """Serialize the whole state (as of the last applied index)."""
        ...

    def restore(self, data: bytes) -> None:
        """Replace the whole state with one produced by `snapshot`."""
        ...


class Role(enum.StrEnum):
    """Raft role of a member."""

    LEADER = "leader"
    FOLLOWER = "follower"
    CANDIDATE = "candidate"


class NotLeader(Exception):
    """This member cannot take the request because it is not the leader.

    `leader_id` / `leader_hint` (the leader's Raft address) name the member to retry at, when known.
    """

    def __init__(self, message: str, *, leader_id: int | None = None, leader_hint: str | None = None) -> None:
        super().__init__(message)
        self.leader_id = leader_id
        self.leader_hint = leader_hint


@dataclass(eq=False)
class _Proposal:
    data: bytes
    done: trio.Event = field(default_factory=trio.Event)
    taken: bool = False  # part of a batch being written; can no longer be withdrawn
    result: Any = None
    error: BaseException | None = None


class RaftNode:
    """One Raft member. Construct, then run `run` in a nursery (``await nursery.start(node.run)``).

    `peers` are the Raft addresses of all members, this one included, and `node_id` is this member's
    1-based position in it (the ``controller.peers`` convention); ``()`` also means a one-member group.
    Only one-member groups are implemented so far: more than one peer raises NotImplementedError.
    A snapshot is taken every `snapshot_every` applied entries and the log compacted up to it.
    """

    def __init__(
        self,
        *,
        node_id: int,
        storage: RaftStorage,
        state_machine: StateMachine,
        peers: Sequence[str] = (),
        snapshot_every: int = 10000,
    ) -> None:
        if len(peers) > 1:
            raise NotImplementedError(
                f"multi-member Raft groups are not implemented yet (got peers {list(peers)}); "
                "run a single controller with at most one peer (itself)"
            )
        if peers and node_id != 1:
            raise ValueError(f"node_id {node_id} is not a position in peers {list(peers)} (1..{len(peers)})")
        if node_id < 0:
            raise ValueError(f"node_id must be >= 0, got {node_id}")
        if snapshot_every < 1:
            raise ValueError(f"snapshot_every must be >= 1, got {snapshot_every}")
        self._node_id = node_id
        self._storage = storage
        self._sm = state_machine
        self._peers = tuple(peers)
        self._snapshot_every = snapshot_every

        self._role = Role.FOLLOWER
        self._term = 0
        self._leader_id: int | None = None
        self._commit_index = 0
        self._applied_index = 0
        self._log: list[LogEntry] = []  # entries after the snapshot
        self._snapshot_index = 0
        self._snapshot_term = 0
        self._next_snapshot_at = snapshot_every
        self._snapshotting = False

        self._pending: list[_Proposal] = []
        self._in_flight: list[_Proposal] = []  # the batch being written and applied
        self._work = trio.Event()
        self._role_changed = trio.Event()
        self._applied_changed = trio.Event()
        self._started = False

    # -- observable state -------------------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def role(self) -> Role:
        return self._role

    @property
    def term(self) -> int:
        return self._term

    @property
    def leader_id(self) -> int | None:
        return self._leader_id

    @property
    def commit_index(self) -> int:
        return self._commit_index

    @property
    def applied_index(self) -> int:
        return self._applied_index

    @property
    def last_log_index(self) -> int:
        return self._log[-1].index if self._log else self._snapshot_index

    @property
    def snapshot_index(self) -> int:
        return self._snapshot_index

    def status(self) -> dict[str, Any]:
        """A plain-data summary for status endpoints and logs."""
        return {
            "node_id": self._node_id,
            "role": str(self._role),
            "term": self._term,
            "leader_id": self._leader_id,
            "commit_index": self._commit_index,
            "applied_index": self._applied_index,
            "last_log_index": self.last_log_index,
            "snapshot_index": self._snapshot_index,
        }

    async def wait_role_change(self, seen: Role) -> Role:
        """Return the current role as soon as it differs from `seen` (immediately if it already does)."""
        while self._role == seen:
            await self._role_changed.wait()
        return self._role

    # -- lifecycle --------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Recover, become leader, signal `task_status.started()`, then serve proposals until cancelled.

        Raises StorageError (or its CorruptLogError) if the storage cannot be loaded or the new term cannot
        be persisted. Can be called once per RaftNode. When it returns, the node is a follower and queued
        proposals fail with NotLeader.
        """
        if self._started:
            raise RuntimeError("RaftNode.run() can only be called once")
        self._started = True
        try:
            hard_state, snapshot, entries = await trio.to_thread.run_sync(self._storage.load)
            self._recover(snapshot, entries)
            # One-member election: a new term, our own vote, durable before we act as leader.
            self._set_role(Role.CANDIDATE)
            term = hard_state.term + 1
            await trio.to_thread.run_sync(self._storage.save_hard_state, HardState(term, self._node_id))
            self._term = term
            self._leader_id = self._node_id
            self._set_role(Role.LEADER)
            log.info(
                "raft node %d is leader of term %d at index %d", self._node_id, term, self.last_log_index
            )
            async with trio.open_nursery() as nursery:
                task_status.started()
                await self._write_loop(nursery)
        finally:
            self._leader_id = None
            self._set_role(Role.FOLLOWER)
            pending, self._pending = self._in_flight + self._pending, []
            for proposal in pending:
                if not proposal.done.is_set():
                    proposal.error = NotLeader("raft node stopped")
                    proposal.done.set()

    def _recover(self, snapshot: Snapshot | None, entries: list[LogEntry]) -> None:
        """Restore the snapshot and apply the log (every stored entry of a one-member group is committed)."""
        if snapshot is not None:
            self._sm.restore(snapshot.data)
            self._snapshot_index, self._snapshot_term = snapshot.last_index, snapshot.last_term
            self._applied_index = snapshot.last_index
        for entry in entries:
            try:
                self._sm.apply(entry.index, entry.data)
            except Exception:
                log.debug("replayed entry %d raised (as it did originally)", entry.index, exc_info=True)
            self._applied_index = entry.index
        self._log = list(entries)
        self._commit_index = self._applied_index
        self._next_snapshot_at = self._snapshot_index + self._snapshot_every
        log.info(
            "raft node %d recovered: snapshot at %d, %d log entries, applied %d",
            self._node_id,
            self._snapshot_index,
            len(entries),
            self._applied_index,
        )

    def _set_role(self, role: Role) -> None:
        if role != self._role:
            self._role = role
            self._role_changed.set()
            self._role_changed = trio.Event()

    # -- proposals --------------------------------------------------------------------------------------

    async def propose(self, data: bytes) -> Any:
        """Commit `data` as a new log entry and return what the state machine's `apply` returned for it.

        Raises NotLeader if this member is not the leader, StorageError if writing the entry failed (it is
        then not applied; later proposals may succeed), whatever `apply` raised, ValueError for empty data
        (reserved for Raft's own no-op entries), TypeError for non-bytes. If the caller is cancelled after
        the entry was handed to the disk, the entry may still be committed.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"proposal data must be bytes, not {type(data).__name__}")
        data = bytes(data)
        if not data:
            raise ValueError("proposal data must not be empty (empty entries are reserved for Raft)")
        if self._role is not Role.LEADER:
            raise NotLeader(
                f"raft node {self._node_id} is not the leader (role {self._role})", leader_id=self._leader_id
            )
        proposal = _Proposal(data)
        self._pending.append(proposal)
        self._work.set()
        try:
            await proposal.done.wait()
        except BaseException:
            if not proposal.taken and proposal in self._pending:
                self._pending.remove(proposal)
            raise
        if proposal.error is not None:
            raise proposal.error
        return proposal.result

    async def read_barrier(self) -> None:
        """Return once everything committed before the call is applied (a linearizable read point).

        Raises NotLeader if this member is not the leader. In a one-member group there is no one to confirm
        leadership with, so this only waits for the apply position.
        """
        if self._role is not Role.LEADER:
            raise NotLeader(
                f"raft node {self._node_id} is not the leader (role {self._role})", leader_id=self._leader_id
            )
        target = self._commit_index
        while self._applied_index < target:
            await self._applied_changed.wait()
        await trio.lowlevel.checkpoint()

    async def _write_loop(self, nursery: trio.Nursery) -> None:
        while True:
            while not self._pending:
                await self._work.wait()
                self._work = trio.Event()
            batch = self._in_flight = self._pending[:MAX_BATCH]
            del self._pending[:MAX_BATCH]
            for proposal in batch:
                proposal.taken = True
            first = self.last_log_index + 1
            entries = [LogEntry(first + i, self._term, p.data) for i, p in enumerate(batch)]
            try:
                if self._storage.fsync:
                    # Not abandoned on cancel: the write finishes, and its entries are applied before the
                    # cancellation is delivered at the next checkpoint.
                    await trio.to_thread.run_sync(self._storage.append, entries)
                else:
                    # Without fsync an append is a page-cache write; a thread round trip would cost more.
                    self._storage.append(entries)
            except StorageError as exc:
                log.warning("raft append of %d entries at %d failed: %s", len(entries), first, exc)
                for proposal in batch:
                    proposal.error = StorageError(str(exc))
                    proposal.error.__cause__ = exc
                    proposal.done.set()
                continue
            except Exception as exc:  # a bug, not a disk failure: tell the proposers, then stop the node
                for proposal in batch:
                    proposal.error = exc
                    proposal.done.set()
                raise
            self._log.extend(entries)
            self._commit_index = entries[-1].index
            self._apply(batch, entries)
            self._maybe_snapshot(nursery)
            await trio.lowlevel.checkpoint()

    def _apply(self, batch: list[_Proposal], entries: list[LogEntry]) -> None:
        for proposal, entry in zip(batch, entries, strict=True):
            try:
                proposal.result = self._sm.apply(entry.index, entry.data)
            except Exception as exc:
                proposal.error = exc
            self._applied_index = entry.index
            proposal.done.set()
        self._applied_changed.set()
        self._applied_changed = trio.Event()

    # -- snapshots --------------------------------------------------------------------------------------

    def _maybe_snapshot(self, nursery: trio.Nursery) -> None:
        if self._snapshotting or self._applied_index < self._next_snapshot_at:
            return
        index = self._applied_index
        self._next_snapshot_at = index + self._snapshot_every
        try:
            data = self._sm.snapshot()
        except Exception:
            log.exception("state machine snapshot at index %d failed; retrying later", index)
            return
        snapshot = Snapshot(index, self._term_at(index), data)
        self._snapshotting = True
        nursery.start_soon(self._save_snapshot, snapshot, name=f"raft-snapshot-{index}")

    async def _save_snapshot(self, snapshot: Snapshot) -> None:
        try:
            await trio.to_thread.run_sync(self._storage.save_snapshot, snapshot)
        except StorageError as exc:
            log.warning("raft snapshot at index %d failed (retrying later): %s", snapshot.last_index, exc)
            return
        finally:
            self._snapshotting = False
        if self._log:
            del self._log[: snapshot.last_index - self._log[0].index + 1]
        self._snapshot_index, self._snapshot_term = snapshot.last_index, snapshot.last_term
        log.info("raft snapshot at index %d saved, log compacted", snapshot.last_index)

    def _term_at(self, index: int) -> int:
        if index == self._snapshot_index:
            return self._snapshot_term
        return self._log[index - self._log[0].index].term
