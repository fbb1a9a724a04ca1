"""The backfill plugin's first fit gives the planner's ``place_now`` answer for every simple job."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spur_sched_backfill import BackfillOptions, BackfillPlanner
from spur_sched_backfill.first_fit import PLANNER, first_fit_now, is_simple
from spur_sched_backfill.planner import place_now

from spur.core.job import NodeAllocation
from spur.core.scheduling import (
    NodeLayout,
    NodeView,
    PartitionView,
    PendingView,
    RunningView,
    SchedSnapshot,
    natural_key,
)

NOW = 1000.0
NAMES = [f"n{i}" for i in range(1, 13)]
PARTS = ["batch", "gpu", "down"]
FEATURES = ["ib", "ssd"]


@st.composite
def nodes(draw: st.DrawFn) -> list[NodeView]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=0, max_size=10, unique=True))
    out = []
    for name in names:
        cpus = draw(st.integers(1, 8))
        mem = draw(st.sampled_from([1000, 4000, 16000]))
        # Mostly consistent views; sometimes more free than in all (an inconsistent snapshot).
        cpus_free = draw(st.integers(-1, cpus + 1))
        mem_free = draw(st.sampled_from([0, 500, mem // 2, mem, mem + 1000]))
        out.append(
            NodeView(
                name=name,
                cpus_total=cpus,
                cpus_free=cpus_free,
                mem_total_mb=mem,
                mem_free_mb=mem_free,
                partitions=tuple(draw(st.lists(st.sampled_from(PARTS), max_size=2, unique=True))),
                features=tuple(draw(st.lists(st.sampled_from(FEATURES), max_size=2, unique=True))),
                available=draw(st.booleans()) or draw(st.booleans()),
                running_jobs=draw(st.integers(0, 2)),
            )
        )
    return out


@st.composite
def snapshots(draw: st.DrawFn) -> SchedSnapshot:
    views = draw(nodes())
    names = [v.name for v in views]
    partitions = tuple(
        PartitionView(
            name,
            tuple(draw(st.lists(st.sampled_from(names or ["n99"]), max_size=4, unique=True))),
            up=name != "down" or draw(st.booleans()),
        )
        for name in draw(st.lists(st.sampled_from(PARTS), max_size=3, unique=True))
    )
    running = []
    for job_id in range(1, draw(st.integers(0, 5)) + 1):
        on = draw(st.lists(st.sampled_from(names or ["n99"]), min_size=1, max_size=2, unique=True))
        end = draw(st.sampled_from([NOW - 5, NOW + 10, NOW + 5000, math.inf]))
        allocs = tuple(
            NodeAllocation(n, draw(st.integers(1, 4)), draw(st.sampled_from([0, 2000]))) for n in on
        )
        running.append(RunningView(job_id, end, allocs, exclusive=draw(st.integers(0, 3)) == 0))
    snapshot = SchedSnapshot(
        now=NOW, pending=(), nodes=tuple(views), running=tuple(running), partitions=partitions
    )
    if draw(st.booleans()):  # as the controller hands it over: in order, with its layout and runs by node
        ordered = tuple(sorted(views, key=lambda v: natural_key(v.name)))
        by_node: dict[str, list[RunningView]] = {}
        for run in running:
            for name in dict.fromkeys(a.node for a in run.allocation):
                by_node.setdefault(name, []).append(run)
        snapshot = replace(
            snapshot,
            nodes=ordered,
            layout=NodeLayout.build(ordered, partitions),
            node_running={n: tuple(r) for n, r in by_node.items()},
        )
    return snapshot


@st.composite
def simple_jobs(draw: st.DrawFn) -> PendingView:
    return PendingView(
        job_id=99,
        priority=1,
        submit_time=NOW,
        partition=draw(st.sampled_from(["", *PARTS, "nope"])),
        num_nodes=draw(st.sampled_from([0, 1])),
        num_tasks=draw(st.integers(0, 4)),
        cpus_per_task=draw(st.integers(0, 3)),
        ntasks_per_node=draw(st.sampled_from([0, 0, 2])),
        mem_per_node_mb=draw(st.sampled_from([0, 0, 800, 5000])),
        mem_per_cpu_mb=draw(st.sampled_from([0, 0, 300])),
        time_limit_secs=draw(st.sampled_from([-1, 0, 5, 60, 100_000])),
        exclude=tuple(draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True))),
        features=tuple(draw(st.lists(st.sampled_from(FEATURES), max_size=2, unique=True))),
        gpu_type=draw(st.sampled_from(["", "a100"])),
    )


def planner_answer(snapshot: SchedSnapshot, job: PendingView) -> tuple[NodeAllocation, ...] | None:
    return BackfillPlanner(snapshot, BackfillOptions()).place_now(job)


@settings(max_examples=600, deadline=None)
@given(snapshots(), simple_jobs())
def test_the_first_fit_answers_as_the_planner_does(snapshot: SchedSnapshot, job: PendingView) -> None:
    assert is_simple(job)
    found = first_fit_now(snapshot, job)
    if found is not PLANNER:
        assert found == planner_answer(snapshot, job)
    assert place_now(snapshot, job) == planner_answer(snapshot, job)


@settings(max_examples=200, deadline=None)
@given(
    snapshots(),
    simple_jobs(),
    st.sampled_from(
        [
            {"num_nodes": 2},
            {"nodelist": ("n1",)},
            {"exclusive": True},
            {"gpus_per_node": 1},
            {"gpus_total": 1},
        ]
    ),
)
def test_any_other_job_is_left_to_the_planner(
    snapshot: SchedSnapshot, job: PendingView, change: dict
) -> None:
    other = replace(job, **change)
    assert not is_simple(other)
    assert first_fit_now(snapshot, other) is PLANNER
    assert place_now(snapshot, other) == planner_answer(snapshot, other)


def view(name: str, cpus: int = 4, free: int = 4, **kw: object) -> NodeView:
    kw.setdefault("partitions", ("batch",))
    return NodeView(name=name, cpus_total=cpus, cpus_free=free, mem_total_mb=8000, mem_free_mb=8000, **kw)  # type: ignore[arg-type]


def test_a_simple_job_takes_the_first_node_in_name_order_with_room_now() -> None:
    snapshot = SchedSnapshot(
        now=NOW,
        pending=(),
        nodes=(view("n10"), view("n2", free=1), view("n9", free=2)),
        partitions=(PartitionView("batch", ()),),
    )
    job = PendingView(
        job_id=1, priority=1, submit_time=NOW, partition="batch", num_tasks=2, mem_per_cpu_mb=100
    )
    found = first_fit_now(snapshot, job)
    assert found == (NodeAllocation("n9", cpus=2, mem_mb=200, gpus=[], tasks=2),)
    assert found == planner_answer(snapshot, job)


@pytest.mark.parametrize(
    "nodes_, running, why",
    [
        ((view("n1", available=False),), (), "an unavailable node"),
        ((view("n1", partitions=("other",)),), (), "a node of another partition"),
        (
            (view("n1"),),
            (RunningView(5, NOW + 10, (NodeAllocation("n1", 1),), exclusive=True),),
            "an exclusive job",
        ),
    ],
)
def test_nodes_a_job_may_not_use_are_passed_over(
    nodes_: tuple[NodeView, ...], running: tuple[RunningView, ...], why: str
) -> None:
    snapshot = SchedSnapshot(now=NOW, pending=(), nodes=(*nodes_, view("n2")), running=running)
    job = PendingView(job_id=1, priority=1, submit_time=NOW, partition="batch")
    found = first_fit_now(snapshot, job)
    assert found is not PLANNER and [a.node for a in found or ()] == ["n2"], why
    assert found == planner_answer(snapshot, job)


def test_a_node_with_more_free_than_it_has_is_left_to_the_planner() -> None:
    snapshot = SchedSnapshot(now=NOW, pending=(), nodes=(view("n1", cpus=2, free=4),))
    job = PendingView(job_id=1, priority=1, submit_time=NOW, partition="batch", num_tasks=3)
    assert first_fit_now(snapshot, job) is PLANNER


def test_a_down_partition_places_nothing() -> None:
    snapshot = SchedSnapshot(
        now=NOW,
        pending=(),
        nodes=(view("n1", partitions=("batch",)),),
        partitions=(PartitionView("batch", (), up=False),),
    )
    job = PendingView(job_id=1, priority=1, submit_time=NOW, partition="batch")
    assert planner_answer(snapshot, job) is None
    assert first_fit_now(snapshot, job) is None


def test_requests_are_shared_per_shape_and_equal_a_fresh_normalisation() -> None:
    from spur_sched_backfill.request import Request

    job = PendingView(job_id=1, priority=5, submit_time=NOW, partition="batch", num_tasks=3, mem_per_cpu_mb=100)
    same_shape = replace(job, job_id=2, priority=9, submit_time=NOW + 1, partition="gpu")
    other = replace(job, num_tasks=4)
    assert Request.of(job) is Request.of(same_shape)  # nothing of a request depends on who asks
    assert Request.of(other) is not Request.of(job)
    assert (Request.of(other).need_c, Request.of(other).need_m) == (4, 400)
    fresh = Request._build(1, 0, 1, 0, 3, 0, 100, 0, 0, "", False, -1)
    assert Request.of(job) == fresh and (fresh.n, fresh.tpn, fresh.need_c, fresh.need_m) == (1, 3, 3, 300)
    assert Request.of(replace(job, time_limit_secs=60)).duration == 60.0
    assert Request.of(replace(job, gpu_type="A100", gpus_per_node=1)).gpu_type == "a100"
