"""Job steps, suspend/resume, --signal, requeue and array tasks in the executor (real shims and processes)."""

from __future__ import annotations

import os
import pwd
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing
from test_agent_executor import TRAP_TERM, Harness, make_request, running, wait_for_file

from spur.agent.executor import UnknownJob
from spur.agent.jobdir import JobDir
from spur.agent.output import stream_output
from spur.core.clock import MockWallClock
from spur.rpc.proto import spur_pb2 as pb

TIMEOUT = 15


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    work = tmp_path / "work"
    work.mkdir()
    h = Harness(tmp_path / "state", work)
    try:
        yield h
    finally:
        h.kill_leftovers()


ENV_DUMP = [
    "sh",
    "-c",
    'env > "env-$SLURM_PROCID.txt"; echo $$ > "pid-$SLURM_PROCID.txt"; exit $SLURM_PROCID',
]


def step_request(
    job_id: int,
    step_id: int,
    work: Path,
    argv: list[str],
    *,
    tasks: int = 1,
    first_task: int = 0,
    other_node_tasks: int = 0,
    job_fields: dict[str, object] | None = None,
    **step_fields: object,
) -> pb.LaunchStepRequest:
    """A step of job ``job_id`` with ``tasks`` tasks on n1 (after ``other_node_tasks`` on n0 when > 0)."""
    me = pwd.getpwuid(os.getuid())
    job_alloc = [pb.NodeAllocation(node="n1", cpus=4, tasks=1)]
    step_alloc = [pb.NodeAllocation(node="n1", cpus=4, tasks=tasks)]
    if other_node_tasks:
        job_alloc.insert(0, pb.NodeAllocation(node="n0", cpus=4, tasks=1))
        step_alloc.insert(0, pb.NodeAllocation(node="n0", cpus=4, tasks=other_node_tasks))
    job = pb.JobInfo(
        job_id=job_id,
        user=me.pw_name,
        uid=me.pw_uid,
        gid=os.getgid(),
        state="RUNNING",
        time_limit_secs=-1,
        spec=pb.JobSpec(name=f"job{job_id}", work_dir=str(work), **(job_fields or {})),
        allocation=job_alloc,
    )
    step = pb.StepInfo(
        step_id=step_id,
        spec=pb.StepSpec(argv=argv, name=os.path.basename(argv[0]), **step_fields),
        state="RUNNING",
        allocation=step_alloc,
    )
    return pb.LaunchStepRequest(job=job, step=step, node="n1", first_task=first_task)


