"""The conservative backfill scheduler plugin (distribution spur-sched-backfill)."""

from __future__ import annotations

import copy
import math
import random

import pytest
from spur_sched_backfill import BackfillOptionError, BackfillOptions, BackfillPlanner, plan
from spur_sched_backfill.profile import NodeProfile

from spur.core.job import NodeAllocation
from spur.core.scheduling import NodeView, PartitionView, PendingView, Plan, RunningView, SchedSnapshot
from spur.plugins import PluginNotFound, load_plugin_manager

NOW = 1000.0


def node(name: str, cpus: int = 8, mem: int = 16_000, **kw) -> NodeView:
    kw.setdefault("partitions", ("batch",))
    kw.setdefault("cpus_free", cpus)
    kw.setdefault("mem_free_mb", mem)
    return NodeView(name=name, cpus_total=cpus, mem_total_mb=mem, **kw)


def gpu_node(name: str, models: tuple[str, ...], free: tuple[int, ...] | None = None, **kw) -> NodeView:
    free = tuple(range(len(models))) if free is None else free
    return node(name, gpus_total=len(models), gpu_models=models, gpus_free=free, **kw)


def job(job_id: int, **kw) -> PendingView:
    kw.setdefault("priority", 100)
    kw.setdefault("submit_time", float(job_id))
    kw.setdefault("partition", "batch")
    kw.setdefault("time_limit_secs", 3600)
    return PendingView(job_id=job_id, **kw)


def running(job_id: int, end: float, *allocs: NodeAllocation, exclusive: bool = False) -> RunningView:
    return RunningView(job_id=job_id, end_time=end, allocation=tuple(allocs), exclusive=exclusive)


def snap(nodes, pending, running_jobs=(), partitions=None, max_job_test=0) -> SchedSnapshot:
    if partitions is None:
        partitions = (PartitionView("batch", tuple(n.name for n in nodes)),)
    return SchedSnapshot(
        now=NOW,
        pending=tuple(pending),
        nodes=tuple(nodes),
        running=tuple(running_jobs),
        partitions=tuple(partitions),
        max_job_test=max_job_test,
    )


def started(result: Plan) -> dict[int, tuple[NodeAllocation, ...]]:
    return {a.job_id: a.allocation for a in result.assignments}


def nodes_of(result: Plan, job_id: int) -> list[str]:
    return [a.node for a in started(result)[job_id]]


# ----- ordering --------------------------------------------------------------------------------


def test_higher_priority_then_earlier_submit_then_lower_id_wins_the_only_node():
    nodes = [node("a")]
    whole = dict(cpus_per_task=8)
    pending = [
        job(5, priority=10, submit_time=1.0, **whole),
        job(4, priority=50, submit_time=9.0, **whole),
        job(3, priority=50, submit_time=2.0, **whole),
        job(2, priority=50, submit_time=2.0, **whole),
    ]
    result = plan(snap(nodes, pending), {})
    assert list(started(result)) == [2]
    assert result.reasons == {3: "Resources", 4: "Priority", 5: "Priority"}
    assert result.jobs_tested == 4


# ----- fitting on one node ---------------------------------------------------------------------


def test_allocation_records_cpus_memory_and_tasks():
    result = plan(snap([node("a")], [job(1, num_tasks=3, cpus_per_task=2, mem_per_cpu_mb=1000)]), {})
    assert started(result)[1] == (NodeAllocation("a", cpus=6, mem_mb=6000, gpus=[], tasks=3),)


def test_jobs_pack_onto_free_cpus_and_memory_only():
    nodes = [node("a", cpus_free=3, mem_free_mb=4000)]
    pending = [job(1, cpus_per_task=2), job(2, cpus_per_task=2), job(3, mem_per_node_mb=5000)]
    result = plan(snap(nodes, pending), {})
    assert list(started(result)) == [1]
    assert result.reasons == {2: "Resources", 3: "Priority"}


