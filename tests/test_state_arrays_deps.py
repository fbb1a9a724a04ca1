"""Arrays, dependencies, begin times, job control and steps in the state machine (pure)."""

from __future__ import annotations

from state_helpers import Log, register, spec

from spur.core.eligibility import dependency_display
from spur.core.job import JobSpec, JobState, NodeAllocation, StepSpec
from spur.state import commands as c
from spur.state.machine import Rejected
from spur.state.sched_view import eligible_jobs


def submit(log: Log, uid: int = 1000, **kw) -> int:
    return log(c.SubmitJob(spec(**kw), "alice" if uid else "root", uid, uid, "alice", 100.0))


def start(log: Log, job_id: int, node: str = "n1", cpus: int = 1) -> None:
    assert log(c.StartJob(job_id, [NodeAllocation(node, cpus)], 110.0, 1)) is True
    assert log(c.JobLaunched(job_id, 1)) is True


def finish(log: Log, job_id: int, code: int = 0, node: str = "n1") -> None:
    assert log(c.JobExited(job_id, node, code, 0, 120.0)) is True


def reasons(log: Log, now: float = 200.0) -> dict[int, str | None]:
    eligible, blocked = eligible_jobs(log.state, now)
    out: dict[int, str | None] = {j.job_id: None for j in eligible}
    out.update(blocked)
    return out


def test_array_creates_consecutive_tasks_sharing_the_array_id():
    log = Log()
    first = submit(log, array="0-3,7")
    assert first == 1 and log.state.next_job_id == 6
    tasks = log.state.resolve_targets(first)
    assert [(t.job_id, t.array_task_id) for t in tasks] == [(1, 0), (2, 1), (3, 2), (4, 3), (5, 7)]
    assert all(t.array_job_id == 1 and t.array_task_count == 5 and t.array_task_max == 7 for t in tasks)
    assert [t.job_id for t in log.state.resolve_targets(1, 7)] == [5]
    assert submit(log) == 6


def test_array_limit_offers_only_free_slots():
    log = Log()
    register(log, "n1", cpus=8)
    arr = submit(log, array="1-10%3")
    r = reasons(log)
    assert [j for j, why in r.items() if why is None] == [arr, arr + 1, arr + 2]
    assert r[arr + 3] == "JobArrayTaskLimit"
    start(log, arr)
    start(log, arr + 1)
    r = reasons(log)
    assert [j for j, why in r.items() if why is None] == [arr + 2]


def test_bad_array_spec_is_rejected():
    log = Log()
    result = submit(log, array="5-1")
    assert isinstance(result, Rejected) and "array" in result.message.lower()
    assert log.state.jobs == {}


def test_afterok_chain_waits_then_runs_or_never_satisfies():
    log = Log()
    register(log, "n1", cpus=4)
    a = submit(log)
    b = submit(log, dependency=f"afterok:{a}")
    d = submit(log, dependency=f"afternotok:{a}")
    assert reasons(log)[b] == "Dependency"
    start(log, a)
    finish(log, a, code=0)
    r = reasons(log)
    assert r[b] is None
    assert r[d] == "DependencyNeverSatisfied"
    log(c.SetPendingReasons({str(d): "DependencyNeverSatisfied"}))
    assert dependency_display(log.state.jobs[d]) == f"afternotok:{a}(failed)"


def test_dependency_on_whole_array_and_on_one_task():
    log = Log()
    register(log, "n1", cpus=4)
    arr = submit(log, array="0-1")
    whole = submit(log, dependency=f"afterany:{arr}")
    one = submit(log, dependency=f"afterok:{arr}_1")
    start(log, arr + 1)
    finish(log, arr + 1)
    r = reasons(log)
    assert r[one] is None and r[whole] == "Dependency"
    log(c.CancelJob(arr, 1000, 130.0, array_task_id=0))
    assert reasons(log)[whole] is None


def test_any_of_and_unknown_target():
    log = Log()
    a, b = submit(log), submit(log)
    either = submit(log, dependency=f"afterok:{a}?afterok:{b}")
    log(c.CancelJob(a, 1000, 1.0))
    assert reasons(log)[either] == "Dependency"
    unknown = submit(log, dependency="afterok:999")
    assert isinstance(unknown, Rejected) and "999" in unknown.message


