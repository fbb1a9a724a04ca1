"""The scheduler's incrementally maintained views equal a from-scratch build after any command sequence.

Random sequences of submits (plain, arrays with a %N throttle, held), starts, exits, cancels, job
updates (time limit, hold/release, requeue), node registrations, drains, losses, removals and
partition changes go through the state machine exactly as Raft applies them; at random points the
incremental ``snapshot`` must equal ``build_snapshot`` (and the pending/holding indices the jobs'
states), including across a Raft snapshot/restore.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from state_helpers import Log, register, spec

from spur.core.job import JobState, Node, NodeAllocation, Partition, PartitionState
from spur.core.scheduling import NodeLayout, SchedSnapshot
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
    "grant_refresh",
    "check",
    "restore",
]
# Actions whose commands may change the nodes' layout (their names, sizes, partitions, usability).
LAYOUT_ACTIONS = frozenset({"register", "node_admin", "node_lost", "remove", "partitions"})


def assert_free_nodes_match(state: ClusterState) -> None:
    """After a refresh alone (no views built), the index walks exactly the available nodes with a
    free CPU, in natural name order, and its partition views are a fresh build's."""
    index = state.sched_index
    index.refresh(state)
    fresh = build_snapshot(state, 0.0, eligible=[])
    assert list(index.free_in_order()) == [v for v in fresh.nodes if v.available and v.cpus_free > 0]
    assert index.partition_views == fresh.partitions
    assert index.node_count() == len(fresh.nodes)


def assert_views_match(state: ClusterState, now: float) -> tuple[object, int, NodeLayout]:
    """The incremental views equal a fresh build; returns (the layout's fingerprint, the index's
    layout version, the snapshot's layout) for the caller to compare with the previous check."""
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
    assert_free_nodes_match(state)
    assert incremental.nodes == fresh.nodes
    assert sorted(incremental.running, key=lambda r: r.job_id) == sorted(
        fresh.running, key=lambda r: r.job_id
    )
    assert incremental.partitions == fresh.partitions
    assert incremental.pending == fresh.pending
    # The layout the index keeps is the one the snapshot's views would give.
    layout = incremental.layout
    assert layout is not None and layout.version == state.sched_index.layout_version
    expected = NodeLayout.build(fresh.nodes, fresh.partitions)
    for name in ("names", "index", "members", "up", "configured"):
        assert getattr(layout, name) == getattr(expected, name), name
    # Running views by node: exactly the running views, under each node they hold.
    by_node: dict[str, set[int]] = {}
    for run in fresh.running:
        for a in run.allocation:
            by_node.setdefault(a.node, set()).add(run.job_id)
    assert incremental.node_running is not None
    assert {n: {r.job_id for r in runs} for n, runs in incremental.node_running.items()} == by_node
    assert all(r in incremental.running for runs in incremental.node_running.values() for r in runs)
    # The uncopied view the immediate grant reads says the same, and cannot be written through.
    now_view = state.sched_index.running_by_node_now()
    assert dict(now_view) == dict(incremental.node_running)
    with pytest.raises(TypeError):
        now_view["n1"] = ()  # type: ignore[index]
    per_array: dict[int, int] = {}
    for job in state.jobs.values():
        if job.state.holds_resources and job.array_job_id:
            per_array[job.array_job_id] = per_array.get(job.array_job_id, 0) + 1
    assert state.sched_index.array_running == per_array
    # Everything of the views but free resources and job counts (written out, not ``layout_fields``,
    # so that a field left out there fails here).
    shape = [
        (v.name, v.cpus_total, v.mem_total_mb, v.gpus_total, v.gpu_models, v.partitions, v.features, v.available)
        for v in fresh.nodes
    ]
    fingerprint = (shape, fresh.partitions)
    return fingerprint, state.sched_index.layout_version, layout


def _step(log: Log, rng: random.Random, action: str, now: float) -> Log:
    state = log.state
    if action in LAYOUT_ACTIONS:
        log.layout_touched = True  # type: ignore[attr-defined]
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
    elif action == "grant_refresh":
        assert_free_nodes_match(state)  # what an immediate grant reads between passes
    elif action == "check":
        found = assert_views_match(state, now)
        previous = getattr(log, "last_check", None)
        if previous is not None:
            # A changed shape always gets a new version. With no command since the last pass that
            # could change it, the version stays and the pass gets the very same layout object,
            # its caches included. (A shape changed and changed back, a drain then an undrain, may
            # get a new version: a rebuild, never a stale layout.)
            same_shape = previous[0] == found[0]
            if not same_shape:
                assert found[1] > previous[1]
            elif not getattr(log, "layout_touched", False):
                assert found[1] == previous[1]
            assert (found[2] is previous[2]) == (found[1] == previous[1])
            assert found[1] >= previous[1]
        log.last_check = found  # type: ignore[attr-defined]
        log.layout_touched = False  # type: ignore[attr-defined]
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


