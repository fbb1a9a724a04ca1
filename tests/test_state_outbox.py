"""The accounting outbox domain: records on finish, removal on confirmation, bound, snapshots."""

from __future__ import annotations

from spur.core.job import NodeAllocation
from spur.state import commands as c
from spur.state.machine import ClusterState, Rejected
from spur.state.outbox import OutboxFlushed, SetAccountingStorage
from tests.state_helpers import Log, register, submit


def _run_and_finish(log: Log, exit_code: int = 0, **kw) -> int:
    job_id = submit(log, **kw)
    alloc = [NodeAllocation(node="n1", cpus=2, mem_mb=100, gpus=[0])]
    assert log(c.StartJob(job_id, alloc, 200.0, 1)) is True
    assert log(c.JobExited(job_id, "n1", exit_code, 0, 260.0)) is True
    return job_id


def _log(enabled: bool = True) -> Log:
    log = Log()
    log(c.InitClusterId("cafe"))
    register(log, "n1", cpus=8, gpus=2)
    if enabled:
        assert log(SetAccountingStorage(True)) is True
    return log


def test_a_finished_job_enters_the_outbox_with_its_accounting_record() -> None:
    log = _log()
    job_id = _run_and_finish(log, exit_code=3, name="train", account="physics", qos="high")
    box = log.state.domains["outbox"]
    assert box.depth == 1
    rec = box.batch(10)[0]
    assert (rec["cluster_id"], rec["job_id"], rec["submit_time"]) == ("cafe", job_id, 100.0)
    job = rec["job"]
    assert job["state"] == "FAILED" and job["exit_code"] == 3
    assert job["spec"]["name"] == "train" and job["spec"]["account"] == "physics"
    assert job["spec"]["qos"] == "high" and job["user"] == "alice" and job["uid"] == 1000
    assert (job["start_time"], job["end_time"]) == (200.0, 260.0)
    assert job["allocation"][0]["cpus"] == 2 and job["allocation"][0]["gpus"] == [0]
    assert "script" not in job["spec"] and "environment" not in job["spec"]


def test_only_confirmed_keys_leave_the_outbox() -> None:
    log = _log()
    first = _run_and_finish(log)
    second = _run_and_finish(log)
    box = log.state.domains["outbox"]
    assert box.depth == 2
    assert log(OutboxFlushed([[first, 100.0], [999, 100.0], [second, 5.0]])) == 1
    assert [r["job_id"] for r in box.batch(10)] == [second]
    assert log(OutboxFlushed([[first, 100.0]])) == 0  # a repeated confirmation changes nothing


def test_nothing_is_recorded_while_accounting_storage_is_off() -> None:
    log = _log(enabled=False)
    _run_and_finish(log)
    assert log.state.domains["outbox"].depth == 0
    log(SetAccountingStorage(True))
    cancelled = submit(log)
    log(c.CancelJob(cancelled, 0, 300.0))
    assert [r["job"]["state"] for r in log.state.domains["outbox"].batch(10)] == ["CANCELLED"]


def test_the_bound_drops_the_oldest_record_and_counts_it() -> None:
    log = _log()
    assert isinstance(log(SetAccountingStorage(True, max_records=0)), Rejected)
    log(SetAccountingStorage(True, max_records=2))
    ids = [_run_and_finish(log) for _ in range(3)]
    box = log.state.domains["outbox"]
    assert [r["job_id"] for r in box.batch(10)] == ids[1:]
    assert box.dropped == 1 and box.appended == 3


def test_the_outbox_survives_snapshot_restore_and_log_replay() -> None:
    log = _log()
    a = _run_and_finish(log)
    b = _run_and_finish(log)
    log(OutboxFlushed([[a, 100.0]]))
    fresh = ClusterState()
    fresh.restore(log.state.snapshot())
    box = fresh.domains["outbox"]
    assert box.enabled and [r["job_id"] for r in box.batch(10)] == [b]
    assert box.batch(10) == log.state.domains["outbox"].batch(10)
    replayed = log.replay().domains["outbox"]
    assert replayed.batch(10) == box.batch(10)
