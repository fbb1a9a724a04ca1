"""Compact job records: shared environments and strings change no job's data or independence."""

from __future__ import annotations

from state_helpers import Log, register, spec

from spur.core.job import JobState
from spur.state import commands as c
from spur.state.compact import MAX_ENVIRONMENTS, Interner
from spur.state.machine import ClusterState

ENV = {"PATH": "/usr/bin", "HOME": "/home/alice", "OMP_NUM_THREADS": "4"}


def _submit(log: Log, **kw) -> int:
    return log(c.SubmitJob(spec(environment=dict(ENV), **kw), "alice", 1000, 1000, "alice", 100.0))


def test_jobs_with_equal_environments_share_one_dict_and_keep_their_values() -> None:
    log = Log()
    register(log, "n1")
    first, second = _submit(log, name="a"), _submit(log, name="b")
    jobs = log.state.jobs
    assert jobs[first].spec.environment == ENV
    assert jobs[first].spec.environment is jobs[second].spec.environment
    assert jobs[first].user is jobs[second].user


def test_array_tasks_share_script_and_environment_but_not_their_own_fields() -> None:
    log = Log()
    register(log, "n1")
    array = _submit(log, name="arr", array="0-2", argv=["run.sh", "x"])
    tasks = log.state.array_tasks[array]
    assert len(tasks) == 3
    assert tasks[0].spec.environment is tasks[2].spec.environment
    assert tasks[0].spec.script is tasks[2].spec.script
    assert tasks[0].spec.argv is not tasks[1].spec.argv and tasks[0].spec.argv == tasks[1].spec.argv
    # scontrol update on one task renames that task only.
    assert log(c.UpdateJob(array, 0, 101.0, array_task_id=1, name="renamed")) == [tasks[1].job_id]
    assert [t.spec.name for t in tasks] == ["arr", "renamed", "arr"]


def test_restored_state_equals_the_original_and_is_compacted() -> None:
    log = Log()
    register(log, "n1")
    for name in ("a", "b", "c"):
        _submit(log, name=name)
    log(c.CancelJob(2, 0, 102.0))
    restored = ClusterState()
    restored.restore(log.state.snapshot())
    assert restored.jobs == log.state.jobs
    assert restored.jobs[1].spec.environment is restored.jobs[3].spec.environment
    assert restored.jobs[2].state is JobState.CANCELLED
    assert restored.snapshot() == log.state.snapshot()
    # A replay of the log reaches the same state as well.
    assert log.replay().snapshot() == log.state.snapshot()


def test_interner_table_is_bounded() -> None:
    interner = Interner()
    for i in range(MAX_ENVIRONMENTS + 10):
        assert interner.environment({"K": str(i)}) == {"K": str(i)}
    assert len(interner._envs) <= MAX_ENVIRONMENTS
    assert interner.environment({}) == {}