def _pass(state: ClusterState, now: float = 10.0) -> SchedSnapshot:
    """The snapshot a scheduler pass would plan from, every pending job included."""
    eligible, _ = eligible_jobs(state, now)
    return snapshot(state, now, eligible=eligible)


def test_layout_version_changes_with_each_kind_of_shape_change_and_the_next_pass_sees_it() -> None:
    from spur_sched_backfill import plan

    log = Log()
    for name in ("n1", "n2", "n10"):
        register(log, name, cpus=2)
    state = log.state
    first = _pass(state)
    assert first.layout is not None and first.layout.names == ("n1", "n2", "n10")  # natural order
    version = state.sched_index.layout_version

    def changed(cmd: object) -> SchedSnapshot:
        nonlocal version
        log(cmd)
        snap = _pass(state)
        assert state.sched_index.layout_version == version + 1, type(cmd).__name__
        assert snap.layout is not None and snap.layout.version == version + 1
        version += 1
        return snap

    snap = changed(c.RegisterNode(Node("n3", "127.0.0.1", cpus=2, memory_mb=8000), 50.0))
    assert "n3" in snap.layout.names  # type: ignore[union-attr]
    snap = changed(c.RegisterNode(Node("n3", "127.0.0.1", cpus=4, memory_mb=8000), 51.0))
    assert snap.nodes[snap.layout.index["n3"]].cpus_total == 4  # type: ignore[union-attr]
    snap = changed(c.RegisterNode(Node("n3", "127.0.0.1", cpus=4, memory_mb=8000, features=["ib"]), 52.0))
    assert snap.nodes[snap.layout.index["n3"]].features == ("ib",)  # type: ignore[union-attr]
    job = log(c.SubmitJob(spec(constraint=["ib"]), "alice", 1000, 1000, "alice", 53.0))
    assert [a.node for a in plan(_pass(state)).assignments[0].allocation] == ["n3"]
    snap = changed(c.UpdateNode(["n3"], "DRAIN", "test", 54.0))
    assert plan(snap).assignments == []  # the next pass no longer places on the drained node
    snap = changed(c.UpdateNode(["n3"], "RESUME", "", 55.0))
    assert [a.node for a in plan(snap).assignments[0].allocation] == ["n3"]
    log(c.CancelJob(job, 0, 56.0))
    snap = changed(c.NodeLost(["n2"], "Not responding", 57.0))
    assert not snap.nodes[snap.layout.index["n2"]].available  # type: ignore[union-attr]
    snap = changed(c.NodeReturned("n2", 58.0))
    assert snap.nodes[snap.layout.index["n2"]].available  # type: ignore[union-attr]
    snap = changed(c.ConfigurePartitions([Partition("default", is_default=True), Partition("small", nodes_expr="n1,n2")]))
    assert snap.layout.members["small"] == {0, 1}  # type: ignore[union-attr]
    snap = changed(c.ConfigurePartitions([Partition("default", is_default=True), Partition("small", nodes_expr="n1,n2", state=PartitionState.DOWN)]))
    assert snap.layout.up["small"] is False  # type: ignore[union-attr]
    snap = changed(c.RemoveNode(["n10"], 59.0))
    assert "n10" not in snap.layout.names  # type: ignore[union-attr]
    snap = changed(c.ForgetNode("n3", 60.0))
    assert snap.layout.names == ("n1", "n2")  # type: ignore[union-attr]


