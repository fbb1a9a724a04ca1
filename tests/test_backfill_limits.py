"""The backfill plan with account limits: held jobs get Slurm's reason, started jobs count at once."""

from __future__ import annotations

from dataclasses import replace

from spur_sched_backfill import plan

from spur.accounting.limits import Demand, LimitTable, LimitTracker
from spur.accounting.model import Limits
from spur.core.scheduling import NodeView, PartitionView, PendingView, SchedSnapshot

NOW = 1000.0


class TrackerGate:
    """The LimitGate protocol over the real tracker, for jobs described by a table (job id -> owner)."""

    def __init__(self, tracker: LimitTracker, owners: dict[int, tuple[str, Demand]]) -> None:
        self.tracker = tracker
        self.owners = owners

    def check(self, job_id: int) -> str:
        key, demand = self.owners[job_id]
        return self.tracker.check(key, "normal", key, demand)

    def charge(self, job_id: int) -> None:
        key, demand = self.owners[job_id]
        self.tracker.charge(key, "normal", key, demand)


def _snapshot(limits: dict[str, Limits], pending: list[tuple[int, str, int]]) -> SchedSnapshot:
    parents = {"root": "", "physics": "root", "bio": "root", "alice": "physics", "bob": "bio"}
    table = LimitTable(limits.get, lambda k: parents.get(k, ""), {})
    owners = {job_id: (user, Demand(cpus, 0, 1, 0, 3600)) for job_id, user, cpus in pending}
    node = NodeView(
        "n1", cpus_total=16, cpus_free=16, mem_total_mb=16000, mem_free_mb=16000, partitions=("batch",)
    )
    jobs = tuple(
        PendingView(
            job_id=i,
            priority=100 - i,
            submit_time=float(i),
            partition="batch",
            cpus_per_task=cpus,
            time_limit_secs=3600,
        )
        for i, _user, cpus in pending
    )
    return SchedSnapshot(
        now=NOW,
        pending=jobs,
        nodes=(node,),
        partitions=(PartitionView("batch", ("n1",)),),
        limits=TrackerGate(LimitTracker(table), owners),
    )


def test_jobs_started_earlier_in_the_same_plan_count_against_the_limit() -> None:
    snap = _snapshot(
        {"physics": Limits(grp_tres={"cpu": 8})},
        [(1, "alice", 4), (2, "alice", 4), (3, "alice", 4), (4, "bob", 4)],
    )
    result = plan(snap)
    assert sorted(a.job_id for a in result.assignments) == [1, 2, 4]
    assert result.reasons == {3: "AssocGrpCpuLimit"}


def test_a_held_job_keeps_no_reservation_and_lower_jobs_still_start() -> None:
    snap = _snapshot({"physics": Limits(max_jobs=0)}, [(1, "alice", 16), (2, "bob", 16)])
    result = plan(snap)
    assert [a.job_id for a in result.assignments] == [2]
    assert result.reasons == {1: "AssocMaxJobsLimit"}


def test_without_a_gate_nothing_is_held() -> None:
    snap = replace(_snapshot({"physics": Limits(max_jobs=0)}, [(1, "alice", 4)]), limits=None)
    assert [a.job_id for a in plan(snap).assignments] == [1]
