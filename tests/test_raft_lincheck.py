"""The linearizability checker, and a Raft cluster's history of writes and ReadIndex reads under faults."""

from __future__ import annotations

import itertools
import json
import math
import random
import time
from pathlib import Path

import pytest
import trio
import trio.testing

from spur.raft import NotLeader, Role
from spur.raft.lincheck import Op, check_registers
from spur.raft.testing import open_cluster


def test_checker_accepts_linearizable_and_rejects_stale_reads() -> None:
    w1 = Op("k", "write", 1, call=0, ret=1)
    assert check_registers([w1, Op("k", "read", 1, 2, 3)]).ok
    assert not check_registers([w1, Op("k", "read", None, 2, 3)]).ok  # stale read after the write returned
    # concurrent read may see either value
    assert check_registers(
        [Op("k", "write", 1, 0, 5), Op("k", "read", None, 1, 2), Op("k", "read", 1, 3, 4)]
    ).ok
    # ...but not go back in time
    bad = [Op("k", "write", 1, 0, 5), Op("k", "read", 1, 1, 2), Op("k", "read", None, 3, 4)]
    assert check_registers(bad) == check_registers(bad) and check_registers(bad).key == "k"
    # an unknown-outcome write may take effect late, or never
    lost = Op("k", "write", 2, 0)
    assert check_registers([lost, Op("k", "read", None, 1, 2), Op("k", "read", 2, 3, 4)]).ok
    assert check_registers([lost, Op("k", "read", None, 1, 2)]).ok
    assert not check_registers([lost, Op("k", "read", 2, 1, 2), Op("k", "read", None, 3, 4)]).ok
    # keys are independent
    assert check_registers([w1, Op("j", "read", None, 2, 3)]).ok
    with pytest.raises(ValueError, match="kind"):
        Op("k", "cas", 1, 0, 1)


@pytest.fixture
def clock() -> trio.testing.MockClock:
    # A short threshold keeps the many client think-time jumps cheap; loopback replies take well under it.
    return trio.testing.MockClock(autojump_threshold=0.01)


async def test_history_under_partitions_and_crashes_is_linearizable(
    tmp_path: Path, clock: trio.testing.MockClock
) -> None:
    rng = random.Random(7)
    history: list[Op] = []
    ticks = itertools.count()  # a global order of call and return events
    values = itertools.count(1)
    stop = trio.Event()
    with trio.fail_after(300):
        async with open_cluster(
            tmp_path, 5, snapshot_every=50, election_timeout=(1.0, 2.0), heartbeat_interval=0.2
        ) as cluster:

            async def client() -> None:
                while not stop.is_set():
                    # Think time: lets virtual time advance (a MockClock only jumps when all tasks wait).
                    await trio.sleep(rng.uniform(0.05, 0.2))
                    key = rng.choice("ab")
                    node = await cluster.wait_leader()
                    if rng.random() < 0.5:
                        value = next(values)
                        call = next(ticks)
                        try:
                            await node.propose(json.dumps({"put": [key, value]}).encode())
                        except NotLeader:
                            history.append(Op(key, "write", value, call))  # outcome unknown
                            continue
                        history.append(Op(key, "write", value, call, next(ticks)))
                    else:
                        sm = cluster.state(node.node_id)
                        call = next(ticks)
                        try:
                            await node.read_barrier()
                        except NotLeader:
                            continue
                        history.append(Op(key, "read", sm.data.get(key), call, next(ticks)))

            async def nemesis() -> None:
                for round_ in range(4):
                    await trio.sleep(1)
                    leader = await cluster.wait_leader()
                    if round_ % 2:
                        await cluster.stop(leader.node_id)
                        await trio.sleep(1)
                        await cluster.start(leader.node_id)
                    else:
                        cluster.faults.partition([leader.node_id, rng.choice([m for m in cluster.members])])
                        await trio.sleep(2.5)
                        cluster.faults.heal()
                stop.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(nemesis)
                for _ in range(4):
                    nursery.start_soon(client)
            assert sum(1 for op in history if op.kind == "read") > 50
            assert sum(1 for op in history if op.kind == "write" and math.isfinite(op.ret)) > 50
            assert len(cluster.leaders) >= 3
            assert all(n.role in (Role.LEADER, Role.FOLLOWER, Role.CANDIDATE) for n in cluster.running())
    started = time.perf_counter()
    result = check_registers(history)
    print(f"checked {len(history)} operations in {time.perf_counter() - started:.2f}s")
    assert result.ok, f"history of key {result.key!r} is not linearizable"
