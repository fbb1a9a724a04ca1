"""Immediate grant at submission (spur.state.immediate and SubmitJob.grant): the leader's decision
with the backfill plugin's placement, and what every replica applies from the entry."""

from __future__ import annotations

from spur_sched_backfill.planner import place_now
from state_helpers import Log, register, spec, submit

from spur.core.job import JobState, Node, NodeAllocation
from spur.state import commands as c
from spur.state.immediate import InFlight, decide_grant
from spur.state.machine import ClusterState

NOW = 100.0


def _decide(log: Log, in_flight=(), **kw):
    return decide_grant(
        log.state,
        spec(**kw),
        "alice",
        NOW,
        place=lambda snap, job: place_now(snap, job),
        priorities=lambda jobs: {},
        limits=None,
        in_flight=in_flight,
    )


def _submit_with(log: Log, grant, **kw):
    return log(c.SubmitJob(spec(**kw), "alice", 1000, 1000, "alice", NOW, grant=list(grant), term=3))


def test_a_job_that_fits_runs_from_its_own_submit_entry_on_every_replica() -> None:
    log = Log()
    register(log, "n1", cpus=4)
    decision = _decide(log, num_tasks=2)
    assert [(a.node, a.cpus) for a in decision.allocation] == [("n1", 2)]
    entries_before = len(log.entries)
    job_id = _submit_with(log, decision.allocation, num_tasks=2)
    assert len(log.entries) == entries_before + 1  # one entry: the submit itself
    job = log.state.jobs[job_id]
    assert job.state is JobState.RUNNING and job.reason == "None"
    assert job.start_time == job.submit_time == NOW and job.alloc_term == 3 and not job.launched
    assert log.state.usage("n1").cpus == 2
    replayed = log.replay()
    assert replayed.snapshot() == log.state.snapshot()
    restored = ClusterState()
    restored.restore(log.state.snapshot())
    assert restored.jobs[job_id].state is JobState.RUNNING and restored.usage("n1").cpus == 2


def test_a_grant_taken_by_an_earlier_entry_leaves_the_job_pending() -> None:
    log = Log()
    register(log, "n1", cpus=2)
    grant = _decide(log, num_tasks=2).allocation
    first = _submit_with(log, grant, num_tasks=2)
    second = _submit_with(log, grant, num_tasks=2)  # decided on the same picture, applied after
    assert log.state.jobs[first].state is JobState.RUNNING
    assert log.state.jobs[second].state is JobState.PENDING and log.state.jobs[second].reason == "None"
    assert log.state.usage("n1").cpus == 2
    assert log.replay().snapshot() == log.state.snapshot()


def test_grants_are_ignored_for_jobs_that_may_not_start_at_once() -> None:
    log = Log()
    register(log, "n1", cpus=8)
    grant = [NodeAllocation("n1", 1, 0, [], 1)]
    done = submit(log)
    held = _submit_with(log, grant, hold=True)
    dependent = _submit_with(log, grant, dependency=f"afterok:{done}")
    later = _submit_with(log, grant, begin_time=NOW + 60)
    array = _submit_with(log, grant, array="0-1")
    for job_id in (held, dependent, later, array):
        assert log.state.jobs[job_id].state is JobState.PENDING
    assert log.state.usage("n1").cpus == 0
    bogus = _submit_with(log, [NodeAllocation("nowhere", 1, 0, [], 1)])
    assert log.state.jobs[bogus].state is JobState.PENDING


def test_no_grant_when_nothing_fits_now() -> None:
    log = Log()
    register(log, "n1", cpus=2)
    busy = submit(log, num_tasks=2)
    assert log(c.StartJob(busy, [NodeAllocation("n1", 2, 0, [], 2)], NOW, 1)) is True
    decision = _decide(log)
    assert decision.allocation == ()
    assert decision.in_flight == InFlight("default", (), waits=True)


def test_a_higher_priority_pending_job_keeps_a_small_job_from_overtaking() -> None:
    log = Log()
    register(log, "n1", cpus=4)
    register(log, "n2", cpus=4)
    blocker = submit(log, num_tasks=2, num_nodes=2)
    both = [NodeAllocation("n1", 1, 0, [], 1), NodeAllocation("n2", 1, 0, [], 1)]
    assert log(c.StartJob(blocker, both, NOW, 1)) is True
    big = submit(log, num_tasks=8, num_nodes=2)  # all 8 CPUs of both nodes: waits for the blocker
    assert log.state.jobs[big].state is JobState.PENDING and log.state.jobs[big].reason == "None"
    # One CPU would fit on n1 now, but the older, higher-priority job of the partition is runnable.
    assert _decide(log).allocation == ()
    # Held, it no longer counts (slurmctld's _top_priority skips jobs that cannot run).
    assert log(c.UpdateJob(big, 0, NOW, action="hold", admin=True)) is not None
    assert log.state.jobs[big].priority == 0
    assert [a.node for a in _decide(log).allocation] == ["n1"]


