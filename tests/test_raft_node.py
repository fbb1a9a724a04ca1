"""RaftNode as a one-member group: propose/apply, restart replay, snapshots, group commit, failures."""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from spur.raft import NotLeader, RaftNode, RaftStorage, Role, StorageError
from spur.raft.storage import HardState


class Counter:
    """Tiny state machine: b"+N" adds N and returns the new total; b"bad" is rejected at apply time."""

    def __init__(self) -> None:
        self.value = 0
        self.applied: list[int] = []
        self.restored_from: int | None = None
        self.proposed: list[object | None] = []  # what each apply was handed beside its data

    def apply(self, index: int, data: bytes, proposed: object | None = None) -> Any:
        self.applied.append(index)
        self.proposed.append(proposed)
        if data == b"bad":
            raise ValueError("bad command")
        self.value += int(data[1:])
        return self.value

    def snapshot(self) -> bytes:
        return json.dumps({"value": self.value}).encode()

    def decode_snapshot(self, data: bytes) -> object:
        value = json.loads(data)["value"]
        if not isinstance(value, int):
            raise ValueError("value must be an integer")
        return value

    def adopt(self, decoded: object) -> None:
        assert isinstance(decoded, int)
        self.value = decoded
        self.restored_from = self.value

    def check_command(self, data: bytes) -> None:
        """Anything goes here: b"bad" is meant to reach apply."""


@asynccontextmanager
async def running(path: Path, sm: Counter | None = None, **kwargs: Any) -> AsyncIterator[RaftNode]:
    storage = RaftStorage(path, fsync=kwargs.pop("fsync", True))
    node = RaftNode(
        node_id=kwargs.pop("node_id", 1), storage=storage, state_machine=sm or Counter(), **kwargs
    )
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            yield node
            nursery.cancel_scope.cancel()
    finally:
        storage.close()


async def test_propose_commits_and_returns_the_apply_result(tmp_path: Path) -> None:
    sm = Counter()
    async with running(tmp_path, sm) as node:
        assert node.role is Role.LEADER
        assert node.leader_id == 1
        assert await node.propose(b"+5") == 5
        assert await node.propose(b"+2") == 7
        await node.read_barrier()
        assert node.status() == {
            "node_id": 1,
            "role": "leader",
            "term": 1,
            "leader_id": 1,
            "leader_hint": None,
            "commit_index": 2,
            "applied_index": 2,
            "last_log_index": 2,
            "snapshot_index": 0,
            "members": 1,
        }
    assert sm.applied == [1, 2]


async def test_the_leader_hands_its_proposers_objects_to_apply_and_a_replay_decodes(tmp_path: Path) -> None:
    sm = Counter()
    async with running(tmp_path, sm) as node:
        assert await node.propose(b"+5", command=("add", 5)) == 5
        assert await node.propose(b"+2") == 7
    assert sm.proposed == [("add", 5), None]
    replayed = Counter()
    async with running(tmp_path, replayed) as node:
        assert replayed.value == 7
        assert await node.propose(b"+1", command=("add", 1)) == 8
    assert replayed.proposed == [None, None, ("add", 1)]  # entries of an earlier term carry no object


@pytest.mark.parametrize("fsync", [True, False])
async def test_restart_replays_to_the_same_state_and_bumps_the_term(tmp_path: Path, fsync: bool) -> None:
    async with running(tmp_path, fsync=fsync) as node:
        assert node.term == 1
        for n in range(1, 11):
            await node.propose(b"+%d" % n)
    sm = Counter()
    async with running(tmp_path, sm, fsync=fsync) as node:
        assert sm.value == 55 and sm.applied == list(range(1, 11))
        assert node.term == 2
        assert (node.commit_index, node.applied_index) == (10, 10)
        assert await node.propose(b"+1") == 56
    async with running(tmp_path) as node:
        assert node.term == 3
    storage = RaftStorage(tmp_path)
    hard_state, _, log = storage.load()
    storage.close()
    assert hard_state == HardState(term=3, voted_for=1)
    assert [e.term for e in log] == [1] * 10 + [2]


async def test_snapshot_is_taken_and_used_on_restart(tmp_path: Path) -> None:
    async with running(tmp_path, snapshot_every=10) as node:
        for _ in range(25):
            await node.propose(b"+1")
    # run() waits for a snapshot write in progress before returning. One is taken at 10; the next is due at
    # 20 but waits until the first is written, so it lands in 20..25 (or not at all on a very slow disk).
    sm = Counter()
    async with running(tmp_path, sm, snapshot_every=10) as node:
        assert node.snapshot_index == 10 or 20 <= node.snapshot_index <= 25
        assert sm.restored_from == node.snapshot_index
        assert sm.applied == list(range(node.snapshot_index + 1, 26))
        assert sm.value == 25
        assert node.last_log_index == 25
    files = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("wal-"))
    assert int(files[0][4:24]) > 10  # compacted on disk too


async def test_apply_errors_reach_the_proposer_and_replay_cleanly(tmp_path: Path) -> None:
    async with running(tmp_path) as node:
        await node.propose(b"+3")
        with pytest.raises(ValueError, match="bad command"):
            await node.propose(b"bad")
        assert node.applied_index == 2
        assert await node.propose(b"+1") == 4
    sm = Counter()
    async with running(tmp_path, sm):
        assert sm.value == 4 and sm.applied == [1, 2, 3]


