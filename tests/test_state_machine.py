"""The replicated state machine: job lifecycle, node registry, resource bookkeeping, replay."""

from __future__ import annotations

from state_helpers import Log, register, spec, submit

from spur.core.job import JobSpec, JobState, NodeAllocation, Partition
from spur.state import commands as c
from spur.state.machine import ClusterState, Rejected
from spur.state.sched_view import build_snapshot


def test_job_ids_are_sequential_and_survive_replay():
    log = Log()
    assert [submit(log) for _ in range(3)] == [1, 2, 3]
    replayed = log.replay()
    assert replayed.next_job_id == 4
    assert sorted(replayed.jobs) == [1, 2, 3]


def test_snapshot_restore_round_trip_keeps_usage():
    log = Log()
    register(log, "n1")
    job = submit(log)
    assert log(c.StartJob(job, [NodeAllocation("n1", 2, 100)], 110.0, 1)) is True
    restored = ClusterState()
    restored.restore(log.state.snapshot())
    assert restored.jobs[job].state is JobState.RUNNING
    assert restored.usage("n1").cpus == 2
    assert restored.node_state("n1") == "mixed"
    assert restored.next_job_id == 2


def test_submit_rejects_bad_requests_without_changing_state():
    log = Log()
    bad = [
        spec(partition="nope"),
        spec(script="echo no shebang"),
        spec(num_nodes=0),
        spec(work_dir="relative"),
    ]
    for s in bad:
        result = log(c.SubmitJob(s, "alice", 1000, 1000, "alice", 1.0))
        assert isinstance(result, Rejected), s
        assert result.message
    assert log.state.jobs == {} and log.state.next_job_id == 1


def test_time_limit_resolves_from_partition_and_rejects_over_max():
    log = Log()
    part = Partition("batch", is_default=True, max_time_secs=3600, default_time_secs=600)
    log(c.ConfigurePartitions([part]))
    j = submit(log)
    assert log.state.jobs[j].time_limit_secs == 600
    j2 = submit(log, time_limit_secs=1200)
    assert log.state.jobs[j2].time_limit_secs == 1200
    over = log(c.SubmitJob(spec(time_limit_secs=7200), "a", 1, 1, "a", 1.0))
    assert isinstance(over, Rejected) and "time limit" in over.message


def test_start_job_rechecks_resources():
    log = Log()
    register(log, "n1", cpus=2)
    a, b = submit(log), submit(log)
    assert log(c.StartJob(a, [NodeAllocation("n1", 2)], 1.0, 1)) is True
    result = log(c.StartJob(b, [NodeAllocation("n1", 1)], 1.0, 1))
    assert isinstance(result, Rejected) and "cpus" in result.message
    assert log.state.jobs[b].state is JobState.PENDING
    assert log.state.node_state("n1") == "allocated"


def test_gpu_indices_cannot_be_double_booked():
    log = Log()
    register(log, "g1", gpus=2)
    a, b = submit(log), submit(log)
    assert log(c.StartJob(a, [NodeAllocation("g1", 1, gpus=[0])], 1.0, 1)) is True
    assert isinstance(log(c.StartJob(b, [NodeAllocation("g1", 1, gpus=[0])], 1.0, 1)), Rejected)
    assert log(c.StartJob(b, [NodeAllocation("g1", 1, gpus=[1])], 1.0, 1)) is True


def test_exit_codes_map_to_final_states():
    log = Log()
    register(log, "n1", cpus=8)
    cases = [
        (dict(exit_code=0, signal=0), JobState.COMPLETED),
        (dict(exit_code=3, signal=0), JobState.FAILED),
        (dict(exit_code=0, signal=9), JobState.FAILED),
        (dict(exit_code=0, signal=15, timed_out=True), JobState.TIMEOUT),
    ]
    for report, expected in cases:
        j = submit(log)
        log(c.StartJob(j, [NodeAllocation("n1", 1)], 10.0, 1))
        assert log(c.JobExited(j, "n1", end_time=20.0, **report)) is True
        job = log.state.jobs[j]
        assert job.state is expected, report
        assert job.exit_code == report["exit_code"] and job.end_time == 20.0
    assert log.state.usage("n1").cpus == 0
    # a duplicate report (agent retry) changes nothing
    assert log(c.JobExited(1, "n1", 5, 0, 99.0)) is False
    assert log.state.jobs[1].state is JobState.COMPLETED


