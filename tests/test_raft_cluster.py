"""Multi-member Raft over real loopback sockets: elections, replication, failures, recovery."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
import trio
import trio.testing

from spur.raft import NotLeader, Role
from spur.raft.testing import open_cluster

TIMING = {"election_timeout": (1.0, 2.0), "heartbeat_interval": 0.2}


@pytest.fixture
def clock() -> trio.testing.MockClock:
    # Virtual time jumps ahead whenever every task has waited 50 ms of real time (sockets included).
    return trio.testing.MockClock(autojump_threshold=0.05)


def put(key: str, value: object, **extra: object) -> bytes:
    return json.dumps({"put": [key, value], **extra}).encode()


async def test_three_members_elect_one_leader_and_replicate(
    tmp_path: Path, clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(60):
        async with open_cluster(tmp_path, 3, **TIMING) as cluster:
            leader = await cluster.wait_leader()
            assert [n.role for n in cluster.running()].count(Role.LEADER) == 1
            for i in range(20):
                assert await leader.propose(put("k", i)) == (i - 1 if i else None)
            await leader.read_barrier()
            await cluster.until(
                lambda: all(n.applied_index == leader.commit_index for n in cluster.running())
            )
            for member in cluster.members:
                assert cluster.state(member).data == {"k": 19}
            follower = next(n for n in cluster.running() if n is not leader)
            with pytest.raises(NotLeader) as info:
                await follower.propose(put("k", 0))
            assert info.value.leader_id == leader.node_id
            assert info.value.leader_hint == cluster.peers[leader.node_id - 1]
            assert len(cluster.leaders) >= 1


async def test_leader_crash_elects_a_new_leader_and_loses_no_committed_entry(
    tmp_path: Path, clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(120):
        async with open_cluster(tmp_path, 5, **TIMING) as cluster:
            old = await cluster.wait_leader()
            for _ in range(30):
                await old.propose(json.dumps({"add": ["n", 1]}).encode())
            old_id, old_term = old.node_id, old.term
            await cluster.stop(old_id)
            new = await cluster.wait_leader()
            assert new.node_id != old_id and new.term > old_term
            assert await new.propose(json.dumps({"add": ["n", 1]}).encode()) == 31
            await cluster.start(old_id)  # rejoins as a follower and catches up
            await cluster.until(
                lambda: (
                    all(n.applied_index >= new.commit_index for n in cluster.running())
                    and len(cluster.running()) == 5
                )
            )
            assert {cluster.state(m).data["n"] for m in cluster.members} == {31}
            assert cluster.node(old_id).role is Role.FOLLOWER


async def test_partitioned_follower_catches_up_through_a_chunked_snapshot(
    tmp_path: Path, clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(120):
        async with open_cluster(
            tmp_path, 3, snapshot_every=25, snapshot_chunk_bytes=100, **TIMING
        ) as cluster:
            leader = await cluster.wait_leader()
            lagging = next(m for m in cluster.members if m != leader.node_id)
            for i in range(10):
                await leader.propose(put(f"k{i % 4}", i))
            cluster.faults.isolate(lagging)
            for i in range(10, 120):  # the leader compacts past everything the lagging member has
                await leader.propose(put(f"k{i % 4}", i))
            assert leader.snapshot_index > cluster.node(lagging).last_log_index
            before = cluster.node(lagging).snapshot_index
            assert leader.term == cluster.node(lagging).term  # pre-vote kept the isolated member's term
            cluster.faults.heal()
            await cluster.until(lambda: cluster.node(lagging).applied_index >= leader.commit_index)
            assert cluster.node(lagging).snapshot_index > before
            assert cluster.state(lagging).data == cluster.state(leader.node_id).data
            assert cluster.state(lagging).data == {"k0": 116, "k1": 117, "k2": 118, "k3": 119}
            # and it keeps up with plain appends afterwards
            await leader.propose(put("k0", "after"))
            await cluster.until(lambda: cluster.state(lagging).data.get("k0") == "after")


async def test_minority_leader_cannot_commit_and_steps_down(
    tmp_path: Path, clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(120):
        async with open_cluster(tmp_path, 5, **TIMING) as cluster:
            old = await cluster.wait_leader()
            await old.propose(put("k", "before"))
            follower = next(m for m in cluster.members if m != old.node_id)
            cluster.faults.partition([old.node_id, follower])
            outcome: list[BaseException] = []

            async def doomed() -> None:
                try:
                    await old.propose(put("k", "lost"), command="the lost proposal")
                except NotLeader as exc:
                    outcome.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(doomed)
                majority = set(cluster.members) - {old.node_id, follower}
                new = await cluster.wait_leader(among=majority)
                await new.propose(put("k", "majority"), command="the majority's proposal")
                await cluster.until(lambda: old.role is Role.FOLLOWER)
            assert len(outcome) == 1 and "lost leadership" in str(outcome[0])
            with pytest.raises(NotLeader):
                await old.read_barrier()
            assert old.commit_index < new.commit_index
            cluster.faults.heal()
            await cluster.until(lambda: all(n.applied_index >= new.commit_index for n in cluster.running()))
            assert {cluster.state(m).data["k"] for m in cluster.members} == {"majority"}
            # A proposer's object reaches apply only with its own entry, on its own leader: the old
            # leader's replaced entry never did, and no follower was handed the new leader's.
            handed = {m: set(cluster.state(m).handed.values()) for m in cluster.members}
            assert handed[new.node_id] == {"the majority's proposal"}
            assert all(not objects for m, objects in handed.items() if m != new.node_id)


async def test_pre_vote_keeps_a_rejoining_member_from_disrupting_the_leader(
    tmp_path: Path, clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(120):
        async with open_cluster(tmp_path, 3, **TIMING) as cluster:
            leader = await cluster.wait_leader()
            term = leader.term
            loner = next(m for m in cluster.members if m != leader.node_id)
            cluster.faults.isolate(loner)
            await trio.sleep(8)  # several election timeouts pass while it is cut off
            assert cluster.node(loner).term == term
            cluster.faults.heal()
            await leader.propose(put("k", 1))
            await cluster.until(lambda: cluster.state(loner).data.get("k") == 1)
            assert leader.role is Role.LEADER and leader.term == term
            assert set(cluster.leaders) == {term}


async def test_a_member_restarts_from_its_storage(tmp_path: Path, clock: trio.testing.MockClock) -> None:
    with trio.fail_after(120):
        async with open_cluster(tmp_path, 3, snapshot_every=15, fsync=True, **TIMING) as cluster:
            leader = await cluster.wait_leader()
            for _ in range(40):
                await leader.propose(json.dumps({"add": ["n", 1]}).encode())
            for member in list(cluster.members):
                await cluster.stop(member)
            for member in list(cluster.members):
                await cluster.start(member)
            leader = await cluster.wait_leader()
            assert await leader.propose(json.dumps({"add": ["n", 1]}).encode()) == 41
            await cluster.until(
                lambda: all(n.applied_index >= leader.commit_index for n in cluster.running())
            )
            assert {cluster.state(m).data["n"] for m in cluster.members} == {41}


async def test_a_follower_whose_fsync_fails_does_not_acknowledge(
    tmp_path: Path, clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(120):
        async with open_cluster(tmp_path, 3, fsync=True, **TIMING) as cluster:
            leader = await cluster.wait_leader()
            await leader.propose(put("k", 1))
            sick, down = (m for m in cluster.members if m != leader.node_id)
            sick_dir = str(cluster.members[sick].directory)
            real_fsync = os.fsync
            failing = True

            def fsync(fd: int) -> None:
                if failing and os.readlink(f"/proc/self/fd/{fd}").startswith(sick_dir):
                    raise OSError(errno.EIO, "Input/output error")
                real_fsync(fd)

            await cluster.stop(down)  # the sick member's ack is now needed for a majority
            monkeypatch.setattr(os, "fsync", fsync)
            result: list[object] = []

            async def propose() -> None:
                result.append(await leader.propose(put("k", 2)))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(propose)
                await trio.sleep(3)  # many replication attempts, each failing on the sick member
                assert result == [] and cluster.node(sick).commit_index < leader.last_log_index
                assert leader.commit_index < leader.last_log_index
                failing = False  # the disk recovers: the retried append is acknowledged
            assert result == [1]
            await cluster.until(lambda: cluster.state(sick).data == {"k": 2})


async def test_acknowledged_proposals_apply_exactly_once_while_leaders_are_killed(
    tmp_path: Path, clock: trio.testing.MockClock
) -> None:
    acked: set[str] = set()
    unknown: set[str] = set()
    with trio.fail_after(300):
        async with open_cluster(tmp_path, 3, snapshot_every=200, **TIMING) as cluster:

            async def client(worker: int) -> None:
                for n in range(250):
                    op_id = f"w{worker}-{n}"
                    while True:
                        node = await cluster.wait_leader()
                        try:
                            await node.propose(json.dumps({"add": ["n", 1], "id": op_id}).encode())
                        except NotLeader:
                            if node.role is Role.LEADER or op_id in unknown:
                                continue
                            unknown.add(op_id)  # it may or may not commit; never retried
                            break
                        acked.add(op_id)
                        break

            async def nemesis() -> None:
                for _ in range(3):
                    await cluster.until(lambda: len(acked) >= 200 * (len(cluster.leaders)))
                    victim = (await cluster.wait_leader()).node_id
                    await cluster.stop(victim)
                    await cluster.wait_leader()
                    await cluster.start(victim)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(nemesis)
                for worker in range(4):
                    nursery.start_soon(client, worker)
            leader = await cluster.wait_leader()
            await leader.read_barrier()
            await cluster.until(
                lambda: all(n.applied_index >= leader.commit_index for n in cluster.running())
            )
            assert len(cluster.leaders) >= 4
            assert len(acked) + len(unknown) == 1000
            for member in cluster.members:
                applied = cluster.state(member).applied
                assert all(applied.get(op) == 1 for op in acked), f"member {member} lost or repeated an ack"
                assert all(count == 1 for count in applied.values())
                assert set(applied) <= acked | unknown
                assert cluster.state(member).data["n"] == len(applied)