def test_request_larger_than_any_node_is_bad_constraints_and_does_not_block_others():
    pending = [job(1, priority=9, cpus_per_task=9), job(2, priority=8, mem_per_node_mb=20_000), job(3)]
    result = plan(snap([node("a")], pending), {})
    assert result.reasons == {1: "BadConstraints", 2: "BadConstraints"}
    assert nodes_of(result, 3) == ["a"]


def test_gpus_of_the_requested_model_are_picked_from_free_indices():
    nodes = [gpu_node("g1", ("a100", "a100", "h100", "h100"), free=(0, 1, 3))]
    pending = [
        job(1, priority=9, gpus_per_node=1, gpu_type="H100"),
        job(2, priority=8, gpus_per_node=2),
        job(3, priority=7, gpus_per_node=1, gpu_type="h100"),
        job(4, priority=6, gpus_per_node=1, gpu_type="v100"),
    ]
    result = plan(snap(nodes, pending), {})
    assert started(result)[1][0].gpus == [3]
    assert started(result)[2][0].gpus == [0, 1]
    assert result.reasons == {3: "Resources", 4: "BadConstraints"}


def test_gpus_total_is_spread_over_the_allocated_nodes():
    nodes = [gpu_node(f"g{k}", ("a100",) * 4) for k in (1, 2)]
    result = plan(snap(nodes, [job(1, num_nodes=2, gpus_total=3)]), {})
    assert [len(a.gpus) for a in started(result)[1]] == [2, 1]


# ----- exclusivity -----------------------------------------------------------------------------


def test_exclusive_job_takes_a_whole_idle_node_and_nothing_shares_it():
    nodes = [
        gpu_node("a", ("a100", "a100"), cpus_free=7, running_jobs=1, free=(1,)),
        gpu_node("b", ("a100", "a100")),
    ]
    pending = [job(1, priority=9, exclusive=True), job(2, priority=8)]
    result = plan(snap(nodes, pending), {})
    assert started(result)[1] == (NodeAllocation("b", cpus=8, mem_mb=16_000, gpus=[0, 1], tasks=1),)
    assert nodes_of(result, 2) == ["a"]


def test_node_of_a_running_exclusive_job_is_full_until_it_ends():
    nodes = [node("a", running_jobs=1), node("b", cpus_free=0, running_jobs=1)]
    # Job 10 is exclusive on a although its allocation lists only 1 CPU.
    run = [
        running(10, NOW + 500, NodeAllocation("a", 1), exclusive=True),
        running(11, NOW + 500, NodeAllocation("b", 8)),
    ]
    result = plan(snap(nodes, [job(1)], run), {})
    assert result.assignments == []
    assert result.reasons == {1: "Resources"}


# ----- multi-node ------------------------------------------------------------------------------


def test_multi_node_job_gets_distinct_nodes_in_name_order():
    nodes = [node(n) for n in ("n10", "n2", "n1", "n3")]
    result = plan(snap(nodes, [job(1, num_nodes=3, ntasks_per_node=2)]), {})
    assert [(a.node, a.tasks, a.cpus) for a in started(result)[1]] == [
        ("n1", 2, 2),
        ("n2", 2, 2),
        ("n3", 2, 2),
    ]


def test_tasks_fill_nodes_in_block_order_with_at_least_one_each():
    result = plan(snap([node("a"), node("b")], [job(1, num_nodes=2, num_tasks=10)]), {})
    assert [(a.node, a.tasks) for a in started(result)[1]] == [("a", 8), ("b", 2)]


def test_more_nodes_than_the_partition_has_is_partition_node_limit():
    result = plan(snap([node("a"), node("b")], [job(1, num_nodes=3)]), {})
    assert result.reasons == {1: "PartitionNodeLimit"}


def test_a_partition_whose_nodes_have_not_registered_yet_waits_for_nodes():
    # A controller that has just started knows no node yet: the job is not "too big for the partition".
    result = plan(snap([], [job(1)]), {})
    assert result.reasons == {1: "ReqNodeNotAvail"}


# ----- backfill --------------------------------------------------------------------------------