def test_cancel_pending_and_running():
    log = Log()
    register(log, "n1")
    pending = submit(log)
    assert log(c.CancelJob(pending, 1000, 5.0)) == "CANCELLED"
    running = submit(log)
    log(c.StartJob(running, [NodeAllocation("n1", 1)], 1.0, 1))
    assert log(c.CancelJob(running, 1000, 6.0)) == "COMPLETING"
    assert log.state.usage("n1").cpus == 1  # held until the agent says the processes are gone
    log(c.JobExited(running, "n1", 0, 15, 7.0, cancelled=True))
    assert log.state.jobs[running].state is JobState.CANCELLED
    assert log.state.usage("n1").cpus == 0


def test_cancel_permissions_and_unknown_ids():
    log = Log()
    j = submit(log)
    denied = log(c.CancelJob(j, 2000, 1.0))
    assert isinstance(denied, Rejected) and denied.code == "PERMISSION_DENIED"
    assert log.state.jobs[j].state is JobState.PENDING
    assert log(c.CancelJob(j, 0, 1.0)) == "CANCELLED"  # root may cancel anything
    missing = log(c.CancelJob(99, 0, 1.0))
    assert isinstance(missing, Rejected) and missing.code == "NOT_FOUND"


def test_node_lost_fails_its_jobs_and_returns_to_service():
    log = Log()
    register(log, "n1")
    j = submit(log)
    log(c.StartJob(j, [NodeAllocation("n1", 1)], 1.0, 1))
    log(c.NodeLost(["n1"], "Not responding", 100.0))
    assert log.state.jobs[j].state is JobState.NODE_FAIL
    assert log.state.node_state("n1") == "down"
    log(c.NodeReturned("n1", 120.0))
    assert log.state.node_state("n1") == "idle"


def test_drain_requires_reason_and_resume_clears_it():
    log = Log()
    register(log, "n1")
    refused = log(c.UpdateNode(["n1"], "DRAIN", "", 1.0))
    assert isinstance(refused, Rejected) and "reason" in refused.message
    assert log(c.UpdateNode(["n1"], "DRAIN", "maintenance", 1.0)) is True
    assert log.state.node_state("n1") == "drained"
    assert log.state.nodes["n1"].reason == "maintenance"
    # draining nodes are not offered to the scheduler
    submit(log)
    snap = build_snapshot(log.state, 2.0)
    assert [n.available for n in snap.nodes] == [False]
    log(c.UpdateNode(["n1"], "RESUME", "", 3.0))
    assert log.state.node_state("n1") == "idle" and log.state.nodes["n1"].reason == ""
    unknown = log(c.UpdateNode(["zz"], "DRAIN", "x", 1.0))
    assert isinstance(unknown, Rejected) and unknown.code == "NOT_FOUND"


def test_reregistration_keeps_drain_but_clears_not_responding():
    log = Log()
    register(log, "n1")
    log(c.UpdateNode(["n1"], "DRAIN", "bad dimm", 1.0))
    register(log, "n1")
    assert log.state.nodes["n1"].drain and log.state.nodes["n1"].reason == "bad dimm"
    register(log, "n2")
    log(c.NodeLost(["n2"], "Not responding", 5.0))
    register(log, "n2")
    assert log.state.node_state("n2") == "idle"


def test_launch_failure_requeues_then_fails_after_three():
    log = Log()
    register(log, "n1")
    j = submit(log)
    for attempt in range(3):
        assert log(c.StartJob(j, [NodeAllocation("n1", 1)], 1.0, 1)) is True
        log(c.LaunchFailed(j, "agent unreachable", 2.0))
        if attempt < 2:
            assert log.state.jobs[j].state is JobState.PENDING
            assert log.state.usage("n1").cpus == 0
    assert log.state.jobs[j].state is JobState.FAILED
    assert "agent unreachable" in log.state.jobs[j].reason