async def test_invalid_proposals(tmp_path: Path) -> None:
    async with running(tmp_path) as node:
        with pytest.raises(ValueError, match="must not be empty"):
            await node.propose(b"")
        with pytest.raises(TypeError, match="must be bytes, not str"):
            await node.propose("+1")  # type: ignore[arg-type]
        assert node.last_log_index == 0


def test_bad_settings_are_refused_with_one_clear_error(tmp_path: Path) -> None:
    storage = RaftStorage(tmp_path)
    peers = ["ctl1:6821", "ctl2:6821"]
    with pytest.raises(ValueError, match=r"node_id 3 is not a position in peers .* \(1\.\.2\)"):
        RaftNode(node_id=3, storage=storage, state_machine=Counter(), peers=peers)
    with pytest.raises(ValueError, match=r"node_id 2 is not a position in peers \['ctl1:6821'\]"):
        RaftNode(node_id=2, storage=storage, state_machine=Counter(), peers=peers[:1])
    with pytest.raises(ValueError, match="port must be a number"):
        RaftNode(node_id=1, storage=storage, state_machine=Counter(), peers=["ctl1:x", "ctl2:6821"])
    with pytest.raises(ValueError, match="heartbeat_interval"):
        RaftNode(node_id=1, storage=storage, state_machine=Counter(), heartbeat_interval=1.5)
    with pytest.raises(ValueError, match="election_timeout"):
        RaftNode(node_id=1, storage=storage, state_machine=Counter(), election_timeout=(2.0, 1.0))
    storage.close()


async def test_a_single_peer_listing_itself_is_a_one_member_group(tmp_path: Path) -> None:
    async with running(tmp_path, peers=["ctl1:6821"]) as node:
        assert node.role is Role.LEADER
        assert await node.propose(b"+1") == 1


async def test_not_leader_before_start_and_after_stop(tmp_path: Path) -> None:
    storage = RaftStorage(tmp_path)
    node = RaftNode(node_id=4, storage=storage, state_machine=Counter())
    with pytest.raises(NotLeader, match="not the leader") as info:
        await node.propose(b"+1")
    assert info.value.leader_hint is None
    with pytest.raises(NotLeader):
        await node.read_barrier()

    roles: list[Role] = []
    stopped = trio.Event()

    async def watch_roles() -> None:
        seen = node.role
        while True:
            seen = await node.wait_role_change(seen)
            roles.append(seen)
            if len(roles) == 3:
                stopped.set()

    async with trio.open_nursery() as outer:
        outer.start_soon(watch_roles)
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            assert await node.propose(b"+1") == 1
            nursery.cancel_scope.cancel()
        assert node.role is Role.FOLLOWER and node.leader_id is None
        with pytest.raises(NotLeader):
            await node.propose(b"+1")
        with trio.fail_after(5):
            await stopped.wait()
        outer.cancel_scope.cancel()
    assert roles == [Role.CANDIDATE, Role.LEADER, Role.FOLLOWER]
    with pytest.raises(RuntimeError, match="only be called once"):
        await node.run()
    storage.close()


async def test_wait_role_change_returns_at_once_when_already_different(tmp_path: Path) -> None:
    async with running(tmp_path) as node:
        with trio.fail_after(1):
            assert await node.wait_role_change(Role.FOLLOWER) is Role.LEADER


async def test_group_commit_batches_concurrent_proposals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsyncs = 0
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        nonlocal fsyncs
        fsyncs += 1
        real_fsync(fd)

    async with running(tmp_path) as node:
        await node.propose(b"+0")  # creates the segment file
        monkeypatch.setattr(os, "fsync", counting_fsync)
        results: list[int] = []

        async def one() -> None:
            results.append(await node.propose(b"+1"))

        async with trio.open_nursery() as nursery:
            for _ in range(100):
                nursery.start_soon(one)
        monkeypatch.undo()
        assert sorted(results) == list(range(1, 101))
        assert node.commit_index == 101
    assert 1 <= fsyncs <= 10


def enospc(*args: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


async def test_fsync_failure_fails_the_proposal_and_later_ones_succeed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sm = Counter()
    async with running(tmp_path, sm) as node:
        assert await node.propose(b"+1") == 1
        monkeypatch.setattr(os, "fsync", enospc)
        with pytest.raises(StorageError, match="No space left on device"):
            await node.propose(b"+10")
        assert (sm.value, node.commit_index, node.applied_index, node.last_log_index) == (1, 1, 1, 1)
        monkeypatch.undo()  # the disk recovers
        assert await node.propose(b"+2") == 3
        assert node.last_log_index == 2
    sm = Counter()
    async with running(tmp_path, sm):
        assert sm.value == 3 and sm.applied == [1, 2]


async def test_stop_during_a_write_still_applies_the_written_batch(tmp_path: Path) -> None:
    """Cancelling run() while an append is in its thread: the entry is durable, so it is applied."""
    storage = RaftStorage(tmp_path)
    sm = Counter()
    node = RaftNode(node_id=1, storage=storage, state_machine=sm)
    in_append = threading.Event()
    release = threading.Event()
    real_append = storage.append

    def slow_append(entries: Any) -> None:
        in_append.set()
        release.wait(10)
        real_append(entries)

    storage.append = slow_append  # type: ignore[method-assign]
    result: list[int] = []

    async def proposer() -> None:
        result.append(await node.propose(b"+7"))

    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            outer.start_soon(proposer)
            await trio.to_thread.run_sync(in_append.wait, 10)
            nursery.cancel_scope.cancel()
            release.set()
    storage.close()
    assert result == [7] and sm.value == 7
    async with running(tmp_path, sm := Counter()):
        assert sm.value == 7