def _busy_until_100():
    """Node a is full until NOW+100; node b is idle. Job 1 needs both nodes, so it waits for a."""
    nodes = [node("a", cpus_free=0, mem_free_mb=0, running_jobs=1), node("b")]
    run = [running(50, NOW + 100, NodeAllocation("a", 8, 16_000))]
    return nodes, run, job(1, priority=100, num_nodes=2, cpus_per_task=8)


def test_short_job_backfills_ahead_of_a_blocked_big_job():
    nodes, run, big = _busy_until_100()
    result = plan(snap(nodes, [big, job(2, priority=1, time_limit_secs=100)], run), {})
    assert nodes_of(result, 2) == ["b"]
    assert result.reasons == {1: "Resources"}


def test_job_that_would_delay_the_reservation_is_not_backfilled():
    nodes, run, big = _busy_until_100()
    pending = [big, job(2, priority=1, time_limit_secs=101), job(3, priority=1, time_limit_secs=-1)]
    result = plan(snap(nodes, pending, run), {})
    assert result.assignments == []
    assert result.reasons == {1: "Resources", 2: "Priority", 3: "Priority"}


def test_backfill_uses_resources_the_reservation_leaves_free():
    nodes, run, _ = _busy_until_100()
    big = job(1, priority=100, num_nodes=2, cpus_per_task=6)  # leaves 2 CPUs per node
    pending = [big, job(2, priority=1, cpus_per_task=2, time_limit_secs=-1)]
    result = plan(snap(nodes, pending, run), {})
    assert nodes_of(result, 2) == ["b"]


def test_every_blocked_job_keeps_its_reservation():
    # a frees at +100, b at +300, c is idle. Job 1 (three nodes) reserves all of them from +300;
    # job 2 (two nodes, 100 s) then reserves a and c over [+100, +200). Job 3 (250 s) would hold
    # c into job 2's window; job 4 (100 s) ends on c exactly when job 2 begins, so it may start.
    nodes = [node("a", cpus_free=0, running_jobs=1), node("b", cpus_free=0, running_jobs=1), node("c")]
    run = [running(50, NOW + 100, NodeAllocation("a", 8)), running(51, NOW + 300, NodeAllocation("b", 8))]
    pending = [
        job(1, priority=9, num_nodes=3, cpus_per_task=8),
        job(2, priority=8, num_nodes=2, cpus_per_task=8, time_limit_secs=100),
        job(3, priority=7, cpus_per_task=8, time_limit_secs=250),
        job(4, priority=6, cpus_per_task=8, time_limit_secs=100),
    ]
    result = plan(snap(nodes, pending, run), {})
    assert nodes_of(result, 4) == ["c"]
    assert result.reasons == {1: "Resources", 2: "Priority", 3: "Priority"}


def test_reservation_depth_caps_which_blocked_jobs_hold_resources():
    nodes, run, big = _busy_until_100()
    pending = [big, job(2, priority=1, time_limit_secs=-1)]
    result = plan(snap(nodes, pending, run), {"reservation_depth": 0})
    assert nodes_of(result, 2) == ["b"]


def test_resources_held_forever_give_no_reservation_so_others_may_use_the_rest():
    nodes = [node("a", cpus_free=0, running_jobs=1), node("b")]
    run = [running(50, math.inf, NodeAllocation("a", 8))]
    pending = [job(1, priority=9, num_nodes=2), job(2, priority=1, time_limit_secs=-1)]
    result = plan(snap(nodes, pending, run), {})
    assert nodes_of(result, 2) == ["b"]
    assert result.reasons == {1: "Resources"}


def test_gpu_reservation_is_respected_by_backfill():
    nodes = [gpu_node("g", ("a100",) * 2, free=(1,), cpus_free=6, running_jobs=1)]
    run = [running(50, NOW + 100, NodeAllocation("g", 2, gpus=[0]))]
    pending = [
        job(1, priority=9, gpus_per_node=2),
        job(2, priority=5, gpus_per_node=1, time_limit_secs=200),
        job(3, priority=4, gpus_per_node=1, time_limit_secs=50),
    ]
    result = plan(snap(nodes, pending, run), {})
    assert started(result)[3][0].gpus == [1]
    assert result.reasons == {1: "Resources", 2: "Priority"}


