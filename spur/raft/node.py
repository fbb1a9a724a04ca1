"""A Raft member driving a deterministic state machine from a durable log.

Groups of one or more members. A one-member group elects itself at start (a new term, its own vote,
persisted before it acts) and commits each proposal as soon as it is durable. Larger groups run the full
protocol over the `Raft` gRPC service (`spur.raft.transport`):

* Elections with randomised timeouts, preceded by a *pre-vote* round (a member that was cut off and
  rejoins cannot disrupt a stable leader by bumping terms), and *leader stickiness*: a member that heard
  from a leader within the minimum election timeout refuses votes. Term and vote are persisted (fsync)
  before any answer that depends on them. A new leader appends a no-op entry (empty data) of its term;
  no-ops never reach the state machine.
* Replication: per-peer AppendEntries in size-capped batches, pipelined (several in flight; a peer whose
  log position is unknown is probed one request at a time), conflict-term fallback, commit by majority
  match index for entries of the current term (the leader's own durable log counts). Followers make
  entries durable before they acknowledge.
* Snapshots every `snapshot_every` applied entries, log compaction, and chunked InstallSnapshot for a peer
  that needs entries the leader no longer has.
* `read_barrier` is ReadIndex: leadership is confirmed by a round of acknowledgements from a majority
  sent after the read began, then the barrier waits for the state machine to reach the commit index.
* A leader that has not heard from a majority for the minimum election timeout steps down.

Input from the network is untrusted (see docs/security.md). With `credentials` every Raft RPC carries the
sender's Raft credential and the server refuses calls without one of another member
(`spur.raft.auth`); a request must name its verified sender as leader or candidate. Whatever the
credential, each request is checked before it changes anything: the sender id is one of the other members,
terms and indexes are at most `MAX_TERM`/`MAX_INDEX`, an AppendEntries holds at most `MAX_APPEND_ENTRIES`
entries and `MAX_APPEND_REQUEST_BYTES` bytes whose data the state machine accepts as commands
(`StateMachine.check_command`), a snapshot being received stays within `max_snapshot_bytes` and is
decoded into scratch state (`StateMachine.decode_snapshot`) before it is stored or adopted. A refused
request is answered INVALID_ARGUMENT (malformed) or PERMISSION_DENIED (wrong sender) and leaves term,
vote, log, snapshot and state as they were.

At start a snapshot that does not decode (a damaged file, or bytes the state machine cannot read) and a
damaged WAL tail are reported in one log line each and set aside (`RaftStorage.load(salvage=True)`,
`RaftStorage.discard_snapshot`): the member recovers what is intact and, in a group, a leader refills the
rest with InstallSnapshot.

Concurrency: all Raft state lives in this object and is changed by the tasks of one Trio run. Every change
that writes storage happens under `_lock` (a fair trio.Lock) so the in-memory log always equals the
durable one; storage calls run in worker threads when the storage fsyncs. Applying committed entries is
synchronous (no I/O) and happens as soon as the commit index moves.
"""

from __future__ import annotations

import enum
import logging
import math
import random
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import trio

from spur.raft.auth import IncomingVerifier, OutgoingCredential, RaftGate
from spur.raft.faults import FaultSwitch
from spur.raft.storage import HardState, LogEntry, RaftStorage, Snapshot, StorageError
from spur.raft.transport import RAFT_SERVICE, PeerClients, RaftService, open_peer_clients
from spur.rpc.channel import parse_target
from spur.rpc.proto import raft_pb2 as pb
from spur.rpc.server import Server
from spur.rpc.status import RpcError, StatusCode

if TYPE_CHECKING:
    from spur.raft.forked import ChildSnapshot
    from spur.rpc.tls import ClientTLS, ServerTLS

log = logging.getLogger(__name__)

#: Most proposals written as one append; bounds the size of one write and of one apply burst.
MAX_BATCH = 4096
#: Most entries in one AppendEntries request (the byte cap usually binds first); a follower refuses more.
MAX_APPEND_ENTRIES = 4096
#: Most entry bytes a follower takes in one AppendEntries (the gRPC server's message limit).
MAX_APPEND_REQUEST_BYTES = 64 * 1024 * 1024
#: Highest term and log index a member accepts or reaches: 2**53, far beyond any real group (a term a
#: second for 285 million years) and exact in every JSON/float representation; a request above it is
#: refused, never persisted.
MAX_TERM = 2**53
MAX_INDEX = 2**53
#: Default bound on a snapshot being received (total bytes); a larger one is refused.
MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024 * 1024


class RaftCredentials(OutgoingCredential, IncomingVerifier, Protocol):
    """A member's Raft credential: sends its own, verifies the others' (`spur.raft.auth`)."""


class StateMachine(Protocol):
    """What Raft drives. Every method must be deterministic and do no I/O."""

    def apply(self, index: int, data: bytes, proposed: object | None = None) -> Any:
        """Apply the committed command `data` at log `index`; the return value is the proposer's result.

        If it raises, the exception is raised to the proposer instead, and the entry still counts as
        applied, so the state machine must leave its state unchanged when it raises (replay on restart
        hits the same exception and ignores it).

        `proposed` is the object a proposer on this member handed to `propose` beside `data`, for an
        entry this member appended as leader in the entry's own term; None for every other entry (a
        follower's, a replay's, another term's). A state machine may apply it in place of decoding
        `data`, and must then end in the state decoding would have given.
        """
        ...

    def snapshot(self) -> bytes:
        """Serialize the whole state (as of the last applied index)."""
        ...

    def decode_snapshot(self, data: bytes) -> object:
        """Decode snapshot bytes (untrusted: from disk or a leader) into scratch state, leaving the current
        state untouched; raise ValueError (or any exception) for bytes that do not decode."""
        ...

    def adopt(self, decoded: object) -> None:
        """Replace the whole state with scratch state returned by `decode_snapshot`; must not fail."""
        ...

    def check_command(self, data: bytes) -> None:
        """Raise ValueError when `data` (a non-empty entry from a leader) cannot be a command. Runs for
        every replicated entry before it is stored, so it must be cheap; `apply` still rejects what this
        lets through."""
        ...


class Role(enum.StrEnum):
    """Raft role of a member."""

    LEADER = "leader"
    FOLLOWER = "follower"
    CANDIDATE = "candidate"


class NotLeader(Exception):
    """This member cannot take the request because it is not the leader.

    `leader_id` / `leader_hint` (the leader's Raft address from ``peers``) name the member to retry at,
    when known.
    """

    def __init__(self, message: str, *, leader_id: int | None = None, leader_hint: str | None = None) -> None:
        super().__init__(message)
        self.leader_id = leader_id
        self.leader_hint = leader_hint


@dataclass(eq=False)
class _Proposal:
    data: bytes
    command: object | None = None  # what `data` encodes, as the proposer built it (see StateMachine.apply)
    done: trio.Event = field(default_factory=trio.Event)
    taken: bool = False  # part of a batch being written; can no longer be withdrawn
    term: int = 0  # term of the entry once appended
    result: Any = None
    error: BaseException | None = None

    def fail(self, error: BaseException) -> None:
        if not self.done.is_set():
            self.error = error
            self.done.set()