def test_a_pending_job_of_another_partition_does_not_count() -> None:
    from spur.core.job import Partition

    log = Log()
    register(log, "a1", cpus=2)
    register(log, "b1", cpus=2)
    parts = [Partition("a", nodes_expr="a1", is_default=True), Partition("b", nodes_expr="b1")]
    assert log(c.ConfigurePartitions(parts)) is True
    waiting = submit(log, partition="b", num_tasks=4)  # never fits b: pends with a partition reason
    assert log.state.jobs[waiting].state is JobState.PENDING
    assert [a.node for a in _decide(log, partition="a").allocation] == ["a1"]


def test_in_flight_submissions_count() -> None:
    log = Log()
    register(log, "n1", cpus=2)
    first = _decide(log, num_tasks=2)
    assert first.allocation and first.in_flight is not None
    # The first grant is not applied yet: its CPUs are taken for the next decision.
    second = _decide(log, in_flight=[first.in_flight], num_tasks=1)
    assert second.allocation == () and second.in_flight is not None and second.in_flight.waits
    # A submission ahead that pends keeps a later one of the same partition from starting first.
    register(log, "n2", cpus=2)
    third = _decide(log, in_flight=[first.in_flight, second.in_flight], num_tasks=1)
    assert third.allocation == ()
    fourth = _decide(log, in_flight=[first.in_flight], num_tasks=1)
    assert [a.node for a in fourth.allocation] == ["n2"]


def test_requests_that_wait_anyway_are_not_tracked() -> None:
    log = Log()
    register(log, "n1", cpus=2)
    for kw in ({"hold": True}, {"array": "1-2"}, {"begin_time": NOW + 5}, {"partition": "nope"}):
        decision = _decide(log, **kw)
        assert decision.allocation == () and decision.in_flight is None


def test_multifactor_priorities_decide_who_is_ahead() -> None:
    log = Log()
    register(log, "n1", cpus=4)
    register(log, "n2", cpus=4)
    blocker = submit(log, num_tasks=2, num_nodes=2)
    both = [NodeAllocation("n1", 1, 0, [], 1), NodeAllocation("n2", 1, 0, [], 1)]
    assert log(c.StartJob(blocker, both, NOW, 1)) is True
    big = submit(log, num_tasks=8, num_nodes=2)

    def decide(ranks: dict[str, int]):
        return decide_grant(
            log.state,
            spec(),
            "alice",
            NOW,
            place=lambda snap, job: place_now(snap, job),
            priorities=lambda jobs: {j.job_id: ranks["big" if j.job_id == big else "new"] for j in jobs},
            limits=None,
        )

    assert decide({"big": 500, "new": 100}).allocation == ()
    assert decide({"big": 100, "new": 100}).allocation == ()  # a tie goes to the job already waiting
    assert [a.node for a in decide({"big": 100, "new": 500}).allocation] == ["n1"]


def test_account_limits_are_checked_for_the_job_not_yet_submitted() -> None:
    from spur.state.accounting import AcctAdd, ConfigureAccounting

    log = Log()
    assert log(ConfigureAccounting("anchor", ["associations", "limits"], 7 * 86400.0)) is not None
    log(AcctAdd("account", ["physics"], {"grpjobs": "1"}))
    log(AcctAdd("user", ["alice"], {"account": "physics"}))
    register(log, "n1", cpus=4)
    gate = log.state.domains["accounting"].scheduling_gate()

    def decide(in_flight=()):
        return decide_grant(
            log.state, spec(), "alice", NOW,
            place=lambda snap, job: place_now(snap, job), priorities=lambda jobs: {},
            limits=log.state.domains["accounting"].scheduling_gate(), in_flight=in_flight,
        )  # fmt: skip

    assert gate is not None
    first = decide()
    assert first.allocation  # the user's default account, under its limit
    # Limits are charged only once applied: while a grant is in flight no other job is granted.
    assert decide(in_flight=[first.in_flight]).allocation == ()
    job_id = _submit_with(log, first.allocation)
    assert (
        log.state.jobs[job_id].state is JobState.RUNNING and log.state.jobs[job_id].spec.account == "physics"
    )
    assert decide().allocation == ()  # GrpJobs=1 is reached
    assert log.state.domains["accounting"].scheduling_gate().check_job(
        log.state.jobs[job_id]
    ) == log.state.domains["accounting"].scheduling_gate().check(job_id)