# ----- node selection and reasons --------------------------------------------------------------


def test_nodelist_nodes_are_in_the_allocation_and_excluded_nodes_are_not():
    nodes = [node(n) for n in ("a", "b", "c", "d")]
    pending = [
        job(1, priority=9, num_nodes=2, nodelist=("c",), cpus_per_task=8),
        job(2, priority=8, num_nodes=2, exclude=("a",), cpus_per_task=8),
    ]
    result = plan(snap(nodes, pending), {})
    assert nodes_of(result, 1) == ["a", "c"]
    assert nodes_of(result, 2) == ["b", "d"]


def test_unavailable_nodes_are_never_planned_onto():
    nodes = [node("a", available=False), node("b")]
    result = plan(snap(nodes, [job(1), job(2)]), {})
    assert nodes_of(result, 1) == ["b"]
    assert nodes_of(result, 2) == ["b"]


def test_reasons_for_jobs_that_cannot_run_as_configured():
    nodes = [node("a", features=("ib",)), node("b", available=False), node("c", partitions=("other",))]
    parts = (PartitionView("batch", ("a", "b", "ghost")), PartitionView("down", ("a",), up=False))
    pending = [
        job(1, partition="down"),
        job(2, partition="nosuch"),
        job(3, num_nodes=4),
        job(4, features=("gpu",)),
        job(5, nodelist=("b",)),
        job(6, nodelist=("c",)),
        job(7, nodelist=("ghost",)),
        job(8, num_nodes=2),
        job(9, features=("ib",)),
    ]
    result = plan(snap(nodes, pending, partitions=parts), {})
    assert result.reasons == {
        1: "PartitionDown",
        2: "PartitionConfig",
        3: "PartitionNodeLimit",
        4: "BadConstraints",
        5: "ReqNodeNotAvail",
        6: "BadConstraints",
        7: "ReqNodeNotAvail",
        8: "ReqNodeNotAvail",
    }
    assert nodes_of(result, 9) == ["a"]


def test_max_job_test_stops_after_that_many_jobs():
    nodes = [node("a", cpus=2)]
    pending = [job(k, priority=10 - k, cpus_per_task=2 if k == 1 else 1) for k in range(1, 5)]
    result = plan(snap(nodes, pending, max_job_test=2), {})
    assert result.jobs_tested == 2
    assert list(started(result)) == [1]
    assert result.reasons == {2: "Resources", 3: "Priority", 4: "Priority"}


def test_bad_option_is_one_clear_error():
    with pytest.raises(BackfillOptionError, match="reservation_depth"):
        plan(snap([node("a")], [job(1)]), {"reservation_depth": "lots"})


# ----- invariants on random clusters -----------------------------------------------------------


def _random_snapshot(rng: random.Random) -> SchedSnapshot:
    nodes, run = [], []
    for k in range(rng.randint(1, 8)):
        models = tuple(rng.choice(["a100", "h100"]) for _ in range(rng.choice([0, 0, 2, 4])))
        used = rng.randint(0, 8)
        gpus_used = [g for g in range(len(models)) if rng.random() < 0.4]
        name = f"n{k}"
        if used:
            end = rng.choice([math.inf, NOW - 5, NOW + rng.randint(1, 500)])
            run.append(running(100 + k, end, NodeAllocation(name, used, used * 100, gpus_used)))
        nodes.append(
            gpu_node(
                name,
                models,
                free=tuple(g for g in range(len(models)) if g not in gpus_used),
                cpus_free=8 - used,
                mem_free_mb=16_000 - used * 100,
                running_jobs=1 if used else 0,
                available=rng.random() < 0.9,
                features=("ib",) if rng.random() < 0.5 else (),
            )
        )
    pending = [
        job(
            k,
            priority=rng.randint(0, 3),
            num_nodes=rng.choice([1, 1, 2, 3]),
            num_tasks=rng.choice([1, 2, 5]),
            cpus_per_task=rng.choice([1, 2, 4]),
            mem_per_cpu_mb=rng.choice([0, 500, 3000]),
            gpus_per_node=rng.choice([0, 0, 1, 2]),
            gpu_type=rng.choice(["", "a100"]),
            time_limit_secs=rng.choice([-1, 60, 600]),
            exclusive=rng.random() < 0.1,
            features=("ib",) if rng.random() < 0.2 else (),
            exclude=("n0",) if rng.random() < 0.2 else (),
        )
        for k in range(1, rng.randint(1, 15))
    ]
    return snap(nodes, pending, run)