@dataclass(eq=False)
class _Peer:
    """What a leader tracks about one other member during its term."""

    id: int
    next_index: int
    match_index: int = 0
    probing: bool = True  # log position unknown: one request at a time until one succeeds
    epoch: int = 0  # bumped whenever next_index is reset; stale replies then do not move it again
    inflight: int = 0
    hb_inflight: bool = False
    read_wanted: bool = False
    last_sent: float = -math.inf
    last_ack: float = -math.inf  # send time of the latest request answered in our term
    acked_seq: int = 0  # send sequence number of the latest request answered in our term
    backoff_until: float = -math.inf
    wake: trio.Event = field(default_factory=trio.Event)


def _majority(size: int) -> int:
    return size // 2 + 1


class RaftNode:
    """One Raft member. Construct, then run `run` in a nursery (``await nursery.start(node.run)``).

    `peers` are the Raft addresses (``host:port``) of all members, this one included, and `node_id` is this
    member's 1-based position in it (the ``controller.peers`` convention); ``()`` also means a one-member
    group. A snapshot is taken every `snapshot_every` applied entries and the log compacted up to it.

    Timing (seconds): `election_timeout` is the (min, max) range each election timer is drawn from,
    `heartbeat_interval` the leader's idle AppendEntries period, `rpc_timeout` the deadline of every Raft
    RPC (default: half the minimum election timeout). `faults` injects message loss for tests, `rng`
    makes election timers reproducible.
    """

    def __init__(
        self,
        *,
        node_id: int,
        storage: RaftStorage,
        state_machine: StateMachine,
        peers: Sequence[str] = (),
        snapshot_every: int = 10000,
        election_timeout: tuple[float, float] = (1.0, 2.0),
        heartbeat_interval: float = 0.2,
        rpc_timeout: float | None = None,
        faults: FaultSwitch | None = None,
        rng: random.Random | None = None,
        max_append_bytes: int = 1024 * 1024,
        max_inflight: int = 8,
        snapshot_chunk_bytes: int = 1024 * 1024,
        fork_snapshots: bool = False,
        credentials: RaftCredentials | None = None,
        max_snapshot_bytes: int = MAX_SNAPSHOT_BYTES,
        server_tls: ServerTLS | None = None,
        client_tls: ClientTLS | None = None,
    ) -> None:
        """`server_tls` / `client_tls` (spur.rpc.tls.ServerTLS / ClientTLS, None = plaintext) are passed
        to the Raft server's ``serve`` and to the peer channels."""
        if node_id < 0:
            raise ValueError(f"node_id must be >= 0, got {node_id}")
        if peers and not 1 <= node_id <= len(peers):
            raise ValueError(f"node_id {node_id} is not a position in peers {list(peers)} (1..{len(peers)})")
        if snapshot_every < 1:
            raise ValueError(f"snapshot_every must be >= 1, got {snapshot_every}")
        low, high = election_timeout
        if not 0 < low <= high:
            raise ValueError(
                f"election_timeout must be (min, max) with 0 < min <= max, got {election_timeout}"
            )
        if not 0 < heartbeat_interval < low:
            raise ValueError(
                f"heartbeat_interval ({heartbeat_interval}) must be positive and below the minimum "
                f"election timeout ({low})"
            )
        if max_inflight < 1 or max_append_bytes < 1 or snapshot_chunk_bytes < 1 or max_snapshot_bytes < 1:
            raise ValueError(
                "max_inflight, max_append_bytes, snapshot_chunk_bytes and max_snapshot_bytes must be >= 1"
            )
        for address in peers:
            parse_target(address)  # one clear InvalidTarget naming a bad address
        self._server_tls = server_tls
        self._client_tls = client_tls
        self._node_id = node_id
        self._storage = storage
        self._sm = state_machine
        self._peers = tuple(peers)
        self._others = {i: a for i, a in enumerate(self._peers, 1) if i != node_id}
        self._size = max(len(self._peers), 1)
        self._snapshot_every = snapshot_every
        self._fork_snapshots = fork_snapshots
        self._election_timeout = (low, high)
        self._heartbeat = heartbeat_interval
        self._rpc_timeout = rpc_timeout if rpc_timeout is not None else low / 2
        self._faults = faults
        self._rng = rng or random.Random()
        self._max_append_bytes = max_append_bytes
        self._max_inflight = max_inflight
        self._chunk_bytes = snapshot_chunk_bytes
        self._credentials = credentials
        self._max_snapshot_bytes = max_snapshot_bytes
        if faults is not None:
            faults.register(node_id)

        self._role = Role.FOLLOWER
        self._term = 0
        self._voted_for: int | None = None
        self._leader_id: int | None = None
        self._commit_index = 0
        self._applied_index = 0
        self._log: list[LogEntry] = []  # entries after the snapshot: _log[0].index == _snapshot_index + 1
        self._snapshot_index = 0
        self._snapshot_term = 0
        self._last_snapshot: Snapshot | None = None
        self._next_snapshot_at = snapshot_every
        self._snapshotting = False
        self._truncate_pending: int | None = None  # a storage truncation that failed and must be redone
        self._incoming: tuple[tuple[int, int, int, int], bytearray] | None = None  # snapshot being received
        self._out_of_range_logged = False  # a term at or above MAX_TERM was reported (once)

        self._lock = trio.Lock()
        self._last_heard = -math.inf  # when the current leader last reached us
        self._election_deadline = math.inf
        self._peer_state: dict[int, _Peer] = {}
        self._leader_since = 0.0
        self._term_start_index = 0  # index of this leader's no-op; reads wait until it is committed
        self._leader_scope: trio.CancelScope | None = None
        self._send_seq = 0  # numbers every request a leader sends, so reads can tell "sent after"

        self._pending: list[_Proposal] = []
        self._in_flight: list[_Proposal] = []  # the batch being written
        self._proposals: dict[int, _Proposal] = {}  # appended, awaiting commit: by log index
        self._work = trio.Event()
        self._role_changed = trio.Event()
        self._changed = trio.Event()  # any progress: commit, apply, term, role, acks, log growth
        self._started = False
        self._nursery: trio.Nursery | None = None
        self._clients: PeerClients | None = None
        self._bound_port: int | None = None

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
    def leader_hint(self) -> str | None:
        """The Raft address of the leader this member knows of (None when unknown or no peers listed)."""
        if self._leader_id is None or not 1 <= self._leader_id <= len(self._peers):
            return None
        return self._peers[self._leader_id - 1]

    @property
    def commit_index(self) -> int:
        return self._commit_index

    @property
    def applied_index(self) -> int:
        return self._applied_index

    @property
    def last_log_index(self) -> int:
        return self._last_index()

    @property
    def snapshot_index(self) -> int:
        return self._snapshot_index

    @property
    def snapshotting(self) -> bool:
        """A snapshot is being taken or saved now (serialized in a child or written on a worker thread)."""
        return self._snapshotting

    @property
    def term_start_index(self) -> int:
        """Leader: index of the no-op it appended for its term (0 in a one-member group)."""
        return self._term_start_index

    @property
    def bound_port(self) -> int | None:
        """The port the Raft service listens on once `run` has started (None when it serves none)."""
        return self._bound_port

    def status(self) -> dict[str, Any]:
        """A plain-data summary for status endpoints and logs."""
        return {
            "node_id": self._node_id,
            "role": str(self._role),
            "term": self._term,
            "leader_id": self._leader_id,
            "leader_hint": self.leader_hint,
            "commit_index": self._commit_index,
            "applied_index": self._applied_index,
            "last_log_index": self.last_log_index,
            "snapshot_index": self._snapshot_index,
            "members": self._size,
        }

    async def wait_role_change(self, seen: Role) -> Role:
        """Return the current role as soon as it differs from `seen` (immediately if it already does)."""
        while self._role == seen:
            await self._role_changed.wait()
        return self._role

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` is true; re-checked after every change of Raft state (tests, tools)."""
        while not predicate():
            await self._changed.wait()

    # -- lifecycle --------------------------------------------------------------------------------------

    async def run(
        self,
        listen: tuple[str, int] | None = None,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Recover, start serving, signal `task_status.started()`, then take part in the group until
        cancelled.

        A one-member group becomes leader before `started()`. A larger group serves the Raft service on
        `listen` (default: this member's own address in ``peers``; `bound_port` tells the port) and starts
        as a follower. Raises StorageError (or its CorruptLogError) if the storage cannot be loaded or a
        term cannot be persisted, OSError if the listen address cannot be bound. Can be called once per
        RaftNode. When it returns, the node is a follower and queued proposals fail with NotLeader.
        """
        if self._started:
            raise RuntimeError("RaftNode.run() can only be called once")
        self._started = True
        try:
            hard_state, snapshot, entries = await trio.to_thread.run_sync(
                lambda: self._storage.load(salvage=True)
            )
            self._term, self._voted_for = hard_state.term, hard_state.voted_for
            decoded: object = None
            if snapshot is not None:
                try:
                    decoded = self._sm.decode_snapshot(snapshot.data)
                except Exception as exc:
                    where = self._storage.directory / "snapshot"
                    log.error(
                        "raft node %d: snapshot %s (index %d) does not decode (%s); set aside with the "
                        "log after it, starting from an empty state (a leader sends its snapshot)",
                        self._node_id,
                        where,
                        snapshot.last_index,
                        _reason(exc),
                    )
                    await trio.to_thread.run_sync(self._storage.discard_snapshot)
                    snapshot, entries = None, []
            self._recover(snapshot, decoded, entries)
            async with AsyncExitStack() as stack:
                if self._others:
                    self._clients = await stack.enter_async_context(
                        open_peer_clients(
                            self._node_id,
                            self._others,
                            connect_timeout=self._rpc_timeout,
                            faults=self._faults,
                            credential=self._credentials,
                            tls=self._client_tls,
                        )
                    )
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    if listen is None and self._others:
                        listen = parse_target(self._peers[self._node_id - 1])
                    if listen is not None:
                        server = Server(authenticator=self._gate())
                        server.add_service(RAFT_SERVICE, RaftService(self, self._faults))
                        self._bound_port = await nursery.start(
                            partial(server.serve, tls=self._server_tls), listen[0], listen[1]
                        )
                    if not self._others:
                        await self._campaign()  # a one-member group elects itself at once
                    nursery.start_soon(self._role_loop, name=f"raft-{self._node_id}-roles")
                    task_status.started()
        finally:
            self._leader_id = None
            self._set_role(Role.FOLLOWER)
            self._fail_proposals("raft node stopped")

    def _gate(self) -> RaftGate | None:
        """The Raft server's gate: checks the sender's credential from the call's headers (None without
        credentials)."""
        if self._credentials is None:
            return None
        return RaftGate(self._credentials, node_id=self._node_id, members=self._others)

    def _recover(self, snapshot: Snapshot | None, decoded: object, entries: list[LogEntry]) -> None:
        """Adopt the snapshot (`decoded` from it); a one-member group also applies the log (all of it is
        committed there)."""
        if snapshot is not None:
            self._sm.adopt(decoded)
            self._snapshot_index, self._snapshot_term = snapshot.last_index, snapshot.last_term
            self._applied_index = self._commit_index = snapshot.last_index
            self._last_snapshot = snapshot
        self._log = list(entries)
        if not self._others:
            self._commit_index = self._last_index()
            for entry in entries:
                if entry.data:
                    try:
                        self._sm.apply(entry.index, entry.data)
                    except Exception:
                        log.debug(
                            "replayed entry %d raised (as it did originally)", entry.index, exc_info=True
                        )
                self._applied_index = entry.index
        self._next_snapshot_at = self._snapshot_index + self._snapshot_every
        log.info(
            "raft node %d recovered: term %d, snapshot at %d, %d log entries, applied %d",
            self._node_id,
            self._term,
            self._snapshot_index,
            len(entries),
            self._applied_index,
        )

    async def _role_loop(self) -> None:
        while True:
            if self._role is Role.LEADER:
                term = self._term
                async with trio.open_nursery() as nursery:
                    self._leader_scope = nursery.cancel_scope
                    nursery.start_soon(self._write_loop, term, name=f"raft-{self._node_id}-writer")
                    for peer in self._peer_state.values():
                        nursery.start_soon(
                            self._replicate, peer, term, nursery, name=f"raft-{self._node_id}-to-{peer.id}"
                        )
                    if self._others:
                        nursery.start_soon(self._check_quorum, term, name=f"raft-{self._node_id}-quorum")
                    if self._role is not Role.LEADER or self._term != term:
                        nursery.cancel_scope.cancel()
                self._leader_scope = None
            else:
                await self._election_timer()

    # -- small helpers ------------------------------------------------------------------------------------

    def _last_index(self) -> int:
        return self._log[-1].index if self._log else self._snapshot_index

    def _last_term(self) -> int:
        return self._log[-1].term if self._log else self._snapshot_term

    def _term_at(self, index: int) -> int | None:
        """Term of the entry at `index`, or None when it is compacted away or past the end."""
        if index == self._snapshot_index:
            return self._snapshot_term
        offset = index - self._snapshot_index - 1
        if 0 <= offset < len(self._log):
            return self._log[offset].term
        return None

    def _entry(self, index: int) -> LogEntry:
        return self._log[index - self._snapshot_index - 1]

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _set_role(self, role: Role) -> None:
        if role != self._role:
            self._role = role
            self._role_changed.set()
            self._role_changed = trio.Event()
            self._notify()

    def _not_leader(self, why: str | None = None) -> NotLeader:
        message = why or f"raft node {self._node_id} is not the leader (role {self._role})"
        return NotLeader(message, leader_id=self._leader_id, leader_hint=self.leader_hint)

    def _reset_election_deadline(self) -> None:
        low, high = self._election_timeout
        self._election_deadline = trio.current_time() + self._rng.uniform(low, high)

    def _leader_recent(self) -> bool:
        """Whether a leader is known and was heard from within the minimum election timeout."""
        if self._role is Role.LEADER:
            return True
        return (
            self._leader_id is not None and trio.current_time() - self._last_heard < self._election_timeout[0]
        )

    async def _io(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a storage call: in a worker thread when it fsyncs, inline when it only hits the page cache."""
        if self._storage.fsync:
            # Not abandoned on cancel: the call finishes, so memory never disagrees with the disk.
            return await trio.to_thread.run_sync(fn, *args)
        return fn(*args)

    async def _persist(self, term: int, voted_for: int | None) -> None:
        """Make (term, vote) durable, then adopt it. Call with `_lock` held."""
        await self._io(self._storage.save_hard_state, HardState(term, voted_for))
        changed = term != self._term
        self._term, self._voted_for = term, voted_for
        if changed:
            self._notify()

    async def _adopt_term(self, term: int) -> None:
        """Move to a higher `term` as a follower with no vote. Call with `_lock` held."""
        await self._persist(term, None)
        self._leader_id = None
        self._become_follower(f"term {term} started elsewhere")

    async def _observe_term(self, term: int) -> None:
        """A reply carried a higher term: adopt it (unless something else already did, or it is out of
        range: then the reply is ignored)."""
        if term > MAX_TERM:
            if not self._out_of_range_logged:  # once: such a member answers every heartbeat the same
                self._out_of_range_logged = True
                log.warning(
                    "raft node %d ignores replies with term %d (above %d); that member's state needs repair",
                    self._node_id,
                    term,
                    MAX_TERM,
                )
            return
        async with self._lock:
            if term > self._term:
                await self._adopt_term(term)

    def _become_follower(self, why: str) -> None:
        if self._role is Role.LEADER:
            log.info("raft node %d steps down in term %d: %s", self._node_id, self._term, why)
            if self._leader_scope is not None:
                self._leader_scope.cancel()
            self._fail_proposals(f"raft node {self._node_id} lost leadership ({why}); outcome unknown")
        self._set_role(Role.FOLLOWER)
        self._reset_election_deadline()

    def _fail_proposals(self, why: str) -> None:
        """Fail every proposal not yet answered with NotLeader: whether it commits is unknown."""
        waiting = self._in_flight + self._pending + list(self._proposals.values())
        self._pending, self._in_flight, self._proposals = [], [], {}
        for proposal in waiting:
            proposal.fail(self._not_leader(why))

    # -- proposals and reads ------------------------------------------------------------------------------

    async def propose(self, data: bytes, command: object | None = None) -> Any:
        """Commit `data` as a new log entry and return what the state machine's `apply` returned for it.
        ``command``, when given, is the object `data` encodes; this member's state machine is handed it
        when it applies the entry (`StateMachine.apply`'s ``proposed``) unless the entry was replaced.

        Raises NotLeader at once if this member is not the leader (with the leader's id and address when
        known), and also when leadership is lost before the entry is applied: then the entry may or may
        not be committed later, so the caller must treat the outcome as unknown. Raises StorageError if
        writing the entry on the leader failed (it is then not in the log; later proposals may succeed),
        whatever `apply` raised, ValueError for empty data (reserved for Raft's own no-op entries),
        TypeError for non-bytes. If the caller is cancelled after the entry was handed to the disk, the
        entry may still be committed.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"proposal data must be bytes, not {type(data).__name__}")
        data = bytes(data)
        if not data:
            raise ValueError("proposal data must not be empty (empty entries are reserved for Raft)")
        if self._role is not Role.LEADER:
            raise self._not_leader()
        proposal = _Proposal(data, command)
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
        """Return once the state machine reflects every write committed before the call (ReadIndex).

        The leader records its commit index (after its term's no-op is committed), confirms it is still
        leader by acknowledgements from a majority to messages sent after the call began, and waits until
        that index is applied. Raises NotLeader if this member is not the leader, loses leadership
        meanwhile, or cannot confirm it within the maximum election timeout.
        """
        if self._role is not Role.LEADER:
            raise self._not_leader()
        term = self._term

        def lost() -> bool:
            return self._role is not Role.LEADER or self._term != term

        with trio.move_on_after(self._election_timeout[1]) as scope:
            await self.wait_for(lambda: lost() or self._commit_index >= self._term_start_index)
            if lost():
                raise self._not_leader()
            read_index = self._commit_index
            if self._peer_state:
                started = self._send_seq
                for peer in self._peer_state.values():
                    peer.read_wanted = True
                    peer.wake.set()
                need = _majority(self._size) - 1
                await self.wait_for(
                    lambda: lost() or sum(p.acked_seq > started for p in self._peer_state.values()) >= need
                )
                if lost():
                    raise self._not_leader()
            await self.wait_for(lambda: lost() or self._applied_index >= read_index)
            if self._applied_index < read_index:
                raise self._not_leader()
        if scope.cancelled_caught:
            raise self._not_leader(f"raft node {self._node_id} could not confirm its leadership in time")
        await trio.lowlevel.checkpoint()

    async def _write_loop(self, term: int) -> None:
        """Leader: append queued proposals in batches (one fsync each), then replicate and commit them."""
        while True:
            while not self._pending:
                await self._work.wait()
                self._work = trio.Event()
            batch = self._in_flight = self._pending[:MAX_BATCH]
            del self._pending[:MAX_BATCH]
            for proposal in batch:
                proposal.taken = True
            async with self._lock:
                if self._role is not Role.LEADER or self._term != term:
                    self._fail_proposals("leadership lost before the entries were written")
                    return
                first = self._last_index() + 1
                entries = [LogEntry(first + i, term, p.data) for i, p in enumerate(batch)]
                try:
                    await self._append(entries)
                except StorageError as exc:
                    log.warning("raft append of %d entries at %d failed: %s", len(entries), first, exc)
                    for proposal in batch:
                        proposal.fail(StorageError(str(exc)))
                        proposal.error.__cause__ = exc  # type: ignore[union-attr]
                    self._in_flight = []
                    continue
                except Exception as exc:  # a bug, not a disk failure: tell the proposers, then stop the node
                    for proposal in batch:
                        proposal.fail(exc)
                    raise
                self._in_flight = []
                if self._role is not Role.LEADER or self._term != term:
                    for proposal in batch:
                        proposal.fail(self._not_leader("leadership lost while the entries were written"))
                    return
                for proposal, entry in zip(batch, entries, strict=True):
                    proposal.term = term
                    if entry.data:
                        self._proposals[entry.index] = proposal
                for peer in self._peer_state.values():
                    peer.wake.set()
                self._advance_leader_commit()
            await trio.lowlevel.checkpoint()

    async def _append(self, entries: list[LogEntry]) -> None:
        """Make `entries` durable and add them to the in-memory log. Call with `_lock` held."""
        if self._truncate_pending is not None:
            await self._io(self._storage.truncate_from, self._truncate_pending)
            self._truncate_pending = None
        await self._io(self._storage.append, entries)
        self._log.extend(entries)
        self._notify()

    async def _truncate(self, index: int) -> None:
        """Drop entries from `index` on (never committed ones). Call with `_lock` held."""
        if index <= self._commit_index:
            raise AssertionError(
                f"refusing to truncate committed entry {index} (commit {self._commit_index})"
            )
        del self._log[index - self._snapshot_index - 1 :]
        self._truncate_pending = index
        await self._io(self._storage.truncate_from, index)
        self._truncate_pending = None

    # -- commit and apply ---------------------------------------------------------------------------------

    def _advance_leader_commit(self) -> None:
        matches = sorted(
            [self._last_index()] + [p.match_index for p in self._peer_state.values()], reverse=True
        )
        candidate = matches[_majority(self._size) - 1]
        if candidate > self._commit_index and self._term_at(candidate) == self._term:
            self._set_commit(candidate)

    def _set_commit(self, index: int) -> None:
        self._commit_index = index
        self._apply_committed()
        self._maybe_snapshot()
        self._notify()

    def _apply_committed(self) -> None:
        while self._applied_index < self._commit_index:
            entry = self._entry(self._applied_index + 1)
            proposal = self._proposals.pop(entry.index, None)
            result: Any = None
            error: BaseException | None = None
            if entry.data:  # empty data: a leader's no-op, not for the state machine
                # The proposer's object goes only with the very entry it proposed: same index and term.
                proposed = proposal.command if proposal is not None and proposal.term == entry.term else None
                try:
                    result = self._sm.apply(entry.index, entry.data, proposed)
                except Exception as exc:
                    error = exc
            self._applied_index = entry.index
            if proposal is not None:
                if proposal.term != entry.term:
                    error = self._not_leader("the entry was replaced by another leader's")
                proposal.result, proposal.error = result, error
                proposal.done.set()

    # -- elections ----------------------------------------------------------------------------------------

    async def _election_timer(self) -> None:
        """Follower/candidate: campaign whenever the election timer runs out; returns once leader."""
        self._reset_election_deadline()
        while self._role is not Role.LEADER:
            while trio.current_time() < self._election_deadline:
                await trio.sleep_until(self._election_deadline)
            self._reset_election_deadline()  # the next attempt, should this one fail
            if await self._pre_vote():
                try:
                    await self._campaign()
                except StorageError as exc:
                    log.warning(
                        "raft node %d cannot persist its candidacy (retrying): %s", self._node_id, exc
                    )

    async def _pre_vote(self) -> bool:
        """Would a majority vote for us in the next term? Changes nobody's term or vote."""
        if self._leader_recent():
            return False
        if self._term_exhausted():
            return False
        term = self._term
        request = pb.RequestVoteRequest(
            term=term + 1,
            candidate_id=self._node_id,
            last_log_index=self._last_index(),
            last_log_term=self._last_term(),
            pre_vote=True,
        )
        won = await self._gather_votes(request)
        return won and self._term == term and not self._leader_recent()

    def _term_exhausted(self) -> bool:
        """True (said once in the log) when our term is at or above MAX_TERM: no election can follow. Only
        a storage written before terms were bounded can hold such a term."""
        if self._term < MAX_TERM:
            return False
        if not self._out_of_range_logged:
            self._out_of_range_logged = True
            log.error(
                "raft node %d cannot campaign: its term %d is at or above the highest allowed (%d)",
                self._node_id,
                self._term,
                MAX_TERM,
            )
        return True

    async def _campaign(self) -> None:
        async with self._lock:
            if self._role is Role.LEADER or (self._others and self._leader_recent()):
                return
            if self._term_exhausted():
                return
            term = self._term + 1
            self._leader_id = None
            self._set_role(Role.CANDIDATE)
            try:
                await self._persist(term, self._node_id)
            except BaseException:
                self._set_role(Role.FOLLOWER)
                raise
            request = pb.RequestVoteRequest(
                term=term,
                candidate_id=self._node_id,
                last_log_index=self._last_index(),
                last_log_term=self._last_term(),
            )
        log.debug("raft node %d campaigns in term %d", self._node_id, term)
        won = await self._gather_votes(request)
        if won and self._term == term and self._role is Role.CANDIDATE:
            self._become_leader()

    async def _gather_votes(self, request: pb.RequestVoteRequest) -> bool:
        """Ask every peer; True once a majority (ourselves included) granted."""
        granted = 1
        need = _majority(self._size)
        if granted >= need:
            return True
        assert self._clients is not None
        clients = self._clients
        higher = 0

        async def ask(peer: int, nursery: trio.Nursery) -> None:
            nonlocal granted, higher
            try:
                reply = await clients.call(peer, "RequestVote", request, self._rpc_timeout)
            except RpcError as exc:
                log.debug("raft node %d: vote request to %d failed: %s", self._node_id, peer, exc)
                return
            if reply.vote_granted:
                granted += 1
                if granted >= need:
                    nursery.cancel_scope.cancel()
            elif reply.term > self._term:
                higher = max(higher, reply.term)

        async with trio.open_nursery() as nursery:
            for peer in self._others:
                nursery.start_soon(ask, peer, nursery)
        if higher and granted < need:
            await self._observe_term(higher)
        return granted >= need

    def _become_leader(self) -> None:
        now = trio.current_time()
        self._leader_id = self._node_id
        self._leader_since = now
        next_index = self._last_index() + 1
        self._peer_state = {peer: _Peer(peer, next_index, last_ack=now) for peer in self._others}
        if self._others:
            # A no-op of the new term: committing it commits everything before it, and reads wait for it.
            self._term_start_index = next_index
            self._pending.insert(0, _Proposal(b""))
            self._work.set()
        else:
            self._term_start_index = 0
        self._set_role(Role.LEADER)
        log.info(
            "raft node %d is leader of term %d at index %d", self._node_id, self._term, self.last_log_index
        )

    async def on_request_vote(self, request: pb.RequestVoteRequest) -> pb.RequestVoteResponse:
        """Handle RequestVote (real or pre-vote) from a candidate."""
        self._check_sender(request.candidate_id, "candidate_id")
        _bounded("term", request.term, MAX_TERM)
        _bounded("last_log_index", request.last_log_index, MAX_INDEX)
        _bounded("last_log_term", request.last_log_term, request.term)
        async with self._lock:
            up_to_date = (request.last_log_term, request.last_log_index) >= (
                self._last_term(),
                self._last_index(),
            )
            if request.pre_vote:
                granted = request.term > self._term and up_to_date and not self._leader_recent()
                return pb.RequestVoteResponse(term=self._term, vote_granted=granted)
            if request.term < self._term or self._leader_recent():
                # Stickiness: while our leader is alive, a candidate's higher term does not reach us.
                return pb.RequestVoteResponse(term=self._term, vote_granted=False)
            try:
                if request.term > self._term:
                    await self._adopt_term(request.term)
                granted = False
                if self._voted_for in (None, request.candidate_id) and up_to_date:
                    if self._voted_for is None:
                        await self._persist(self._term, request.candidate_id)
                    granted = True
                    self._reset_election_deadline()
            except StorageError as exc:
                raise RpcError(StatusCode.UNAVAILABLE, f"cannot persist the vote: {exc}") from None
            return pb.RequestVoteResponse(term=self._term, vote_granted=granted)

    # -- follower side of replication ----------------------------------------------------------------------

    async def _accept_leader(self, term: int, leader: int) -> None:
        """A valid message from the leader of `term` (>= ours). Call with `_lock` held."""
        if term > self._term:
            await self._adopt_term(term)
        if self._role is not Role.FOLLOWER:
            self._become_follower(f"member {leader} leads term {term}")
        if self._leader_id != leader:
            self._leader_id = leader
            self._notify()
        self._last_heard = trio.current_time()
        self._reset_election_deadline()

    async def on_append_entries(self, request: pb.AppendEntriesRequest) -> pb.AppendEntriesResponse:
        """Handle AppendEntries from a leader; acknowledges only entries that are durable here."""
        self._check_append(request)
        if request.term == self._term and request.prev_log_index > self._last_index():
            # Pipelined requests can be handled out of order: give an earlier one a moment to land.
            with trio.move_on_after(self._rpc_timeout / 2):
                await self.wait_for(
                    lambda: self._term != request.term or self._last_index() >= request.prev_log_index
                )
        async with self._lock:
            if request.term < self._term:
                return pb.AppendEntriesResponse(term=self._term, success=False)
            try:
                return await self._append_from_leader(request)
            except StorageError as exc:
                # Not an acknowledgement; but we did accept this leader's term, which keeps it leader.
                log.warning("raft node %d cannot store entries from the leader: %s", self._node_id, exc)
                return pb.AppendEntriesResponse(term=self._term, success=False, storage_failed=True)

    def _check_sender(self, member: int, field_name: str) -> None:
        """Refuse (PERMISSION_DENIED) a request naming a sender that is not another member of the group."""
        if member not in self._others:
            raise RpcError(
                StatusCode.PERMISSION_DENIED,
                f"{field_name} {member} is not another member of this Raft group "
                f"(members 1..{len(self._peers)}, this is {self._node_id})",
            )

    def _check_append(self, request: pb.AppendEntriesRequest) -> None:
        """Refuse a malformed AppendEntries before it changes anything (see the module docstring)."""
        self._check_sender(request.leader_id, "leader_id")
        _bounded("term", request.term, MAX_TERM)
        _bounded("prev_log_index", request.prev_log_index, MAX_INDEX)
        _bounded("prev_log_term", request.prev_log_term, request.term)
        _bounded("leader_commit", request.leader_commit, MAX_INDEX)
        entries = request.entries
        if len(entries) > MAX_APPEND_ENTRIES:
            raise RpcError(
                StatusCode.INVALID_ARGUMENT,
                f"AppendEntries with {len(entries)} entries (the limit is {MAX_APPEND_ENTRIES})",
            )
        _bounded("last entry index", request.prev_log_index + len(entries), MAX_INDEX)
        expected, previous_term, size = request.prev_log_index + 1, request.prev_log_term, 0
        check = self._sm.check_command
        for entry in entries:
            if entry.index != expected or not previous_term <= entry.term <= request.term:
                raise RpcError(
                    StatusCode.INVALID_ARGUMENT,
                    f"malformed AppendEntries at entry {entry.index} (term {entry.term}): entries must "
                    f"follow prev_log_index with non-decreasing terms up to the request's term",
                )
            size += len(entry.data)
            if size > MAX_APPEND_REQUEST_BYTES:
                raise RpcError(
                    StatusCode.INVALID_ARGUMENT,
                    f"AppendEntries carries more than {MAX_APPEND_REQUEST_BYTES} bytes of entries",
                )
            if entry.data:
                try:
                    check(entry.data)
                except Exception as exc:
                    raise RpcError(
                        StatusCode.INVALID_ARGUMENT,
                        f"entry {entry.index} is not a state machine command: {_reason(exc)}",
                    ) from None
            expected += 1
            previous_term = entry.term

    async def _append_from_leader(self, request: pb.AppendEntriesRequest) -> pb.AppendEntriesResponse:
        prev, prev_term = request.prev_log_index, request.prev_log_term
        entries = [LogEntry(e.index, e.term, e.data) for e in request.entries]
        for entry in entries:
            have = self._term_at(entry.index)
            if entry.index <= self._commit_index and have is not None and have != entry.term:
                raise RpcError(
                    StatusCode.INVALID_ARGUMENT,
                    f"entry {entry.index} of term {entry.term} conflicts with the committed entry of term "
                    f"{have}",
                )
        await self._accept_leader(request.term, request.leader_id)
        if prev < self._snapshot_index:  # the start is compacted here, hence committed and matching
            entries = [e for e in entries if e.index > self._snapshot_index]
            if not entries:
                covered = request.prev_log_index + len(request.entries)
                return self._append_ok(min(request.leader_commit, covered), covered)
            prev, prev_term = self._snapshot_index, self._snapshot_term
        local = self._term_at(prev)
        if local is None:
            return pb.AppendEntriesResponse(term=self._term, conflict_index=self._last_index() + 1)
        if local != prev_term:
            first = prev
            while first - 1 > self._snapshot_index and self._term_at(first - 1) == local:
                first -= 1
            return pb.AppendEntriesResponse(term=self._term, conflict_index=first, conflict_term=local)
        new: list[LogEntry] = []
        for position, entry in enumerate(entries):
            have = self._term_at(entry.index)
            if have is None or have != entry.term:
                if have is not None:
                    await self._truncate(entry.index)
                new = entries[position:]
                break
        if new:
            await self._append(new)
        match = prev + len(entries)
        return self._append_ok(min(request.leader_commit, match), match)

    def _append_ok(self, commit: int, match: int) -> pb.AppendEntriesResponse:
        if commit > self._commit_index:
            self._set_commit(commit)
        return pb.AppendEntriesResponse(term=self._term, success=True, match_index=match)

    async def on_install_snapshot(self, request: pb.InstallSnapshotRequest) -> pb.InstallSnapshotResponse:
        """Handle one chunk of a snapshot from the leader; the last chunk installs it once its bytes decode
        into scratch state (nothing is stored before that)."""
        self._check_sender(request.leader_id, "leader_id")
        _bounded("term", request.term, MAX_TERM)
        _bounded("last_term", request.last_term, request.term)
        _bounded("last_index", request.last_index, MAX_INDEX)
        if request.last_index < 1:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "a snapshot's last_index must be at least 1")
        if request.offset + len(request.data) > self._max_snapshot_bytes:
            self._incoming = None
            raise RpcError(
                StatusCode.INVALID_ARGUMENT,
                f"snapshot larger than the limit of {self._max_snapshot_bytes} bytes",
            )
        async with self._lock:
            if request.term < self._term:
                return pb.InstallSnapshotResponse(term=self._term)
            key = (request.term, request.leader_id, request.last_index, request.last_term)
            if request.offset == 0:
                buffer = bytearray()
            elif self._incoming is None or self._incoming[0] != key:
                await self._accept_leader(request.term, request.leader_id)
                return pb.InstallSnapshotResponse(term=self._term, next_offset=0)
            else:
                buffer = self._incoming[1]
            if request.offset != len(buffer):
                await self._accept_leader(request.term, request.leader_id)
                return pb.InstallSnapshotResponse(term=self._term, next_offset=len(buffer))
            decoded: object = None
            install = request.done and request.last_index > self._commit_index
            if install:
                data = bytes(buffer) + request.data
                self._incoming = None
                try:
                    decoded = self._sm.decode_snapshot(data)
                except Exception as exc:  # refused before it changes anything, the term included
                    log.warning(
                        "raft node %d refused the snapshot at index %d from member %d (%d bytes): it does "
                        "not decode (%s)",
                        self._node_id,
                        request.last_index,
                        request.leader_id,
                        len(data),
                        _reason(exc),
                    )
                    raise RpcError(
                        StatusCode.INVALID_ARGUMENT,
                        f"snapshot at index {request.last_index} does not decode: {_reason(exc)}",
                    ) from None
            await self._accept_leader(request.term, request.leader_id)
            buffer += request.data
            if not request.done:
                self._incoming = (key, buffer)
                return pb.InstallSnapshotResponse(term=self._term, next_offset=len(buffer))
            self._incoming = None
            if install and request.last_index > self._commit_index:
                try:
                    await self._install(Snapshot(request.last_index, request.last_term, data), decoded)
                except StorageError as exc:
                    raise RpcError(StatusCode.UNAVAILABLE, f"cannot store the snapshot: {exc}") from None
            return pb.InstallSnapshotResponse(term=self._term, next_offset=len(buffer))

    async def _install(self, snapshot: Snapshot, decoded: object) -> None:
        """Replace state and log prefix with a leader's snapshot (`decoded` from its data). Call with
        `_lock` held."""
        try:
            await self._io(self._storage.save_snapshot, snapshot)
        except ValueError:  # a newer local snapshot is already stored
            return
        if self._term_at(snapshot.last_index) == snapshot.last_term:
            del self._log[: snapshot.last_index - self._snapshot_index]
        else:
            self._log = []
            self._truncate_pending = None  # the storage dropped its whole log
        self._snapshot_index, self._snapshot_term = snapshot.last_index, snapshot.last_term
        self._last_snapshot = snapshot
        self._next_snapshot_at = snapshot.last_index + self._snapshot_every
        if snapshot.last_index > self._applied_index:
            self._sm.adopt(decoded)
            self._applied_index = snapshot.last_index
        self._commit_index = max(self._commit_index, snapshot.last_index)
        log.info("raft node %d installed a snapshot at index %d", self._node_id, snapshot.last_index)
        self._notify()

    # -- leader side of replication ------------------------------------------------------------------------

    async def _replicate(self, peer: _Peer, term: int, nursery: trio.Nursery) -> None:
        """Leader: keep one peer's log in step with ours (batches, pipelining, heartbeats, snapshots)."""
        while self._role is Role.LEADER and self._term == term:
            now = trio.current_time()
            if now < peer.backoff_until:
                await trio.sleep_until(peer.backoff_until)
                continue
            limit = 1 if peer.probing else self._max_inflight
            if peer.next_index <= self._snapshot_index:
                if peer.inflight == 0 and not peer.hb_inflight:
                    await self._send_snapshot(peer, term)
                    continue
                peer.wake = trio.Event()  # let earlier requests finish first
                await peer.wake.wait()
                continue
            if peer.next_index <= self._last_index() and peer.inflight < limit:
                self._send_entries(peer, term, nursery, heartbeat=False)
                continue
            # Compare against the same sum the timer waits for (a - b >= c and a >= b + c can disagree).
            due = peer.last_sent + self._heartbeat
            if not peer.hb_inflight and (peer.read_wanted or now >= due):
                self._send_entries(peer, term, nursery, heartbeat=True)
                continue
            peer.wake = trio.Event()
            with trio.move_on_at(due if not peer.hb_inflight else math.inf):
                await peer.wake.wait()

    def _send_entries(self, peer: _Peer, term: int, nursery: trio.Nursery, *, heartbeat: bool) -> None:
        start = min(peer.next_index, self._last_index() + 1)
        prev = start - 1
        entries: list[pb.Entry] = []
        if not heartbeat:
            size = 0
            index = start
            last = self._last_index()
            while index <= last and len(entries) < MAX_APPEND_ENTRIES:
                entry = self._entry(index)
                if entries and size + len(entry.data) > self._max_append_bytes:
                    break
                entries.append(pb.Entry(index=entry.index, term=entry.term, data=entry.data))
                size += len(entry.data) + 24
                index += 1
            peer.next_index = start + len(entries)
            peer.inflight += 1
        else:
            peer.hb_inflight = True
            peer.read_wanted = False
        prev_term = self._term_at(prev)
        assert prev_term is not None, f"no term for index {prev} (snapshot {self._snapshot_index})"
        request = pb.AppendEntriesRequest(
            term=term,
            leader_id=self._node_id,
            prev_log_index=prev,
            prev_log_term=prev_term,
            entries=entries,
            leader_commit=self._commit_index,
        )
        peer.last_sent = trio.current_time()
        self._send_seq += 1
        nursery.start_soon(
            self._await_append, peer, request, term, peer.epoch, (peer.last_sent, self._send_seq), heartbeat
        )

    async def _await_append(
        self,
        peer: _Peer,
        request: pb.AppendEntriesRequest,
        term: int,
        epoch: int,
        sent: tuple[float, int],
        heartbeat: bool,
    ) -> None:
        assert self._clients is not None
        try:
            reply = await self._clients.call(peer.id, "AppendEntries", request, self._rpc_timeout)
        except RpcError as exc:
            log.debug("raft node %d: AppendEntries to %d failed: %s", self._node_id, peer.id, exc)
            reply = None
        finally:
            if heartbeat:
                peer.hb_inflight = False
            else:
                peer.inflight -= 1
            peer.wake.set()
        if reply is None:
            if epoch == peer.epoch:
                peer.epoch += 1
                peer.probing = True
                peer.next_index = peer.match_index + 1
                peer.backoff_until = trio.current_time() + self._heartbeat
            return
        if reply.term > term:
            await self._observe_term(reply.term)
            return
        if self._role is not Role.LEADER or self._term != term:
            return
        self._acknowledged(peer, sent)
        if reply.success:
            match = min(reply.match_index, request.prev_log_index + len(request.entries))
            if match > peer.match_index:
                peer.match_index = match
                self._advance_leader_commit()
            peer.next_index = max(peer.next_index, peer.match_index + 1)
            if epoch == peer.epoch:
                peer.probing = False
        elif epoch == peer.epoch:
            peer.epoch += 1
            peer.probing = True
            if reply.storage_failed:
                peer.next_index = peer.match_index + 1
                peer.backoff_until = trio.current_time() + self._heartbeat
            else:
                if 0 < reply.conflict_index <= peer.match_index:
                    # It lost entries it had acknowledged (storage set aside at start as damaged): start over
                    # from what it has now; the commit index never moves back.
                    log.warning(
                        "raft node %d: member %d lost its log after index %d (had acknowledged %d); refilling it",
                        self._node_id,
                        peer.id,
                        reply.conflict_index - 1,
                        peer.match_index,
                    )
                    peer.match_index = reply.conflict_index - 1
                peer.next_index = max(peer.match_index + 1, self._retry_index(reply))

    def _acknowledged(self, peer: _Peer, sent: tuple[float, int]) -> None:
        """`peer` answered, in our term, a request sent at `sent` (time, sequence number)."""
        at, seq = sent
        peer.last_ack = max(peer.last_ack, at)
        if seq > peer.acked_seq:
            peer.acked_seq = seq
            self._notify()

    def _retry_index(self, reply: pb.AppendEntriesResponse) -> int:
        """Where to resume after a log mismatch (the conflict-term optimisation)."""
        if reply.conflict_term:
            for entry in reversed(self._log):
                if entry.term == reply.conflict_term:
                    return entry.index + 1
                if entry.term < reply.conflict_term:
                    break
        return max(reply.conflict_index, 1)

    async def _send_snapshot(self, peer: _Peer, term: int) -> None:
        """Leader: stream our latest snapshot to `peer` in chunks, then resume appends after it."""
        snapshot = self._last_snapshot
        assert snapshot is not None and self._clients is not None
        data = snapshot.data
        offset = 0
        log.info("raft node %d sends snapshot %d to %d", self._node_id, snapshot.last_index, peer.id)
        while True:
            chunk = data[offset : offset + self._chunk_bytes]
            done = offset + len(chunk) >= len(data)
            request = pb.InstallSnapshotRequest(
                term=term,
                leader_id=self._node_id,
                last_index=snapshot.last_index,
                last_term=snapshot.last_term,
                offset=offset,
                data=chunk,
                done=done,
            )
            peer.last_sent = trio.current_time()
            self._send_seq += 1
            sent = (peer.last_sent, self._send_seq)
            try:
                reply = await self._clients.call(peer.id, "InstallSnapshot", request, self._rpc_timeout)
            except RpcError as exc:
                log.debug("raft node %d: InstallSnapshot to %d failed: %s", self._node_id, peer.id, exc)
                peer.backoff_until = trio.current_time() + self._heartbeat
                return
            if reply.term > term:
                await self._observe_term(reply.term)
                return
            self._acknowledged(peer, sent)
            if reply.next_offset != offset + len(chunk):
                offset = reply.next_offset if reply.next_offset <= len(data) else 0
                continue
            if done:
                break
            offset += len(chunk)
        peer.match_index = max(peer.match_index, snapshot.last_index)
        peer.next_index = peer.match_index + 1
        peer.epoch += 1
        peer.probing = False
        self._advance_leader_commit()

    async def _check_quorum(self, term: int) -> None:
        """Leader: step down when no majority acknowledged anything for the minimum election timeout."""
        window = self._election_timeout[0]
        while self._role is Role.LEADER and self._term == term:
            await trio.sleep(self._heartbeat)
            now = trio.current_time()
            if now - self._leader_since < window:
                continue
            heard = 1 + sum(now - p.last_ack < window for p in self._peer_state.values())
            if heard < _majority(self._size):
                self._leader_id = None
                self._become_follower(f"no majority heard within {window:g}s")
                return

    # -- snapshots ----------------------------------------------------------------------------------------

    def _maybe_snapshot(self) -> None:
        if self._snapshotting or self._applied_index < self._next_snapshot_at or self._nursery is None:
            return
        index = self._applied_index
        self._next_snapshot_at = index + self._snapshot_every
        term = self._term_at(index)
        assert term is not None
        if self._fork_snapshots:
            from spur.raft.forked import fork_snapshot

            try:
                child = fork_snapshot(self._sm.snapshot)  # the state at ``index``, serialized off the loop
            except OSError as exc:
                log.warning("cannot fork for the snapshot at index %d (serializing here): %s", index, exc)
            else:
                self._snapshotting = True
                self._nursery.start_soon(
                    self._forked_snapshot, child, index, term, name=f"raft-snapshot-{index}"
                )
                return
        try:
            data = self._sm.snapshot()
        except Exception:
            log.exception("state machine snapshot at index %d failed; retrying later", index)
            return
        self._snapshotting = True
        self._nursery.start_soon(
            self._save_snapshot, Snapshot(index, term, data), name=f"raft-snapshot-{index}"
        )

    async def _forked_snapshot(self, child: ChildSnapshot, index: int, term: int) -> None:
        """Collect the bytes of the child forked at ``index`` (``spur.raft.forked``), then save them."""
        from spur.raft.forked import ChildSnapshotError

        try:
            data = await child.result()
        except ChildSnapshotError as exc:
            self._snapshotting = False
            log.warning("state machine snapshot at index %d failed (retrying later): %s", index, exc)
            return
        except BaseException:
            self._snapshotting = False
            raise
        await self._save_snapshot(Snapshot(index, term, data))

    async def _save_snapshot(self, snapshot: Snapshot) -> None:
        try:
            await trio.to_thread.run_sync(self._storage.save_snapshot, snapshot)
        except (StorageError, ValueError) as exc:
            log.warning("raft snapshot at index %d failed (retrying later): %s", snapshot.last_index, exc)
            return
        finally:
            self._snapshotting = False
        if (
            snapshot.last_index <= self._snapshot_index
            or self._term_at(snapshot.last_index) != snapshot.last_term
        ):
            return  # a leader's snapshot was installed meanwhile
        del self._log[: snapshot.last_index - self._snapshot_index]
        self._snapshot_index, self._snapshot_term = snapshot.last_index, snapshot.last_term
        self._last_snapshot = snapshot
        log.info("raft snapshot at index %d saved, log compacted", snapshot.last_index)


def _bounded(name: str, value: int, maximum: int) -> None:
    """Refuse (INVALID_ARGUMENT) a request field above `maximum`."""
    if value > maximum:
        raise RpcError(StatusCode.INVALID_ARGUMENT, f"{name} {value} is out of range (at most {maximum})")


def _reason(exc: BaseException) -> str:
    """A short one-line description of why decoding failed (for logs and error text)."""
    text = " ".join(str(exc).split())
    if len(text) > 200:
        text = text[:200] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