def test_the_plugin_is_shown_only_nodes_the_job_could_use_now() -> None:
    from spur.core.scheduling import NodeView, PartitionView
    from spur.state.immediate import usable_now

    def view(name: str, free: int, parts=("a",), available: bool = True) -> NodeView:
        return NodeView(name, 4, free, 8000, 8000, partitions=parts, available=available)

    nodes = (view("full", 0), view("drained", 4, available=False), view("other", 4, ("b",)), view("ok", 1))
    listed = (view("listed", 2, ()),)
    parts = (PartitionView("a", ("full", "drained", "ok", "listed")), PartitionView("b", ("other",)))
    assert [v.name for v in usable_now(nodes + listed, parts, "a")] == ["ok", "listed"]
    assert [v.name for v in usable_now(nodes, parts, "")] == ["other", "ok"]
    # membership through the snapshot's layout (no member set built) gives the same nodes
    from spur.core.scheduling import NodeLayout
    from spur.state.immediate import usable_in_order

    everything = nodes + listed
    layout = NodeLayout.build(everything, parts)
    for part in ("a", "b", ""):
        through_layout = usable_in_order(everything, {}, parts, part, layout)
        assert [v.name for v in through_layout] == [v.name for v in usable_now(everything, parts, part)]


def test_a_decision_on_a_big_idle_cluster_offers_the_plugin_a_few_nodes_first() -> None:
    """The first nodes in name order hold the grant: the plugin sees the first round's number of
    them, not all. When they do not hold it (the job needs more nodes than that, or only a late node
    fits), the next round's are offered, then all, and the answer is the one the whole list gives."""
    from spur.state.immediate import OFFER_ROUNDS

    log = Log()
    for i in range(300):
        register(log, f"n{i:03d}", cpus=4 if i < 299 else 16)
    offered: list[int] = []

    def place(snap, job):
        offered.append(len(snap.nodes))
        return place_now(snap, job)

    def decide(**kw):
        offered.clear()
        return decide_grant(
            log.state, spec(**kw), "alice", NOW, place=place, priorities=lambda jobs: {}, limits=None
        )

    one = decide(num_tasks=2)
    assert [a.node for a in one.allocation] == ["n000"] and offered == [OFFER_ROUNDS[0]]
    wide = decide(num_nodes=100, num_tasks=100)
    assert len(wide.allocation) == 100 and offered == [200]  # twice the nodes asked for, in one round
    big = decide(num_tasks=1, cpus_per_task=16)  # only the last node has 16 CPUs
    assert [a.node for a in big.allocation] == ["n299"] and offered == [*OFFER_ROUNDS, 300]