def _checked_take(original):
    """NodeProfile.take that first asserts the resources are free over the whole window."""

    def take(self, start, end, cpus, mem, gpu_mask):
        for k, t in enumerate(self.times):
            nxt = self.times[k + 1] if k + 1 < len(self.times) else math.inf
            if t < end and nxt > start:
                assert self.cpus[k] >= cpus and self.mem[k] >= mem and gpu_mask & ~self.gpus[k] == 0
        original(self, start, end, cpus, mem, gpu_mask)

    return take


@pytest.mark.parametrize("seed", range(200))
def test_random_plans_never_overcommit_or_break_constraints(seed, monkeypatch):
    monkeypatch.setattr(NodeProfile, "take", _checked_take(NodeProfile.take))
    rng = random.Random(seed)
    snapshot = _random_snapshot(rng)
    before = copy.deepcopy(snapshot)
    planner = BackfillPlanner(snapshot, BackfillOptions())
    result = planner.plan()
    assert snapshot == before
    # Nothing planned now or reserved later overcommits any node at any time.
    # (profiles are built on first use: a node the pass never looked at had nothing taken from it)
    for prof in planner.profiles.values():
        assert min(prof.cpus) >= 0 and min(prof.mem) >= 0
    views = {v.name: v for v in snapshot.nodes}
    jobs = {p.job_id: p for p in snapshot.pending}
    cpus = {n: 0 for n in views}
    mem = {n: 0 for n in views}
    gpus: dict[str, list[int]] = {n: [] for n in views}
    jobs_on = {n: 0 for n in views}
    exclusive_on: set[str] = set()
    for a in result.assignments:
        p = jobs[a.job_id]
        names = [x.node for x in a.allocation]
        assert len(names) == len(set(names)) == max(p.num_nodes, 1)
        assert sum(x.tasks for x in a.allocation) == max(p.num_tasks, p.num_nodes, 1)
        for x in a.allocation:
            v = views[x.node]
            assert v.available and x.node not in p.exclude and set(p.features) <= set(v.features)
            assert x.tasks >= 1 and x.cpus >= x.tasks * p.cpus_per_task
            assert len(x.gpus) == p.gpus_per_node or p.exclusive
            if p.gpu_type and not p.exclusive:
                assert all(v.gpu_models[g] == p.gpu_type for g in x.gpus)
            if p.exclusive:
                assert v.running_jobs == 0 and jobs_on[x.node] == 0
                exclusive_on.add(x.node)
            else:
                assert x.node not in exclusive_on
            cpus[x.node] += x.cpus
            mem[x.node] += x.mem_mb
            gpus[x.node] += x.gpus
            jobs_on[x.node] += 1
    for n, v in views.items():
        assert cpus[n] <= v.cpus_free and mem[n] <= v.mem_free_mb
        assert len(gpus[n]) == len(set(gpus[n])) and set(gpus[n]) <= set(v.gpus_free)
    assert set(result.reasons) | {a.job_id for a in result.assignments} == set(jobs)
    assert not set(result.reasons) & {a.job_id for a in result.assignments}


# ----- plugin discovery ------------------------------------------------------------------------


def test_the_plugin_is_found_by_entry_point_and_plans():
    pm = load_plugin_manager("scheduler", "backfill")
    result = pm.hook.spur_schedule(snapshot=snap([node("a")], [job(1)]), options={})
    assert nodes_of(result, 1) == ["a"]