def test_singleton_waits_for_earlier_same_name_job():
    log = Log()
    register(log, "n1", cpus=4)
    first = submit(log, name="nightly", dependency="singleton")
    second = submit(log, name="nightly", dependency="singleton")
    other = submit(log, name="other", dependency="singleton")
    r = reasons(log)
    assert r[first] is None and r[other] is None and r[second] == "Dependency"
    start(log, first)
    finish(log, first)
    assert reasons(log)[second] is None


def test_begin_time_defers_eligibility():
    log = Log()
    j = submit(log, begin_time=500.0)
    assert reasons(log, now=400.0)[j] == "BeginTime"
    assert reasons(log, now=500.0)[j] is None


def test_hold_release_and_admin_hold():
    log = Log()
    j = submit(log)
    assert log(c.UpdateJob(j, 1000, 1.0, action="hold")) == [j]
    assert log.state.jobs[j].reason == "JobHeldUser" and reasons(log)[j] == "JobHeldUser"
    log(c.UpdateJob(j, 1000, 1.0, action="release"))
    assert reasons(log)[j] is None
    log(c.UpdateJob(j, 0, 1.0, action="hold"))
    assert log.state.jobs[j].reason == "JobHeldAdmin"
    refused = log(c.UpdateJob(j, 1000, 1.0, action="release"))
    assert isinstance(refused, Rejected) and refused.code == "PERMISSION_DENIED"


def test_update_pending_job_fields_and_permissions():
    log = Log()
    j = submit(log)
    assert log(c.UpdateJob(j, 1000, 1.0, time_limit_secs=600, name="renamed")) == [j]
    job = log.state.jobs[j]
    assert job.time_limit_secs == 600 and job.spec.name == "renamed"
    denied = log(c.UpdateJob(j, 2000, 1.0, name="x"))
    assert isinstance(denied, Rejected) and denied.code == "PERMISSION_DENIED"
    not_admin = log(c.UpdateJob(j, 1000, 1.0, priority=5))
    assert isinstance(not_admin, Rejected)
    assert log(c.UpdateJob(j, 0, 1.0, priority=5)) == [j] and log.state.jobs[j].priority == 5
    bad_part = log(c.UpdateJob(j, 1000, 1.0, partition="nope"))
    assert isinstance(bad_part, Rejected) and bad_part.code == "INVALID_ARGUMENT"


def test_requeue_running_job_goes_back_to_pending_after_agents_report():
    log = Log()
    register(log, "n1")
    j = submit(log)
    start(log, j)
    assert log(c.UpdateJob(j, 1000, 150.0, action="requeue")) == [j]
    assert log.state.jobs[j].state is JobState.COMPLETING
    finish(log, j, code=143)
    job = log.state.jobs[j]
    assert job.state is JobState.PENDING and job.restarts == 1 and job.allocation == []
    assert log.state.usage("n1").cpus == 0
    start(log, j)
    finish(log, j)
    assert log.state.jobs[j].state is JobState.COMPLETED


def test_requeue_finished_job_and_requeuehold():
    log = Log()
    register(log, "n1")
    j = submit(log)
    start(log, j)
    finish(log, j, code=1)
    log(c.UpdateJob(j, 1000, 150.0, action="requeuehold"))
    job = log.state.jobs[j]
    assert (
        job.state is JobState.PENDING
        and job.reason == "JobHeldUser"
        and j not in log.state.finished_job_ids()
    )


def test_suspend_and_resume_account_suspended_time():
    log = Log()
    register(log, "n1")
    j = submit(log)
    start(log, j)
    refused = log(c.UpdateJob(j, 1000, 1.0, action="suspend"))
    assert isinstance(refused, Rejected) and refused.code == "PERMISSION_DENIED"
    log(c.UpdateJob(j, 0, 200.0, action="suspend"))
    assert log.state.jobs[j].state is JobState.SUSPENDED
    assert log.state.usage("n1").cpus == 1
    log(c.UpdateJob(j, 0, 230.0, action="resume"))
    job = log.state.jobs[j]
    assert job.state is JobState.RUNNING and job.suspended_secs == 30.0