def _env_file(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def _proc_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


async def _task_pgid(jobdir: JobDir) -> int:
    while not (tasks := jobdir.read("tasks.json")):
        await trio.sleep(0.01)
    return int(tasks["pgid"])


async def _wait_state(pid: int, states: str) -> str:
    while (state := _proc_state(pid)) not in states:
        await trio.sleep(0.02)
    return state


# ---------------------------------------------------------------- steps


async def test_step_tasks_get_ranks_and_step_environment(harness: Harness) -> None:
    request = step_request(
        70,
        3,
        harness.work,
        ENV_DUMP,
        tasks=2,
        first_task=2,
        other_node_tasks=2,
        environment={"FROM_SRUN": "1"},
    )
    request.job.spec.environment["FROM_SBATCH"] = "1"
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            assert await ex.launch_step(request) is False
            assert await ex.launch_step(request) is True  # idempotent per (job, step)
            report = await ex.wait_finished(70, 3)
    assert report.HasField("step_id") and report.step_id == 3
    assert (report.job_id, report.node, report.exit_code, report.signal) == (70, "n1", 3, 0)
    assert harness.reports[70] == report
    for localid, rank in enumerate((2, 3)):
        env = _env_file(harness.work / f"env-{rank}.txt")
        expected = {
            "SLURM_JOB_ID": "70",
            "SLURM_STEP_ID": "3",
            "SLURM_STEPID": "3",
            "SLURM_PROCID": str(rank),
            "SLURM_LOCALID": str(localid),
            "SLURM_NODEID": "1",
            "SLURM_NTASKS": "4",
            "SLURM_STEP_NUM_TASKS": "4",
            "SLURM_STEP_NUM_NODES": "2",
            "SLURM_STEP_NODELIST": "n[0-1]",
            "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
            "SLURM_JOB_NODELIST": "n[0-1]",
            "SPUR_STEP_ID": "3",
            "FROM_SRUN": "1",
        }
        assert {k: env.get(k) for k in expected} == expected
        assert "FROM_SBATCH" not in env  # the step's environment is srun's, not the batch job's
        assert env["SLURM_TASK_PID"] == (harness.work / f"pid-{rank}.txt").read_text().strip()


async def test_step_output_files_per_task_in_append_mode(harness: Harness) -> None:
    """submitit's form: sbatch --open-mode=append, srun --output %j_%t_log.out --error %j_%t_log.err."""
    (harness.work / "71_0_log.out").write_text("earlier attempt\n")
    request = step_request(
        71,
        0,
        harness.work,
        ["sh", "-c", "echo out $SLURM_PROCID; echo err $SLURM_PROCID >&2"],
        tasks=2,
        job_fields={"open_mode": "append"},
        stdout_pattern="%j_%t_log.out",
        stderr_pattern="%j_%t_log.err",
        unbuffered=True,
    )
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch_step(request)
            report = await ex.wait_finished(71, 0)
            chunks = [c async for c in stream_output(ex.get(71, 0), follow=True)]
    assert report.exit_code == 0
    assert (harness.work / "71_0_log.out").read_text() == "earlier attempt\nout 0\n"
    assert (harness.work / "71_1_log.out").read_text() == "out 1\n"
    assert (harness.work / "71_1_log.err").read_text() == "err 1\n"
    # Nothing captured (it all went to the files): the tasks' statuses, then the node's.
    assert [(c.stream, c.task) for c in chunks] == [("task_exit", 0), ("task_exit", 1), ("exit", 0)]


async def test_step_shared_output_file_truncated_once(harness: Harness) -> None:
    (harness.work / "shared.out").write_text("stale content that must go\n")
    request = step_request(
        72, 1, harness.work, ["sh", "-c", "echo task $SLURM_PROCID"], tasks=2, stdout_pattern="shared.out"
    )
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch_step(request)
            await ex.wait_finished(72, 1)
    assert sorted((harness.work / "shared.out").read_text().splitlines()) == ["task 0", "task 1"]


async def test_step_output_is_captured_for_streaming(harness: Harness) -> None:
    request = step_request(73, 0, harness.work, ["sh", "-c", "echo hi $SLURM_PROCID; echo oops >&2"], tasks=2)
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch_step(request)
            chunks = [c async for c in stream_output(ex.get(73, 0), follow=True)]
    data = {(c.task, c.stream): c.data for c in chunks if c.stream not in ("exit", "task_exit")}
    assert data == {
        (0, "stdout"): b"hi 0\n",
        (1, "stdout"): b"hi 1\n",
        (0, "stderr"): b"oops\n",
        (1, "stderr"): b"oops\n",
    }
    assert chunks[-1].stream == "exit" and chunks[-1].exit_code == 0


async def test_step_missing_command(harness: Harness) -> None:
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch_step(step_request(74, 0, harness.work, ["no-such-program-xyz"]))
            report = await ex.wait_finished(74, 0)
    assert report.exit_code == 127 and report.launch_failed and report.step_id == 0
    assert "no-such-program-xyz" in report.message


async def test_signal_only_the_step_then_cancel_the_job(harness: Harness) -> None:
    batch = make_request(75, harness.work, script=TRAP_TERM)
    with trio.fail_after(TIMEOUT):
        async with running(harness.make(grace=0.3)) as ex:
            await ex.launch(batch)
            await wait_for_file(harness.work / "slurm-75.out", "ready")
            await ex.launch_step(step_request(75, 0, harness.work, ["sleep", "60"]))
            await ex.launch_step(step_request(75, 1, harness.work, ["sleep", "60"]))
            ex.signal(75, 0, step_id=0)
            step0 = await ex.wait_finished(75, 0)
            assert not ex.get(75).finished.is_set() and not ex.get(75, 1).finished.is_set()
            with pytest.raises(UnknownJob):
                ex.signal(75, 0, step_id=9)
            ex.signal(75, 0)  # the job: batch script and remaining steps
            step1 = await ex.wait_finished(75, 1)
            job = await ex.wait_finished(75)
    assert step0.cancelled and step0.signal == signal.SIGTERM and step0.step_id == 0
    assert step1.cancelled and step1.step_id == 1
    assert job.cancelled and not job.HasField("step_id")


async def test_batch_only_signal_and_steps_end_with_the_batch_script(harness: Harness) -> None:
    script = "#!/bin/bash\ntrap 'echo got USR1; exit 4' USR1\necho ready\nwhile true; do sleep 0.05; done\n"
    with trio.fail_after(TIMEOUT):
        async with running(harness.make(grace=0.3)) as ex:
            await ex.launch(make_request(76, harness.work, script=script))
            await wait_for_file(harness.work / "slurm-76.out", "ready")
            await ex.launch_step(step_request(76, 0, harness.work, ["sleep", "60"]))
            ex.signal(76, signal.SIGUSR1, batch_only=True)
            job = await ex.wait_finished(76)
            step = await ex.wait_finished(76, 0)
    assert job.exit_code == 4 and not job.cancelled
    assert step.cancelled  # the job ended, so its step was ended too


async def test_steps_of_an_allocation_only_job_are_cancelled_with_it(harness: Harness) -> None:
    with trio.fail_after(TIMEOUT):
        async with running(harness.make(grace=0.3)) as ex:
            await ex.launch_step(step_request(77, 0, harness.work, ["sleep", "60"]))
            assert ex.running_job_ids() == [77]
            with pytest.raises(UnknownJob):
                ex.signal(77, 0, batch_only=True)  # there is no batch script here
            ex.signal(77, 0)
            report = await ex.wait_finished(77, 0)
    assert report.cancelled and report.step_id == 0


async def test_running_step_is_adopted_after_restart(harness: Harness) -> None:
    request = step_request(
        78, 2, harness.work, ["sh", "-c", "echo up; while [ ! -e go ]; do sleep 0.05; done"]
    )
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch_step(request)
            while (
                not list((harness.state_dir / "jobs" / "78.2").glob("task-0.out"))
                or not (harness.state_dir / "jobs" / "78.2" / "task-0.out").read_text()
            ):
                await trio.sleep(0.02)
        assert harness.report_count == 0
        async with running(harness.make()) as ex2:
            assert ex2.running_job_ids() == [78]
            assert await ex2.launch_step(request) is True
            (harness.work / "go").touch()
            report = await ex2.wait_finished(78, 2)
            ex2.mark_reported(78, 2)
            chunks = [c async for c in stream_output(ex2.get(78, 2), follow=True)]
            ex2.mark_streamed(78, 2)
            assert not (harness.state_dir / "jobs" / "78.2").exists()
            assert await ex2.launch_step(request) is True  # remembered after cleanup
    assert report.step_id == 2 and report.exit_code == 0
    assert b"".join(c.data for c in chunks) == b"up\n"


# ---------------------------------------------------------------- suspend, resume, requeue


def test_suspended_time_does_not_count_toward_the_time_limit(harness: Harness) -> None:
    clock = trio.testing.MockClock(autojump_threshold=0.2)  # see test_long_time_limit_with_mock_clock
    wall = MockWallClock()

    async def scenario() -> tuple[pb.JobStatusReport, float, list[str]]:
        states = []
        with trio.fail_after(24 * 3600):
            async with running(harness.make(clock=wall, grace=600)) as ex:
                request = make_request(80, harness.work, script="#!/bin/sh\necho ready\nexec sleep 100000\n")
                request.job.time_limit_secs = 2 * 3600
                request.job.start_time = wall.wall()
                await ex.launch(request)
                await wait_for_file(harness.work / "slurm-80.out", "ready")
                step = step_request(80, 0, harness.work, ["sleep", "100000"])
                step.job.CopyFrom(request.job)
                await ex.launch_step(step)
                pids = [await _task_pgid(ex.get(80).jobdir), await _task_pgid(ex.get(80, 0).jobdir)]
                await trio.sleep(3600)
                ex.suspend(80)
                states += [await _wait_state(pid, "T") for pid in pids]
                await trio.sleep(5 * 3600)  # suspended well past the 2 h limit
                assert not ex.get(80).finished.is_set()
                ex.resume(80)
                states += [await _wait_state(pid, "SR") for pid in pids]
                report = await ex.wait_finished(80)
                step = await ex.wait_finished(80, 0)
                assert step.timed_out
                return report, trio.current_time(), states

    report, ended, states = trio.run(scenario, clock=clock)
    assert report.timed_out and report.signal == signal.SIGTERM
    assert states[:2] == ["T", "T"] and all(s in "SR" for s in states[2:])
    assert 7 * 3600 <= ended < 7 * 3600 + 60  # 2 h of limit + 5 h suspended


async def test_requeue_kills_and_reports_requeued(harness: Harness) -> None:
    with trio.fail_after(TIMEOUT):
        async with running(harness.make(grace=0.3)) as ex:
            await ex.launch(make_request(81, harness.work, script="#!/bin/sh\necho ready\nexec sleep 60\n"))
            await wait_for_file(harness.work / "slurm-81.out", "ready")
            ex.requeue(81)
            report = await ex.wait_finished(81)
    assert report.message == "requeued" and not report.cancelled and not report.timed_out


# ---------------------------------------------------------------- --signal


async def test_batch_signal_spec_reaches_only_the_batch_script(harness: Harness) -> None:
    script = "#!/bin/bash\ntrap 'echo got USR2; exit 9' USR2\necho ready\nwhile true; do sleep 0.05; done\n"
    request = make_request(82, harness.work, script=script, time_limit=31, signal="B:USR2@1")
    request.job.start_time = time.time() - 29  # limit in 2 s, warning in 1 s
    with trio.fail_after(TIMEOUT):
        async with running(harness.make(grace=0.3)) as ex:
            await ex.launch(request)
            step = step_request(
                82, 0, harness.work, ["sh", "-c", "trap 'exit 5' USR2; while true; do sleep 0.05; done"]
            )
            step.job.CopyFrom(request.job)
            await ex.launch_step(step)
            report = await ex.wait_finished(82)
            step_report = await ex.wait_finished(82, 0)
    assert report.exit_code == 9 and not report.timed_out
    assert "got USR2" in (harness.work / "slurm-82.out").read_text()
    assert step_report.cancelled and step_report.exit_code != 5  # ended with the job, never got USR2


async def test_signal_spec_without_b_reaches_steps_not_the_batch_script(harness: Harness) -> None:
    script = "#!/bin/bash\ntrap 'echo batch got USR2' USR2\necho ready\nwhile true; do sleep 0.05; done\n"
    request = make_request(83, harness.work, script=script, time_limit=31, signal="USR2@1")
    request.job.start_time = time.time() - 29
    step = step_request(
        83, 0, harness.work, ["sh", "-c", "trap 'exit 5' USR2; while true; do sleep 0.05; done"]
    )
    step.job.CopyFrom(request.job)
    with trio.fail_after(TIMEOUT):
        async with running(harness.make(grace=0.3)) as ex:
            await ex.launch(request)
            await wait_for_file(harness.work / "slurm-83.out", "ready")
            await ex.launch_step(step)
            step_report = await ex.wait_finished(83, 0)
            report = await ex.wait_finished(83)
    assert step_report.exit_code == 5 and not step_report.timed_out
    assert report.timed_out
    assert "batch got USR2" not in (harness.work / "slurm-83.out").read_text()


# ---------------------------------------------------------------- arrays and open mode


async def test_array_task_environment_and_default_output(harness: Harness) -> None:
    request = make_request(93, harness.work, script="#!/bin/sh\nenv\n", array="0-9:3%2")
    request.job.array_job_id = 90
    request.job.array_task_id = 9
    request.job.array_task_count = 4
    request.job.array_task_min = 0
    request.job.array_task_max = 9
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(request)
            await ex.wait_finished(93)
    env = _env_file(harness.work / "slurm-90_9.out")
    assert {k: v for k, v in env.items() if k.startswith("SLURM_ARRAY_")} == {
        "SLURM_ARRAY_JOB_ID": "90",
        "SLURM_ARRAY_TASK_ID": "9",
        "SLURM_ARRAY_TASK_COUNT": "4",
        "SLURM_ARRAY_TASK_MIN": "0",
        "SLURM_ARRAY_TASK_MAX": "9",
        "SLURM_ARRAY_TASK_STEP": "3",
    }
    assert env["SLURM_JOB_ID"] == "93"


async def test_batch_output_pattern_with_array_ids_and_append_mode(harness: Harness) -> None:
    (harness.work / "log-90_1.out").write_text("attempt 1\n")
    request = make_request(
        91,
        harness.work,
        script="#!/bin/sh\necho attempt 2\n",
        stdout_pattern="log-%A_%a.out",
        open_mode="append",
    )
    request.job.array_job_id = 90
    request.job.array_task_id = 1
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(request)
            await ex.wait_finished(91)
    assert (harness.work / "log-90_1.out").read_text() == "attempt 1\nattempt 2\n"