def test_interactive_job_finishes_when_every_node_reported():
    log = Log()
    register(log, "n1")
    register(log, "n2")
    j = log(
        c.SubmitJob(
            JobSpec(interactive=True, argv=["hostname"], work_dir="/tmp", num_nodes=2),
            "a",
            1000,
            1000,
            "a",
            1.0,
        )
    )
    log(c.StartJob(j, [NodeAllocation("n1", 1), NodeAllocation("n2", 1)], 1.0, 1))
    log(c.JobExited(j, "n1", 0, 0, 2.0))
    assert log.state.jobs[j].state is JobState.RUNNING
    log(c.JobExited(j, "n2", 4, 0, 3.0))
    assert log.state.jobs[j].state is JobState.FAILED and log.state.jobs[j].exit_code == 4


def test_history_is_capped_oldest_first():
    log = Log()
    log.state.history_max_jobs = 2
    ids = [submit(log) for _ in range(4)]
    for i in ids:
        log(c.CancelJob(i, 0, float(i)))
    assert sorted(log.state.jobs) == ids[2:]


def test_held_jobs_are_not_offered_to_the_scheduler():
    log = Log()
    register(log, "n1")
    held = submit(log, hold=True)
    free = submit(log)
    snap = build_snapshot(log.state, 1.0)
    assert [p.job_id for p in snap.pending] == [free]
    assert log.state.jobs[held].reason == "JobHeldUser"
    assert isinstance(log(c.StartJob(held, [NodeAllocation("n1", 1)], 1.0, 1)), Rejected)


def test_partition_membership_by_hostlist():
    log = Log()
    log(c.ConfigurePartitions([Partition("gpu", nodes_expr="g[1-2]", is_default=True), Partition("all")]))
    for n in ("g1", "g2", "c1"):
        register(log, n)
    assert log.state.partition_nodes(log.state.partitions["gpu"]) == ["g1", "g2"]
    assert log.state.partition_nodes(log.state.partitions["all"]) == ["c1", "g1", "g2"]
    assert log.state.partitions_of("c1") == ["all"]


def test_dispatch_marks_name_exactly_the_jobs_whose_launch_stop_or_release_became_due():
    """The leader's dispatcher reads only these marks between its once-a-second full looks: a start,
    a launch acknowledgement (a stop may have come meanwhile), a stop and a release each mark the
    job; a pending submission, a pending reason or a heartbeat marks nothing. A restore asks for a
    full look, and so do more unconsumed marks than the bound (a follower never consumes them)."""
    from state_helpers import Log, register, submit

    log = Log()
    register(log, "n1", cpus=2)
    state = log.state
    assert state.take_dispatch_marks() is None  # first look: every job
    assert state.take_dispatch_marks() == set()
    running = log(c.SubmitJob(spec(), "alice", 1000, 1000, "alice", 100.0, grant=[NodeAllocation("n1", 1)]))
    waiting = submit(log, cpus_per_task=2)  # does not fit beside it: pends
    assert state.jobs[waiting].state is JobState.PENDING
    assert state.take_dispatch_marks() == {running}
    log(c.SetPendingReasons({str(waiting): "Resources"}))
    assert state.take_dispatch_marks() == set()
    log(c.JobLaunched(running, state.jobs[running].alloc_term))
    assert state.take_dispatch_marks() == {running}
    log(c.CancelJob(running, 1000, 101.0))
    assert state.jobs[running].state is JobState.COMPLETING
    assert state.take_dispatch_marks() == {running}
    log(c.JobExited(running, "n1", 0, 15, 102.0))
    assert state.take_dispatch_marks() == {running}
    restored = ClusterState()
    restored.restore(state.snapshot())
    assert restored.take_dispatch_marks() is None
    state.MAX_DISPATCH_MARKS = 1
    for _ in range(2):
        log(c.SubmitJob(spec(), "alice", 1000, 1000, "alice", 103.0, grant=[NodeAllocation("n1", 1)]))
    assert state.take_dispatch_marks() is None
    assert state.take_dispatch_marks() == set()
