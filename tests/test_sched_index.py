"""The scheduler's incrementally maintained views equal a from-scratch build after any command sequence.

Random sequences of submits (plain, arrays with a %N throttle, held), starts, exits, cancels, job
updates (time limit, hold/release, requeue), node registrations, drains, losses, removals and
partition changes go through the state machine exactly as Raft applies them; at random points the
incremental ``snapshot`` must equal ``build_snapshot`` (and the pending/holding indices the jobs'
states), including across a Raft snapshot/restore.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from state_helpers import Log, register, spec

from spur.core.job import JobState, NodeAllocation, Partition, PartitionState
from spur.state import commands as c
from spur.state.machine import ClusterState
from spur.state.sched_view import build_snapshot, eligible_jobs, snapshot

NODES = [f"n{i}" for i in range(1, 7)]
ACTIONS = [
    "submit",
    "submit_array",
    "start",
    "start",
    "exit",
    "cancel",
    "update",
    "register",
    "node_admin",
    "node_lost",
    "remove",
    "partitions",
    "check",
    "restore",
]


def assert_views_match(state: ClusterState, now: float) -> None:
    eligible, _ = eligible_jobs(state, now)
    pending = sorted(j.job_id for j in state.jobs.values() if j.state is JobState.PENDING)
    assert [j.job_id for j in eligible] == [i for i in pending if i in {e.job_id for e in eligible}]
    assert state.sched_index.pending_ids(state) == pending
    assert set(state.sched_index.holding) == {
        j.job_id for j in state.jobs.values() if j.state.holds_resources
    }
    in_use = sorted(set().union(*(state.usage(n).jobs for n in state.nodes)))
    assert [j.job_id for j in state.active_jobs()] == in_use
    prio = {j.job_id: 7 + j.job_id for j in eligible[::2]}  # a multifactor override on some jobs
    fresh = build_snapshot(state, now, eligible=eligible, priorities=prio)
    incremental = snapshot(state, now, eligible=eligible, priorities=prio)
    assert incremental.nodes == fresh.nodes
    assert sorted(incremental.running, key=lambda r: r.job_id) == sorted(
        fresh.running, key=lambda r: r.job_id
    )
    assert incremental.partitions == fresh.partitions
    assert incremental.pending == fresh.pending


def _step(log: Log, rng: random.Random, action: str, now: float) -> Log:
    state = log.state
    jobs = list(state.jobs.values())
    if action == "submit":
        log(
            c.SubmitJob(
                spec(
                    cpus_per_task=rng.choice([1, 2, 4]),
                    num_nodes=rng.choice([1, 1, 2]),
                    exclusive=rng.random() < 0.1,
                    hold=rng.random() < 0.1,
                    partition=rng.choice(["", "", "small"]) if "small" in state.partitions else "",
                    time_limit_secs=rng.choice([0, 60, 3600]),
                ),
                "alice",
                1000,
                1000,
                "alice",
                now,
            )
        )
    elif action == "submit_array":
        log(c.SubmitJob(spec(array=f"0-{rng.randint(1, 5)}%2"), "alice", 1000, 1000, "alice", now))
    elif action == "start":
        pending = [j for j in jobs if j.state is JobState.PENDING and j.priority]
        if pending and state.nodes:
            job = rng.choice(pending)
            names = rng.sample(sorted(state.nodes), min(len(state.nodes), job.spec.num_nodes))
            alloc = [NodeAllocation(n, job.spec.cpus_per_task, 100, [], 1) for n in names]
            log(c.StartJob(job.job_id, alloc, now, 1))
    elif action == "exit":
        running = [j for j in jobs if j.state.holds_resources]
        if running:
            job = rng.choice(running)
            for a in job.allocation:
                log(c.JobExited(job.job_id, a.node, rng.choice([0, 1]), 0, now))
    elif action == "cancel":
        live = [j for j in jobs if not j.state.is_terminal]
        if live:
            log(c.CancelJob(rng.choice(live).job_id, 0, now))
    elif action == "update":
        if jobs:
            job = rng.choice(jobs)
            kind = rng.choice(["limit", "hold", "release", "requeue", "partition"])
            if kind == "limit":
                log(c.UpdateJob(job.job_id, 0, now, time_limit_secs=rng.choice([120, 7200])))
            elif kind == "partition":
                log(c.UpdateJob(job.job_id, 0, now, partition=rng.choice(sorted(state.partitions))))
            else:
                log(c.UpdateJob(job.job_id, 0, now, action=kind))
    elif action == "register":
        register(log, rng.choice(NODES), cpus=rng.choice([2, 4, 8]), gpus=rng.choice([0, 0, 2]))
    elif action == "node_admin" and state.nodes:
        name = rng.choice(sorted(state.nodes))
        verb = rng.choice(["DRAIN", "DOWN", "RESUME", "UNDRAIN"])
        log(c.UpdateNode([name], verb, "test", now))
    elif action == "node_lost" and state.nodes:
        log(c.NodeLost([rng.choice(sorted(state.nodes))], "Not responding", now))
    elif action == "remove" and state.nodes:
        log(c.RemoveNode([rng.choice(sorted(state.nodes))], now))
    elif action == "partitions":
        small = ",".join(rng.sample(NODES, 2))
        log(
            c.ConfigurePartitions(
                [
                    Partition("default", is_default=True),
                    Partition(
                        "small",
                        nodes_expr=small,
                        state=rng.choice([PartitionState.UP, PartitionState.DOWN]),
                    ),
                ]
            )
        )
    elif action == "check":
        assert_views_match(state, now)
    elif action == "restore":
        fresh = Log()
        fresh.state.restore(state.snapshot())
        fresh.entries = list(log.entries)
        return fresh
    return log


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.lists(st.sampled_from(ACTIONS), min_size=5, max_size=60))
def test_incremental_views_equal_a_fresh_build(seed: int, actions: list[str]) -> None:
    rng = random.Random(seed)
    log = Log()
    for name in NODES[:3]:
        register(log, name)
    now = 100.0
    for action in actions:
        now += 1.0
        log = _step(log, rng, action, now)
    assert_views_match(log.state, now)


def test_unknown_command_marks_every_view_stale() -> None:
    """A command type the index does not know cannot leave a stale view behind."""
    log = Log()
    register(log, "n1")
    state = log.state
    snapshot(state, 1.0, eligible=[])
    state.nodes["n1"].drain = True  # a change the index was not told about...
    state.sched_index.after_command(state, object())  # ...by a command it does not know
    assert snapshot(state, 1.0, eligible=[]).nodes == build_snapshot(state, 1.0, eligible=[]).nodes


def test_views_recover_after_too_many_unconsumed_marks() -> None:
    """Past ``MAX_MARKS`` (a follower that never plans) the index gives up on precision, not on
    correctness: the next pass rebuilds every view, even the running views of jobs now gone."""
    log = Log()
    register(log, "n1", cpus=4)
    job_id = log(c.SubmitJob(spec(), "alice", 1000, 1000, "alice", 1.0))
    log(c.StartJob(job_id, [NodeAllocation("n1", 1, 100, [], 1)], 2.0, 1))
    state = log.state
    assert len(snapshot(state, 3.0, eligible=[]).running) == 1
    state.sched_index.MAX_MARKS = 1  # type: ignore[misc]
    log(c.JobExited(job_id, "n1", 0, 0, 4.0))
    other = log(c.SubmitJob(spec(), "alice", 1000, 1000, "alice", 5.0))
    log(c.StartJob(other, [NodeAllocation("n1", 1, 100, [], 1)], 6.0, 1))
    log(c.JobExited(other, "n1", 0, 0, 7.0))
    assert_views_match(state, 8.0)
    assert snapshot(state, 8.0, eligible=[]).running == ()