def test_layout_is_kept_while_only_jobs_change_and_passes_still_see_the_jobs() -> None:
    from spur_sched_backfill import plan

    log = Log()
    register(log, "n1", cpus=2)
    register(log, "n2", cpus=2)
    log(c.ConfigurePartitions([Partition("default", is_default=True)]))
    state = log.state
    first = _pass(state)
    layout, version = first.layout, state.sched_index.layout_version
    a = log(c.SubmitJob(spec(cpus_per_task=2), "alice", 1000, 1000, "alice", 1.0))
    b = log(c.SubmitJob(spec(cpus_per_task=2), "alice", 1000, 1000, "alice", 2.0))
    extra = log(c.SubmitJob(spec(cpus_per_task=2), "alice", 1000, 1000, "alice", 3.0))
    snap = _pass(state)
    planned = plan(snap)
    assert [x.job_id for x in planned.assignments] == [a, b]
    assert layout is not None and any(layout.cache.values())  # the planner kept its derivations
    for x in planned.assignments:
        log(c.StartJob(x.job_id, list(x.allocation), 4.0, 1))
    log(c.SetPendingReasons(planned.reasons and {str(k): v for k, v in planned.reasons.items()}))
    log(c.ConfigurePartitions([Partition("default", is_default=True)]))  # the same configuration again
    snap = _pass(state)
    assert snap.layout is layout and state.sched_index.layout_version == version  # nothing rebuilt
    assert {n: [r.job_id for r in runs] for n, runs in (snap.node_running or {}).items()} == {"n1": [a], "n2": [b]}
    assert plan(snap).assignments == []  # both nodes are full: the running jobs are seen
    log(c.JobExited(a, "n1", 0, 0, 5.0))
    snap = _pass(state)
    assert snap.layout is layout
    assert [(x.job_id, x.allocation[0].node) for x in plan(snap).assignments] == [(extra, "n1")]


def test_layout_version_goes_on_across_a_restore() -> None:
    """A restore rebuilds every view; the new layout gets a new version, never an old one's."""
    log = Log()
    register(log, "n1")
    state = log.state
    layout = _pass(state).layout
    version = state.sched_index.layout_version
    state.restore(state.snapshot())
    snap = _pass(state)
    assert state.sched_index.layout_version == version + 1 and snap.layout is not layout


# Every NodeView field, each set away from its default: the hot paths build views positionally
# (spur.state.sched_index.node_view, spur.state.immediate.Taken.from_view), so a field added to
# NodeView must fail here until they pass it too.
FULL_VIEW = dict(
    name="n7", cpus_total=8, cpus_free=3, mem_total_mb=9000, mem_free_mb=4000, gpus_free=(1,), gpus_total=2,
    gpu_models=("a100", "a100"), partitions=("batch",), features=("ib",), available=False, running_jobs=2,
)  # fmt: skip


def test_node_views_built_positionally_name_every_field() -> None:
    from dataclasses import fields

    from spur.core.scheduling import NodeView
    from spur.state.immediate import Taken

    assert [f.name for f in fields(NodeView)] == list(FULL_VIEW)
    view = NodeView(**FULL_VIEW)  # type: ignore[arg-type]
    assert Taken().from_view(view) == view


def test_node_view_of_a_node_without_gpus_matches_one_with_them() -> None:
    from spur.core.scheduling import NodeView
    from spur.state.sched_index import node_view

    log = Log()
    log(c.ConfigurePartitions([Partition("default", is_default=True)]))
    register(log, "n1", cpus=4, mem=8000)
    register(log, "n2", cpus=4, mem=8000, gpus=2)
    log.state.nodes["n1"].features = ["ib"]
    log(c.SubmitJob(spec(cpus_per_task=3), "alice", 1000, 1000, "alice", 100.0, [NodeAllocation("n1", 3, 1000, [], 1)]))
    assert node_view(log.state, "n1", ("batch",)) == NodeView(
        "n1", 4, 1, 8000, 7000, partitions=("batch",), features=("ib",), running_jobs=1
    )
    log(c.SubmitJob(spec(cpus_per_task=3), "alice", 1000, 1000, "alice", 100.0, [NodeAllocation("n2", 3, 8000, [0], 1)]))
    assert node_view(log.state, "n2", ()) == NodeView(
        "n2", 4, 1, 8000, 0, gpus_free=(1,), gpus_total=2, gpu_models=("a100", "a100"), running_jobs=1
    )


def test_the_partition_alone_is_kept_until_the_partitions_change() -> None:
    log = Log()
    log(c.ConfigurePartitions([Partition("batch", nodes_expr="n1")]))
    register(log, "n1")
    index = log.state.sched_index
    index.refresh(log.state)
    alone = index.partition_alone("batch")
    assert [(p.name, p.nodes, p.up) for p in alone] == [("batch", (), True)]
    assert index.partition_alone("batch") is alone
    assert index.partition_alone("nope") == ()
    log(c.ConfigurePartitions([Partition("batch", nodes_expr="n1", state=PartitionState.DOWN)]))
    index.refresh(log.state)
    assert [(p.name, p.up) for p in index.partition_alone("batch")] == [("batch", False)]
