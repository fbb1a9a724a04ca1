"""Raft credentials, the Raft server's interceptor, and a follower's checks of untrusted requests."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from spur.auth.tokens import AUD_AGENT, AUD_CLIENT, AUD_RAFT, mint
from spur.raft import codec
from spur.raft.auth import JwtRaftCredentials, RaftAuthError, RaftPeer, raft_interceptor
from spur.raft.node import MAX_TERM, RaftNode
from spur.raft.storage import RaftStorage
from spur.raft.testing import KeyValue, free_ports, open_cluster
from spur.raft.transport import RAFT_SERVICE
from spur.rpc.channel import open_channel
from spur.rpc.proto import raft_pb2 as pb
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import Stub
from spur.state.machine import ClusterState

KEY = b"raft-test-key-0123456789abcdef0123"
NOW = 1_800_000_000.0


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


# -- credentials ------------------------------------------------------------------------------------------


def test_a_members_credential_verifies_as_that_member_and_is_renewed_with_a_third_left() -> None:
    now = [NOW]
    creds = JwtRaftCredentials(KEY, 2, ttl_secs=300, clock=lambda: now[0])
    first = creds.outgoing_metadata()
    assert JwtRaftCredentials(KEY, 1, clock=lambda: now[0]).verify_member(first) == 2
    now[0] += 150
    assert creds.outgoing_metadata() == first  # more than a third of its life left
    now[0] += 60
    assert creds.outgoing_metadata() != first  # renewed
    assert "raft-test-key" not in repr(creds)


@pytest.mark.parametrize(
    ("metadata", "code", "words"),
    [
        ({}, StatusCode.UNAUTHENTICATED, "need a controller credential"),
        ({"authorization": "Basic abc"}, StatusCode.UNAUTHENTICATED, "Bearer"),
        (_bearer("not-a-jwt"), StatusCode.UNAUTHENTICATED, "invalid Raft credential"),
        (
            _bearer(
                mint(
                    b"another-key-0123456789abcdef0123456789",
                    "spurctld",
                    0,
                    now=NOW,
                    ttl_secs=300,
                    audience=AUD_RAFT,
                    member=1,
                )
            ),
            StatusCode.UNAUTHENTICATED,
            "signature",
        ),
        (
            _bearer(mint(KEY, "spurctld", 0, now=NOW - 600, ttl_secs=300, audience=AUD_RAFT, member=1)),
            StatusCode.UNAUTHENTICATED,
            "expired",
        ),
        (_bearer(mint(KEY, "alice", 1000, now=NOW, ttl_secs=300)), StatusCode.PERMISSION_DENIED, "client"),
        (
            _bearer(mint(KEY, "root", 0, now=NOW, ttl_secs=300, admin=True, audience=AUD_CLIENT)),
            StatusCode.PERMISSION_DENIED,
            "audience",
        ),
        (
            _bearer(mint(KEY, "spurd", 0, now=NOW, ttl_secs=300, audience=AUD_AGENT)),
            StatusCode.PERMISSION_DENIED,
            "'agent'",
        ),
        (
            _bearer(mint(KEY, "spurctld", 0, now=NOW, ttl_secs=300, audience=AUD_RAFT)),
            StatusCode.PERMISSION_DENIED,
            "no member",
        ),
    ],
)
def test_credentials_that_are_not_a_members_are_refused(
    metadata: dict[str, str], code: StatusCode, words: str
) -> None:
    creds = JwtRaftCredentials(KEY, 1, clock=lambda: NOW)
    with pytest.raises(RaftAuthError) as refused:
        creds.verify_member(metadata)
    assert refused.value.code is code and words in str(refused.value)
    assert KEY.decode() not in str(refused.value)


async def test_the_interceptor_takes_only_other_members() -> None:
    creds = JwtRaftCredentials(KEY, 1, clock=lambda: NOW)
    intercept = raft_interceptor(creds, node_id=1, members=[2, 3])

    def context(member: int) -> CallContext:
        token = mint(KEY, "spurctld", 0, now=NOW, ttl_secs=300, audience=AUD_RAFT, member=member)
        return CallContext("/spur.raft.v1.Raft/AppendEntries", _bearer(token), "127.0.0.1:1", None)

    ok = context(3)
    await intercept(ok)
    assert ok.identity == RaftPeer(3)
    for member, words in ((1, "this member itself"), (7, "not a member")):
        with pytest.raises(RpcError) as refused:
            await intercept(context(member))
        assert refused.value.code is StatusCode.PERMISSION_DENIED and words in refused.value.message


async def test_a_group_with_a_key_elects_replicates_and_refuses_strangers(tmp_path: Path) -> None:
    async with open_cluster(
        tmp_path, 3, key=KEY, election_timeout=(0.5, 1.0), heartbeat_interval=0.05
    ) as cluster:
        await cluster.propose({"put": ["k", 1]})  # elected and replicated with credentials
        await cluster.until(lambda: all(cluster.state(n.node_id).data == {"k": 1} for n in cluster.running()))
        leader = await cluster.wait_leader()
        follower = next(n for n in cluster.running() if n is not leader)
        attack_term = max(n.term for n in cluster.running()) + 100
        request = pb.AppendEntriesRequest(term=attack_term, leader_id=leader.node_id)
        address = cluster.peers[follower.node_id - 1]
        third = 6 - leader.node_id - follower.node_id
        cases = [
            ({}, StatusCode.UNAUTHENTICATED),
            (_bearer(mint(KEY, "alice", 1000, now=trio_now(), ttl_secs=300)), StatusCode.PERMISSION_DENIED),
            # a member's credential naming another member as the leader
            (JwtRaftCredentials(KEY, third).outgoing_metadata(), StatusCode.PERMISSION_DENIED),
        ]
        for metadata, code in cases:
            async with open_channel(address, metadata_provider=lambda md=metadata: md) as channel:
                with pytest.raises(RpcError) as refused:
                    await Stub(channel, RAFT_SERVICE).AppendEntries(request, timeout=2)
            assert refused.value.code is code, refused.value
        assert all(n.term < attack_term for n in cluster.running())


def trio_now() -> float:
    import time

    return time.time()


# -- a follower's checks of what a member sends ----------------------------------------------------------


@asynccontextmanager
async def follower(path: Path, **kwargs: object) -> AsyncIterator[tuple[RaftNode, KeyValue, RaftStorage]]:
    """Member 2 of a three-member group whose other members never run (it stays a follower)."""
    peers = [f"127.0.0.1:{port}" for port in free_ports(3)]
    storage = RaftStorage(path, fsync=False)
    sm = KeyValue()
    node = RaftNode(
        node_id=2,
        storage=storage,
        state_machine=sm,
        peers=peers,
        election_timeout=(1000.0, 2000.0),
        heartbeat_interval=1.0,
        **kwargs,  # type: ignore[arg-type]
    )
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            yield node, sm, storage
            nursery.cancel_scope.cancel()
    finally:
        storage.close()


def _put(key: str, value: int) -> bytes:
    return f'{{"put": ["{key}", {value}]}}'.encode()


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.name != "LOCK"}


async def test_out_of_range_terms_and_strangers_are_refused_and_nothing_is_persisted(tmp_path: Path) -> None:
    async with follower(tmp_path) as (node, sm, _):
        ok = await node.on_append_entries(
            pb.AppendEntriesRequest(
                term=3, leader_id=1, entries=[pb.Entry(index=1, term=3, data=_put("a", 1))], leader_commit=1
            )
        )
        assert ok.success and sm.data == {"a": 1}
        files = _files(tmp_path)
        bad = [
            (pb.AppendEntriesRequest(term=2**64 - 1, leader_id=1), StatusCode.INVALID_ARGUMENT),
            (pb.AppendEntriesRequest(term=MAX_TERM + 1, leader_id=1), StatusCode.INVALID_ARGUMENT),
            (
                pb.AppendEntriesRequest(term=4, leader_id=1, leader_commit=2**64 - 1),
                StatusCode.INVALID_ARGUMENT,
            ),
            (pb.AppendEntriesRequest(term=4, leader_id=7), StatusCode.PERMISSION_DENIED),
            (pb.AppendEntriesRequest(term=4, leader_id=2), StatusCode.PERMISSION_DENIED),
            (pb.AppendEntriesRequest(term=4, leader_id=0), StatusCode.PERMISSION_DENIED),
            (
                pb.AppendEntriesRequest(
                    term=4,
                    leader_id=1,
                    prev_log_index=1,
                    prev_log_term=3,
                    entries=[pb.Entry(index=2, term=4, data=b"\x00garbage")],
                ),
                StatusCode.INVALID_ARGUMENT,
            ),
            (
                pb.AppendEntriesRequest(
                    term=4,
                    leader_id=1,
                    prev_log_index=1,
                    prev_log_term=3,
                    entries=[pb.Entry(index=i, term=4, data=_put("x", i)) for i in range(2, 4100)],
                ),
                StatusCode.INVALID_ARGUMENT,
            ),
            (
                pb.AppendEntriesRequest(
                    term=4,
                    leader_id=1,
                    prev_log_index=1,
                    prev_log_term=3,
                    entries=[pb.Entry(index=5, term=4, data=_put("x", 1))],
                ),
                StatusCode.INVALID_ARGUMENT,
            ),
            # a conflicting entry at a committed index
            (
                pb.AppendEntriesRequest(
                    term=4, leader_id=1, entries=[pb.Entry(index=1, term=4, data=_put("b", 1))]
                ),
                StatusCode.INVALID_ARGUMENT,
            ),
        ]
        for request, code in bad:
            with pytest.raises(RpcError) as refused:
                await node.on_append_entries(request)
            assert refused.value.code is code, (request, refused.value)
        votes = [
            pb.RequestVoteRequest(term=2**64 - 1, candidate_id=1),
            pb.RequestVoteRequest(term=9, candidate_id=9),
            pb.RequestVoteRequest(term=9, candidate_id=1, last_log_term=10),
        ]
        for vote in votes:
            with pytest.raises(RpcError):
                await node.on_request_vote(vote)
        assert node.term == 3 and node.leader_id == 1 and node.last_log_index == 1
        assert _files(tmp_path) == files and sm.data == {"a": 1}


async def test_a_snapshot_is_decoded_into_scratch_state_before_anything_is_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with follower(tmp_path, max_snapshot_bytes=4096) as (node, sm, _):
        await node.on_append_entries(
            pb.AppendEntriesRequest(
                term=3, leader_id=1, entries=[pb.Entry(index=1, term=3, data=_put("a", 1))], leader_commit=1
            )
        )
        files = _files(tmp_path)
        garbage = pb.InstallSnapshotRequest(
            term=9, leader_id=1, last_index=50, last_term=9, data=bytes(range(16)), done=True
        )
        with caplog.at_level(logging.WARNING), pytest.raises(RpcError) as refused:
            await node.on_install_snapshot(garbage)
        assert (
            refused.value.code is StatusCode.INVALID_ARGUMENT and "does not decode" in refused.value.message
        )
        assert [r.message for r in caplog.records if "refused the snapshot" in r.message]
        # too large, in one chunk or over several
        for request in (
            pb.InstallSnapshotRequest(term=3, leader_id=1, last_index=50, last_term=3, data=b"x" * 5000),
            pb.InstallSnapshotRequest(
                term=3, leader_id=1, last_index=50, last_term=3, offset=4000, data=b"x" * 200
            ),
            pb.InstallSnapshotRequest(term=3, leader_id=1, last_index=0, last_term=3, data=b"{}", done=True),
            pb.InstallSnapshotRequest(term=3, leader_id=1, last_index=5, last_term=4, data=b"{}", done=True),
        ):
            with pytest.raises(RpcError) as refused:
                await node.on_install_snapshot(request)
            assert refused.value.code is StatusCode.INVALID_ARGUMENT
        assert node.term == 3 and sm.data == {"a": 1} and _files(tmp_path) == files

        good = b'{"data": {"z": 26}, "applied": {}}'
        for offset in (0, 10):
            reply = await node.on_install_snapshot(
                pb.InstallSnapshotRequest(
                    term=4,
                    leader_id=1,
                    last_index=50,
                    last_term=4,
                    offset=offset,
                    data=good[offset : offset + 10] if offset == 0 else good[10:],
                    done=offset == 10,
                )
            )
        assert reply.next_offset == len(good)
        assert sm.data == {"z": 26} and node.snapshot_index == 50 and node.term == 4


# -- the cluster state as untrusted snapshot input -------------------------------------------------------


def test_cluster_state_decodes_snapshots_into_scratch_state() -> None:
    state = ClusterState()
    state.next_job_id = 42
    outbox = state.domains["outbox"]
    for garbage in (
        bytes(range(16)),
        b"{}",
        b"[]",
        b'{"next_job_id": 1, "jobs": [{"job_id": "x"}]}',
        b"1" * 10,
    ):
        with pytest.raises(ValueError, match="not a cluster state snapshot"):
            state.decode_snapshot(garbage)
    assert state.next_job_id == 42
    other = ClusterState()
    other.next_job_id = 7
    other.cluster_id = "abc"
    state.adopt(state.decode_snapshot(other.snapshot()))
    assert state.next_job_id == 7 and state.cluster_id == "abc"
    assert state.domains["outbox"] is outbox and outbox.state is state
    assert state.snapshot() == other.snapshot()


def test_cluster_state_checks_command_envelopes_cheaply() -> None:
    from spur.state import commands as c

    state = ClusterState()
    state.check_command(c.encode(c.ForgetNode(name="n1", time=0.0)))
    for bad in (
        b"\x00",
        b"[]",
        b'{"type": "Nope", "body": {}}',
        b'{"type": "Batch", "body": {"commands": [1]}}',
    ):
        with pytest.raises(ValueError):
            state.check_command(bad)


# -- start-up with damaged files -------------------------------------------------------------------------


def _write_snapshot(path: Path, index: int, term: int, data: bytes) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "snapshot").write_bytes(codec.encode_snapshot_header(index, term, data) + data)


async def test_an_undecodable_snapshot_at_start_is_set_aside_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _write_snapshot(tmp_path, 5, 1, bytes(range(16)))
    with caplog.at_level(logging.INFO):
        async with follower(tmp_path) as (node, sm, _):
            assert node.snapshot_index == 0 and node.last_log_index == 0 and sm.data == {}
    lines = [r.message for r in caplog.records if "does not decode" in r.message]
    assert len(lines) == 1 and str(tmp_path / "snapshot") in lines[0]
    assert (tmp_path / "snapshot.corrupt").exists() and not (tmp_path / "snapshot").exists()


def test_salvage_keeps_the_intact_prefix_of_a_damaged_log(tmp_path: Path) -> None:
    from spur.raft.storage import CorruptLogError, LogEntry

    storage = RaftStorage(tmp_path, fsync=False, segment_bytes=64)
    storage.load()
    for i in range(1, 5):
        storage.append([LogEntry(i, 1, b"x" * 40)])
    storage.close()
    segments = sorted(tmp_path.glob("wal-*.log"))
    assert len(segments) >= 3
    damaged = bytearray(segments[1].read_bytes())
    damaged[20] ^= 0xFF
    segments[1].write_bytes(bytes(damaged))
    strict = RaftStorage(tmp_path)
    with pytest.raises(CorruptLogError):
        strict.load()
    strict.close()
    storage = RaftStorage(tmp_path, fsync=False)
    _, _, entries = storage.load(salvage=True)
    assert [e.index for e in entries] == [1]
    storage.close()
    assert sorted(p.name for p in tmp_path.glob("*.corrupt"))  # kept for the operator
    storage = RaftStorage(tmp_path, fsync=False)
    assert [e.index for e in storage.load()[2]] == [1]  # strict load is happy now
    storage.close()


def test_salvage_sets_aside_a_damaged_snapshot_file(tmp_path: Path) -> None:
    _write_snapshot(tmp_path, 5, 1, b"{}")
    raw = bytearray((tmp_path / "snapshot").read_bytes())
    raw[-1] ^= 0xFF
    (tmp_path / "snapshot").write_bytes(bytes(raw))
    storage = RaftStorage(tmp_path, fsync=False)
    _, snapshot, entries = storage.load(salvage=True)
    assert snapshot is None and entries == []
    storage.close()
    assert (tmp_path / "snapshot.corrupt").exists()


# -- the controller's wiring -----------------------------------------------------------------------------


def _controller(tmp_path: Path, auth: str, caplog: pytest.LogCaptureFixture) -> Any:
    from spur.config import parse_config_text
    from spur.controller.app import Controller

    key_file = tmp_path / "jwt.key"
    key_file.write_bytes(KEY)
    key_file.chmod(0o600)
    conf = '[controller]\npeers = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]\n' + auth.format(key=key_file)
    cfg = parse_config_text(conf, overrides={"controller.state_dir": str(tmp_path / "state")})
    with caplog.at_level(logging.WARNING, logger="spur.controller"):
        ctl = Controller(cfg, listen=("127.0.0.1", 0), node_id=2)
    ctl.storage.close()
    return ctl


@pytest.mark.parametrize("mode", ["required", "permissive", "disabled"])
def test_a_controller_with_the_key_requires_raft_credentials_in_every_mode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    ctl = _controller(tmp_path, f'[auth]\nmode = "{mode}"\njwt_key_file = "{{key}}"\n', caplog)
    credentials = ctl.raft._credentials
    assert isinstance(credentials, JwtRaftCredentials)
    assert JwtRaftCredentials(KEY, 1).verify_member(credentials.outgoing_metadata()) == 2
    assert not [r for r in caplog.records if "Raft port is unauthenticated" in r.message]


def test_a_controller_without_a_key_warns_once_that_raft_is_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ctl = _controller(tmp_path, '[auth]\nmode = "disabled"\n', caplog)
    assert ctl.raft._credentials is None
    warnings = [r.message for r in caplog.records if "Raft port is unauthenticated" in r.message]
    assert len(warnings) == 1 and "jwt_key" in warnings[0]


async def test_a_member_holding_an_out_of_range_term_keeps_running_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    """Storage written before terms were bounded (term 2**64-1 persisted from a forged message): the
    member no longer dies at its next election with 'Value out of range'."""
    from spur.raft.storage import HARD_STATE_FILE

    tmp_path.mkdir(exist_ok=True)
    (tmp_path / HARD_STATE_FILE).write_bytes(codec.encode_hard_state(2**64 - 1, None))
    peers = [f"127.0.0.1:{port}" for port in free_ports(3)]
    storage = RaftStorage(tmp_path, fsync=False)
    node = RaftNode(node_id=2, storage=storage, state_machine=KeyValue(), peers=peers)
    with caplog.at_level(logging.ERROR):
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            await trio.sleep(30)  # fifteen election timeouts and more (virtual time)
            assert node.term == 2**64 - 1 and node.role == "follower"
            nursery.cancel_scope.cancel()
    storage.close()
    assert len([r for r in caplog.records if "cannot campaign" in r.message]) == 1


async def test_a_member_that_set_its_snapshot_aside_is_refilled_by_the_leader(tmp_path: Path) -> None:
    async with open_cluster(
        tmp_path, 3, key=KEY, election_timeout=(0.5, 1.0), heartbeat_interval=0.05
    ) as cluster:
        for i in range(5):
            await cluster.propose({"put": [f"k{i}", i]})
        leader = await cluster.wait_leader()
        victim = next(n.node_id for n in cluster.running() if n is not leader)
        await cluster.until(lambda: cluster.node(victim).applied_index >= leader.commit_index)
        index, term = cluster.node(victim).applied_index, cluster.node(victim).term
        await cluster.stop(victim)
        _write_snapshot(tmp_path / f"n{victim}", index, term, bytes(range(16)))
        await cluster.start(victim)
        expected = {f"k{i}": i for i in range(5)}
        await cluster.until(
            lambda: cluster.members[victim].sm is not None and cluster.state(victim).data == expected
        )
        assert (tmp_path / f"n{victim}" / "snapshot.corrupt").exists()