def test_cancel_array_element_and_whole_array():
    log = Log()
    arr = submit(log, array="1-5")
    assert log(c.CancelJob(arr, 1000, 1.0, array_task_id=3)) == "CANCELLED"
    states = {t.array_task_id: t.state for t in log.state.resolve_targets(arr)}
    assert states[3] is JobState.CANCELLED and states[2] is JobState.PENDING
    log(c.CancelJob(arr, 1000, 2.0))
    assert all(t.state is JobState.CANCELLED for t in log.state.resolve_targets(arr))
    missing = log(c.CancelJob(arr, 1000, 3.0, array_task_id=9))
    assert isinstance(missing, Rejected) and missing.code == "NOT_FOUND"


def test_steps_split_tasks_over_the_allocation_and_finish_per_node():
    log = Log()
    register(log, "n1", cpus=4)
    register(log, "n2", cpus=4)
    j = submit(log, num_nodes=2)
    log(c.StartJob(j, [NodeAllocation("n1", 2), NodeAllocation("n2", 2)], 1.0, 1))
    log(c.JobLaunched(j, 1))
    step = log(c.CreateStep(j, StepSpec(argv=["hostname"], num_tasks=3), 1000, 2.0))
    assert step.step_id == 0 and [(a.node, a.tasks) for a in step.allocation] == [("n1", 2), ("n2", 1)]
    second = log(c.CreateStep(j, StepSpec(argv=["true"], num_tasks=1), 1000, 2.0))
    assert second.step_id == 1 and [a.node for a in second.allocation] == ["n1"]
    log(c.StepExited(j, 0, "n1", 0, 0, 3.0))
    assert log.state.jobs[j].steps[0].state is JobState.RUNNING
    log(c.StepExited(j, 0, "n2", 2, 0, 4.0))
    assert log.state.jobs[j].steps[0].state is JobState.FAILED
    too_many = log(c.CreateStep(j, StepSpec(argv=["x"], num_nodes=3), 1000, 5.0))
    assert isinstance(too_many, Rejected)
    log(c.CancelJob(j, 1000, 6.0))
    log(c.JobExited(j, "n1", 0, 15, 7.0, cancelled=True))
    assert log.state.jobs[j].steps[1].state is JobState.CANCELLED


def test_allocation_only_job_finishes_on_the_first_report():
    log = Log()
    register(log, "n1")
    register(log, "n2")
    j = log(
        c.SubmitJob(
            JobSpec(interactive=True, allocation_only=True, work_dir="/tmp", num_nodes=2),
            "a",
            1000,
            1000,
            "a",
            1.0,
        )
    )
    assert not isinstance(j, Rejected)
    log(c.StartJob(j, [NodeAllocation("n1", 1), NodeAllocation("n2", 1)], 1.0, 1))
    log(c.JobExited(j, "n1", 3, 0, 2.0))
    assert log.state.jobs[j].state is JobState.FAILED and log.state.jobs[j].exit_code == 3


def test_array_and_steps_survive_snapshot_restore():
    log = Log()
    register(log, "n1", cpus=4)
    arr = submit(log, array="0-2%1")
    start(log, arr)
    log(c.CreateStep(arr, StepSpec(argv=["true"]), 1000, 2.0))
    from spur.state.machine import ClusterState

    restored = ClusterState()
    restored.restore(log.state.snapshot())
    assert [t.job_id for t in restored.resolve_targets(arr)] == [arr, arr + 1, arr + 2]
    assert restored.jobs[arr].steps[0].spec.argv == ["true"]
    assert log.replay().snapshot() == log.state.snapshot()


def test_dependency_and_begin_time_reasons_are_set_at_submit():
    """As slurmctld: squeue shows Reason=Dependency (or BeginTime) right after sbatch, before any
    scheduler pass; a dependency already met, or one that never can be, is judged at submit too."""
    log = Log()
    register(log, "n1", cpus=8)
    first = submit(log)
    waiting = submit(log, dependency=f"afterok:{first}")
    assert log.state.jobs[waiting].reason == "Dependency"
    assert dependency_display(log.state.jobs[waiting]) == f"afterok:{first}(unfulfilled)"
    later = submit(log, begin_time=500.0)
    assert log.state.jobs[later].reason == "BeginTime"
    held = submit(log, hold=True, dependency=f"afterok:{first}")
    assert log.state.jobs[held].reason == "JobHeldUser"
    start(log, first)
    finish(log, first, code=1)
    never = submit(log, dependency=f"afterok:{first}")
    assert log.state.jobs[never].reason == "DependencyNeverSatisfied"
    met = submit(log, dependency=f"afternotok:{first}")
    assert log.state.jobs[met].reason == "None"