def test_a_missing_scheduler_plugin_names_its_package():
    with pytest.raises(PluginNotFound, match="spur-sched-nope"):
        load_plugin_manager("scheduler", "nope")


def test_place_now_hook_places_a_new_job_as_a_pass_would_or_says_none() -> None:
    pm = load_plugin_manager("scheduler", "backfill")
    nodes = [node("n2", cpus=4, cpus_free=1), node("n10", cpus=4)]
    view = snap(nodes, [])
    new = job(7, num_tasks=2)
    placed = pm.hook.spur_place_now(snapshot=view, job=new, options={})
    assert placed == plan(snap(nodes, [new])).assignments[0].allocation
    assert [(a.node, a.cpus) for a in placed] == [("n10", 2)]
    assert pm.hook.spur_place_now(snapshot=view, job=job(8, num_tasks=5), options={}) is None
    assert pm.hook.spur_place_now(snapshot=view, job=job(9, nodelist=("n2",), num_tasks=2), options={}) is None
    assert pm.hook.spur_place_now(snapshot=view, job=job(10, partition="nope"), options={}) is None
    # Resources a running job holds until later are not free now, whatever its end time.
    busy = snap([node("n1", cpus=2, cpus_free=0)], [], [running(1, NOW + 10, NodeAllocation("n1", 2, 0))])
    assert pm.hook.spur_place_now(snapshot=busy, job=job(11, time_limit_secs=5), options={}) is None


# ----- the layout a snapshot may carry -------------------------------------------------------------


def _with_layout(snapshot: SchedSnapshot, layout=None) -> SchedSnapshot:  # noqa: ANN001
    """``snapshot`` as the controller hands it over: nodes in natural order, its layout and its
    running jobs by node."""
    from dataclasses import replace

    from spur.core.scheduling import NodeLayout, natural_key

    nodes = tuple(sorted(snapshot.nodes, key=lambda v: natural_key(v.name)))
    by_node: dict[str, list[RunningView]] = {}
    for run in snapshot.running:
        for name in dict.fromkeys(a.node for a in run.allocation):
            by_node.setdefault(name, []).append(run)
    return replace(
        snapshot,
        nodes=nodes,
        layout=layout or NodeLayout.build(nodes, snapshot.partitions),
        node_running={n: tuple(r) for n, r in by_node.items()},
    )


@pytest.mark.parametrize("seed", range(100))
def test_a_snapshot_with_layout_and_running_by_node_plans_the_same(seed):
    snapshot = _random_snapshot(random.Random(seed))
    given = _with_layout(snapshot)
    expected = plan(snapshot)
    first = plan(given)
    again = plan(given)  # the second pass over the same layout plans from what the first cached
    for result in (first, again):
        assert result.assignments == expected.assignments and result.reasons == expected.reasons


def test_a_kept_layout_serves_later_passes_with_other_free_resources():
    """The layout outlives a pass: derivations cached by one pass stay right for the next, where
    only free resources differ."""
    busy = snap([node("n1", cpus=4), node("n2", cpus=4, features=("ib",))], [job(1, features=("ib",))])
    given = _with_layout(busy)
    assert nodes_of(plan(given), 1) == ["n2"]
    assert given.layout is not None and given.layout.cache  # the pass kept what it derived
    full = [node("n1", cpus=4), node("n2", cpus=4, cpus_free=0, features=("ib",))]
    later = _with_layout(snap(full, [job(2, features=("ib",))]), given.layout)
    result = plan(later)
    assert result.assignments == [] and result.reasons[2] == "Resources"


def test_the_layout_cache_starts_over_past_its_bound():
    from spur_sched_backfill import planner as backfill

    given = _with_layout(snap([node("n1")], [job(1)]))
    layout = given.layout
    assert layout is not None
    layout.cache[("spur_sched_backfill", "static_reasons")] = {k: "" for k in range(backfill.MAX_LAYOUT_CACHE + 1)}
    plan(given)
    assert len(layout.cache[("spur_sched_backfill", "static_reasons")]) == 1  # type: ignore[arg-type]