def test_flying_keeps_the_sums_of_what_is_in_flight() -> None:
    """Flying's running sums equal a recomputation from its entries after any mix of arrivals and
    departures, and a node whose CPUs grants in flight fill is never offered."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from spur.core.scheduling import NodeView
    from spur.state.immediate import Flying, usable_in_order

    alloc = st.builds(
        NodeAllocation,
        node=st.sampled_from(["n1", "n2", "n3"]),
        cpus=st.integers(1, 4),
        mem_mb=st.integers(0, 100),
        gpus=st.lists(st.integers(0, 3), max_size=2, unique=True).map(tuple),
    )
    entry = st.builds(
        InFlight,
        partition=st.sampled_from(["a", "b"]),
        allocation=st.lists(alloc, max_size=2).map(tuple),
        waits=st.booleans(),
    )

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.tuples(entry, st.booleans()), max_size=30))
    def check(steps: list[tuple[InFlight, bool]]) -> None:
        flying, live = Flying(), {}
        for new, leave_one in steps:
            live[flying.add(new)] = new
            if leave_one and live:
                key = next(iter(live))
                flying.remove(key)
                del live[key]
            assert len(flying) == len(live)
            for part in ("a", "b"):
                assert flying.waits_in(part) == any(e.waits and e.partition == part for e in live.values())
            assert flying.granted == sum(bool(e.allocation) for e in live.values())
            for node in ("n1", "n2", "n3"):
                allocs = [a for e in live.values() for a in e.allocation if a.node == node]
                held = flying.taken.get(node)
                if not allocs:
                    assert held is None
                    continue
                assert held is not None
                assert (held.cpus, held.mem_mb, held.grants) == (
                    sum(a.cpus for a in allocs),
                    sum(a.mem_mb for a in allocs),
                    len(allocs),
                )
                assert set(held.gpus) == {g for a in allocs for g in a.gpus}
            views = [
                NodeView(n, 4, 4, 1000, 1000, gpus_free=(0, 1, 2, 3), partitions=("a",))
                for n in ("n1", "n2", "n3")
            ]
            offered = {v.name: v for v in usable_in_order(views, flying.taken, (), "a")}
            for v in views:
                held = flying.taken.get(v.name)
                cpus_left = 4 - (held.cpus if held else 0)
                assert (v.name in offered) == (cpus_left > 0)
                if v.name in offered and held is not None:
                    assert offered[v.name].cpus_free == cpus_left
                    assert set(offered[v.name].gpus_free) == {0, 1, 2, 3} - set(held.gpus)

    check()


def test_decisions_on_kept_offer_layouts_equal_decisions_on_layouts_built_each_time() -> None:
    """SchedIndex.offer_layout keeps the layout of nodes offered again; through submissions, exits,
    drains and resumes (which change the layout version) every decision is the one a layout built
    afresh gives, and a drained node is never offered from a kept layout."""
    import random

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from spur.state.sched_index import SchedIndex

    @settings(max_examples=40, deadline=None)
    @given(st.integers(0, 2**32 - 1))
    def check(seed: int) -> None:
        rng = random.Random(seed)
        kept, fresh = Log(), Log()
        for log in (kept, fresh):
            for i in range(24):
                shape = random.Random(i)
                node = Node(
                    name=f"n{i:02d}",
                    address="127.0.0.1",
                    cpus=shape.choice([1, 2, 4]),
                    memory_mb=8000,
                    features=["fast"] if shape.random() < 0.3 else [],
                )
                assert log(c.RegisterNode(node, 50.0)) is True
        running: list[int] = []
        real = SchedIndex.offer_layout
        for _ in range(60):
            roll = rng.random()
            if roll < 0.1:
                cmd = c.UpdateNode(
                    [f"n{rng.randrange(24):02d}"], rng.choice(["DRAIN", "RESUME"]), "test", NOW
                )
                kept(cmd), fresh(cmd)
                continue
            if roll < 0.4 and running:
                job_id = running.pop(rng.randrange(len(running)))
                node = kept.state.jobs[job_id].allocation[0].node
                cmd = c.JobExited(job_id, node, 0, 0, NOW)
                kept(cmd), fresh(cmd)
                continue
            tasks = rng.choice([1, 1, 2])
            shape = {"num_tasks": tasks, "constraint": ["fast"] if rng.random() < 0.3 else []}
            with_kept = _decide(kept, **shape)
            SchedIndex.offer_layout = lambda self, nodes, partitions: None  # type: ignore[method-assign]
            try:
                built = _decide(fresh, **shape)
            finally:
                SchedIndex.offer_layout = real  # type: ignore[method-assign]
            assert with_kept.allocation == built.allocation
            for a in with_kept.allocation:
                assert kept.state.node_available(a.node)
            job_id = _submit_with(kept, with_kept.allocation, **shape)
            assert _submit_with(fresh, built.allocation, **shape) == job_id
            if kept.state.jobs[job_id].state is JobState.RUNNING:
                running.append(job_id)

    check()


def test_decisions_through_offer_rounds_equal_decisions_on_the_whole_list(monkeypatch) -> None:
    """Whatever rounds the offers grow through, a grant is the one offering every usable node at once
    gives: on a mixed cluster (1-8 CPUs, some with a feature), as jobs of one to several tasks and
    nodes start and end, with grants in flight."""
    import random

    from hypothesis import given, settings
    from hypothesis import strategies as st

    import spur.state.immediate as immediate
    from spur.state.immediate import Flying, InFlight

    @settings(max_examples=40, deadline=None)
    @given(st.integers(0, 2**32 - 1))
    def check(seed: int) -> None:
        rng = random.Random(seed)
        log = Log()
        for i in range(30):
            node = Node(
                name=f"n{i:02d}",
                address="127.0.0.1",
                cpus=rng.choice([1, 2, 4, 8]),
                memory_mb=8000,
                features=["fast"] if rng.random() < 0.3 else [],
            )
            assert log(c.RegisterNode(node, 50.0)) is True
        running: list[int] = []
        flying = Flying()
        for _ in range(50):
            if rng.random() < 0.3 and running:
                job_id = running.pop(rng.randrange(len(running)))
                node = log.state.jobs[job_id].allocation[0].node
                log(c.JobExited(job_id, node, 0, 0, NOW))
                continue
            shape = {
                "num_tasks": rng.choice([1, 1, 2, 5, 9]),
                "num_nodes": rng.choice([1, 1, 1, 2, 3]),
                "constraint": ["fast"] if rng.random() < 0.3 else [],
            }
            shape["num_tasks"] = max(shape["num_tasks"], shape["num_nodes"])
            decisions = []
            for rounds in ((2, 6), (1,), ()):
                monkeypatch.setattr(immediate, "OFFER_ROUNDS", rounds)
                decisions.append(_decide(log, in_flight=flying, **shape))
            assert decisions[0].allocation == decisions[2].allocation == decisions[1].allocation
            if rng.random() < 0.2 and decisions[0].allocation:
                flying.add(InFlight("", decisions[0].allocation, waits=False))  # stays in flight
                continue
            job_id = _submit_with(log, decisions[0].allocation, **shape)
            if log.state.jobs[job_id].state is JobState.RUNNING:
                running.append(job_id)

    check()
