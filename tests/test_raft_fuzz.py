"""Hypothesis over what a Raft member receives: random and mutated AppendEntries, InstallSnapshot and
RequestVote requests against a follower with real storage, and raw snapshot bytes against the cluster state.

Properties: no exception but a refusal (RpcError INVALID_ARGUMENT or PERMISSION_DENIED) leaves a handler;
a refused request changes nothing (term, vote, log, snapshot, state, files); whatever was accepted, the
storage reloads strictly (no CorruptLogError) with every term in range, every entry a command and the
snapshot decodable.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import trio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from spur.raft.node import MAX_INDEX, MAX_TERM, RaftNode
from spur.raft.storage import RaftStorage
from spur.raft.testing import KeyValue, free_ports
from spur.rpc.proto import raft_pb2 as pb
from spur.rpc.status import RpcError, StatusCode
from spur.state.machine import ClusterState

_EDGES = [0, 1, 2, 3, MAX_TERM - 1, MAX_TERM, MAX_TERM + 1, 2**63 - 1, 2**63, 2**64 - 1]
numbers = st.one_of(st.integers(0, 6), st.sampled_from(_EDGES), st.integers(0, 2**64 - 1))
members = st.one_of(st.integers(0, 4), st.integers(0, 2**32 - 1))
commands = st.one_of(
    st.builds(lambda k, v: json.dumps({"put": [k, v]}).encode(), st.text(max_size=4), st.integers(-5, 5)),
    st.binary(max_size=24),
    st.just(b""),
)
VALID_SNAPSHOT = json.dumps({"data": {"k": 1}, "applied": {}}).encode()


def _mutate(data: bytes, position: int, byte: int) -> bytes:
    if not data:
        return bytes([byte])
    position %= len(data)
    return data[:position] + bytes([byte]) + data[position + 1 :]


snapshot_bytes = st.one_of(
    st.just(VALID_SNAPSHOT),
    st.binary(max_size=48),
    st.builds(_mutate, st.just(VALID_SNAPSHOT), st.integers(0, 100), st.integers(0, 255)),
)


@st.composite
def append_entries(draw: Any) -> pb.AppendEntriesRequest:
    prev = draw(numbers)
    term = draw(numbers)
    consecutive = draw(st.booleans())
    count = draw(st.integers(0, 4))
    entries = []
    for i in range(count):
        index = prev + 1 + i if consecutive and prev < 2**63 else draw(numbers)
        entry_term = draw(st.one_of(st.just(term), numbers))
        entries.append(pb.Entry(index=min(index, 2**64 - 1), term=entry_term, data=draw(commands)))
    return pb.AppendEntriesRequest(
        term=term,
        leader_id=draw(members),
        prev_log_index=prev,
        prev_log_term=draw(st.one_of(st.just(term), numbers)),
        entries=entries,
        leader_commit=draw(numbers),
    )


@st.composite
def install_snapshot(draw: Any) -> pb.InstallSnapshotRequest:
    data = draw(snapshot_bytes)
    return pb.InstallSnapshotRequest(
        term=draw(numbers),
        leader_id=draw(members),
        last_index=draw(numbers),
        last_term=draw(numbers),
        offset=draw(st.one_of(st.just(0), numbers)),
        data=data,
        done=draw(st.booleans()),
    )


request_vote = st.builds(
    pb.RequestVoteRequest,
    term=numbers,
    candidate_id=members,
    last_log_index=numbers,
    last_log_term=numbers,
    pre_vote=st.booleans(),
)
put_command = st.builds(
    lambda k, v: json.dumps({"put": [k, v]}).encode(), st.text(max_size=4), st.integers(-5, 5)
)


@st.composite
def plausible_append(draw: Any) -> pb.AppendEntriesRequest:
    """What a real leader (member 1 or 3) might send: small terms, consecutive entries, commands."""
    term = draw(st.integers(1, 4))
    prev = draw(st.integers(0, 6))
    prev_term = draw(st.integers(0, term))
    entry_term = draw(st.integers(prev_term, term))
    entries = [
        pb.Entry(index=prev + 1 + i, term=entry_term, data=draw(st.one_of(put_command, st.just(b""))))
        for i in range(draw(st.integers(0, 4)))
    ]
    return pb.AppendEntriesRequest(
        term=term,
        leader_id=draw(st.sampled_from([1, 3])),
        prev_log_index=prev,
        prev_log_term=prev_term,
        entries=entries,
        leader_commit=draw(st.integers(0, 10)),
    )


@st.composite
def plausible_snapshot(draw: Any) -> pb.InstallSnapshotRequest:
    term = draw(st.integers(1, 4))
    return pb.InstallSnapshotRequest(
        term=term,
        leader_id=draw(st.sampled_from([1, 3])),
        last_index=draw(st.integers(1, 12)),
        last_term=draw(st.integers(0, term)),
        offset=0,
        data=draw(snapshot_bytes),
        done=True,
    )


@st.composite
def plausible_chunks(draw: Any) -> list[pb.InstallSnapshotRequest]:
    """A snapshot sent in two chunks, as a leader with a small chunk size would."""
    first = draw(plausible_snapshot())
    cut = draw(st.integers(0, len(first.data)))
    second = pb.InstallSnapshotRequest()
    second.CopyFrom(first)
    first.data, first.done = first.data[:cut], False
    second.data, second.offset = second.data[cut:], cut
    return [first, second]


plausible_vote = st.builds(
    pb.RequestVoteRequest,
    term=st.integers(0, 5),
    candidate_id=st.sampled_from([1, 3]),
    last_log_index=st.integers(0, 10),
    last_log_term=st.just(0),
    pre_vote=st.booleans(),
)
requests = st.lists(
    st.one_of(
        plausible_append(),
        plausible_append(),
        plausible_snapshot(),
        plausible_chunks(),
        plausible_vote,
        append_entries(),
        install_snapshot(),
        request_vote,
    ),
    min_size=1,
    max_size=12,
)


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.name != "LOCK"}


def _view(node: RaftNode, sm: KeyValue, path: Path) -> tuple[Any, ...]:
    return (
        node.term,
        node.leader_id,
        node.last_log_index,
        node.snapshot_index,
        node.commit_index,
        sm.snapshot(),
        _files(path),
    )


async def _drive(path: Path, batch: list[Any]) -> None:
    peers = [f"127.0.0.1:{port}" for port in free_ports(3)]
    storage = RaftStorage(path, fsync=False, segment_bytes=256)
    sm = KeyValue()
    node = RaftNode(
        node_id=2,
        storage=storage,
        state_machine=sm,
        peers=peers,
        election_timeout=(1000.0, 2000.0),
        heartbeat_interval=1.0,
        rpc_timeout=0.02,
        snapshot_every=3,
        max_snapshot_bytes=1024,
    )
    handlers = {
        pb.AppendEntriesRequest: node.on_append_entries,
        pb.InstallSnapshotRequest: node.on_install_snapshot,
        pb.RequestVoteRequest: node.on_request_vote,
    }
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            for request in [r for item in batch for r in (item if isinstance(item, list) else [item])]:
                before = _view(node, sm, path)
                try:
                    await handlers[type(request)](request)
                    event(f"{type(request).__name__} answered")
                    if node.snapshot_index != before[3]:
                        event("a snapshot was installed or taken")
                except RpcError as exc:
                    event(f"{type(request).__name__} refused")
                    assert exc.code in (StatusCode.INVALID_ARGUMENT, StatusCode.PERMISSION_DENIED), exc
                    assert _view(node, sm, path) == before, f"refused {request} but state changed"
                assert node.term <= MAX_TERM and node.last_log_index <= MAX_INDEX
                # Let a snapshot being saved finish: it is written on a worker thread, which
                # wait_all_tasks_blocked alone does not wait for.
                await trio.testing.wait_all_tasks_blocked()
                while node.snapshotting:
                    await trio.sleep(0.001)
                    await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    finally:
        storage.close()
    # Whatever was accepted is stored intact: a strict reload works and holds only sane values.
    reloaded = RaftStorage(path, fsync=False)
    try:
        hard_state, snapshot, entries = reloaded.load()
    finally:
        reloaded.close()
    assert hard_state.term == node.term <= MAX_TERM
    last = entries[-1].index if entries else (snapshot.last_index if snapshot else 0)
    assert last == node.last_log_index, "the stored log differs from the member's"
    if snapshot is not None:
        KeyValue().decode_snapshot(snapshot.data)
        assert snapshot.last_term <= hard_state.term
    for entry in entries:
        assert entry.term <= hard_state.term and entry.index <= MAX_INDEX
        if entry.data:
            KeyValue().check_command(entry.data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests)
def test_hostile_requests_never_crash_a_follower_or_persist_garbage(batch: list[Any]) -> None:
    path = Path(tempfile.mkdtemp(prefix="raft-fuzz-"))
    try:
        trio.run(_drive, path, batch)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _state_with_jobs() -> bytes:
    from tests.state_helpers import Log, submit

    log = Log()
    for _ in range(3):
        submit(log)
    return log.replay().snapshot()


REAL_SNAPSHOT = _state_with_jobs()


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=64),
        st.builds(_mutate, st.just(REAL_SNAPSHOT), st.integers(0, 10**6), st.integers(0, 255)),
        st.builds(lambda n: REAL_SNAPSHOT[:n], st.integers(0, len(REAL_SNAPSHOT))),
    )
)
def test_snapshot_bytes_either_decode_or_are_refused_leaving_the_state_alone(data: bytes) -> None:
    state = ClusterState()
    state.adopt(state.decode_snapshot(REAL_SNAPSHOT))
    before = state.snapshot()
    try:
        scratch = state.decode_snapshot(data)
    except ValueError:
        assert state.snapshot() == before
        return
    assert state.snapshot() == before  # decoding alone changes nothing
    state.adopt(scratch)
    state.snapshot()  # what was adopted serializes again
