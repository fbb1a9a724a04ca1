"""The executor with the process backend: real shims, real job processes."""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from spur.agent.backends import ProcessBackend
from spur.agent.environment import GpuOrdinal
from spur.agent.executor import Executor, UnknownJob
from spur.agent.jobdir import JobDir
from spur.agent.launchspec import LaunchError
from spur.agent.output import stream_output
from spur.agent.systemd import UNIT_END_FILE
from spur.core.clock import Clock, MockWallClock
from spur.rpc.proto import spur_pb2 as pb

ME = pwd.getpwuid(os.getuid()).pw_name
TIMEOUT = 15


def make_request(
    job_id: int,
    work_dir: Path,
    *,
    script: str = "",
    argv: list[str] | None = None,
    tasks: int = 1,
    gpus: list[int] | None = None,
    time_limit: int = -1,
    start_time: float = 0.0,
    uid: int | None = None,
    gid: int | None = None,
    **spec_fields: object,
) -> pb.LaunchJobRequest:
    uid = os.getuid() if uid is None else uid
    return pb.LaunchJobRequest(
        job=pb.JobInfo(
            job_id=job_id,
            user=pwd.getpwuid(uid).pw_name,
            uid=uid,
            gid=os.getgid() if gid is None else gid,
            time_limit_secs=time_limit,
            start_time=start_time,
            spec=pb.JobSpec(
                name=f"job{job_id}",
                script=script,
                argv=argv or [],
                interactive=argv is not None,
                work_dir=str(work_dir),
                **spec_fields,
            ),
            allocation=[pb.NodeAllocation(node="n1", cpus=2, tasks=tasks, gpus=gpus or [])],
        ),
        node="n1",
        batch=argv is None,
    )


class Harness:
    def __init__(self, state_dir: Path, work: Path) -> None:
        self.state_dir = state_dir
        self.work = work
        self.reports: dict[int, pb.JobStatusReport] = {}
        self.report_count = 0

    def on_final(self, report: pb.JobStatusReport) -> None:
        self.reports[report.job_id] = report
        self.report_count += 1

    def make(
        self,
        *,
        clock: Clock | None = None,
        grace: float = 0.5,
        shim_recheck_secs: float | None = None,
        gpu_ordinals: dict[int, GpuOrdinal] | None = None,
    ) -> Executor:
        return Executor(
            shim_recheck_secs=shim_recheck_secs,
            state_dir=self.state_dir,
            node_name="n1",
            backend=ProcessBackend(),
            on_final=self.on_final,
            kill_grace=grace,
            gpu_ordinals=gpu_ordinals or {i: GpuOrdinal("nvidia", i) for i in range(4)},
            cluster_name=lambda: "testcluster",
            clock=clock,
        )

    def kill_leftovers(self) -> None:
        jobs = self.state_dir / "jobs"
        if not jobs.is_dir():
            return
        for path in jobs.iterdir():
            jd = JobDir(path)
            for name, key in (("tasks.json", "pgid"), ("shim.json", "pid")):
                data = jd.read(name) or {}
                if isinstance(data.get(key), int) and data[key] > 1:
                    with contextlib.suppress(OSError):
                        (os.killpg if key == "pgid" else os.kill)(data[key], signal.SIGKILL)


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    work = tmp_path / "work"
    work.mkdir()
    h = Harness(tmp_path / "state", work)
    try:
        yield h
    finally:
        h.kill_leftovers()


@contextlib.asynccontextmanager
async def running(executor: Executor) -> AsyncIterator[Executor]:
    async with trio.open_nursery() as nursery:
        await nursery.start(executor.run)
        yield executor
        nursery.cancel_scope.cancel()


async def wait_for_file(path: Path, text: str = "") -> str:
    while True:
        with contextlib.suppress(OSError):
            content = path.read_text()
            if text in content:
                return content
        await trio.sleep(0.02)


# ---------------------------------------------------------------- batch jobs


async def test_batch_script_output_and_exit_code(harness: Harness) -> None:
    script = "#!/bin/bash\necho hello from $SLURM_JOB_ID on $SLURMD_NODENAME\necho oops >&2\nexit 3\n"
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            assert await ex.launch(make_request(1, harness.work, script=script)) is False
            report = await ex.wait_finished(1)
    assert (report.exit_code, report.signal, report.timed_out, report.cancelled) == (3, 0, False, False)
    assert not report.launch_failed
    assert (harness.work / "slurm-1.out").read_text() == "hello from 1 on n1\noops\n"
    assert harness.reports[1] == report
    assert (harness.state_dir / "jobs" / "1" / "report.json").exists()


class UnitEndBackend(ProcessBackend):
    """The process backend, plus the record the systemd backend's finish() writes from ``systemctl
    show`` of the job's unit: here, a unit systemd ended with ``Result=oom-kill``."""

    async def finish(self, jobdir: JobDir) -> None:
        await super().finish(jobdir)
        jobdir.write(UNIT_END_FILE, {"Result": "oom-kill", "ExecMainCode": "2", "ExecMainStatus": "15"})


async def test_a_unit_ended_by_the_oom_killer_is_reported_out_of_memory(harness: Harness) -> None:
    executor = harness.make()
    executor.backend = UnitEndBackend()
    with trio.fail_after(TIMEOUT):
        async with running(executor) as ex:
            await ex.launch(make_request(1, harness.work, script="#!/bin/sh\nkill -TERM $$\n"))
            report = await ex.wait_finished(1)
    assert report.out_of_memory and (report.signal, report.cancelled) == (15, False)
    assert "killed by the OOM killer (systemd: Result=oom-kill)" in report.message
    async with running(harness.make()) as ex:  # the process backend alone records no unit end
        await ex.launch(make_request(2, harness.work, script="#!/bin/sh\nkill -TERM $$\n"))
        assert not (await ex.wait_finished(2)).out_of_memory


async def test_a_missed_pidfd_wakeup_does_not_strand_the_job(harness: Harness, monkeypatch) -> None:
    import spur.agent.executor as executor_module

    real_wait_readable = trio.lowlevel.wait_readable

    async def never_readable(fd: int) -> None:  # as if the kernel's wake-up of a pidfd were lost
        if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[pidfd]":
            await trio.sleep_forever()
        await real_wait_readable(fd)  # the shim launcher's pipes still work

    monkeypatch.setattr(executor_module.trio.lowlevel, "wait_readable", never_readable)
    with trio.fail_after(TIMEOUT):
        async with running(harness.make(shim_recheck_secs=0.05)) as ex:
            await ex.launch(make_request(1, harness.work, script="#!/bin/sh\nexit 4\n"))
            report = await ex.wait_finished(1)
    assert report.exit_code == 4


async def test_launch_completes_when_its_caller_is_cancelled(harness: Harness) -> None:
    # The controller that sent LaunchJob died mid-call: its handler is cancelled, the job must still be
    # supervised and reported.
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            with trio.CancelScope() as scope:
                scope.cancel()
                await ex.launch(make_request(1, harness.work, script="#!/bin/sh\nexit 5\n"))
            report = await ex.wait_finished(1)
    assert report.exit_code == 5


async def test_separate_stderr_truncate_and_stdin(harness: Harness) -> None:
    (harness.work / "in.txt").write_text("from stdin\n")
    (harness.work / "out-2.log").write_text("old content that must be truncated\n")
    request = make_request(
        2,
        harness.work,
        script="#!/bin/sh\ncat\necho err >&2\n",
        stdout_pattern="out-%j.log",
        stderr_pattern="err-%j.log",
        stdin_path="in.txt",
    )
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(request)
            report = await ex.wait_finished(2)
    assert report.exit_code == 0
    assert (harness.work / "out-2.log").read_text() == "from stdin\n"
    assert (harness.work / "err-2.log").read_text() == "err\n"


async def test_gpus_per_task_gives_each_task_its_own_gpu_on_the_amd_fixture(harness: Harness) -> None:
    """--gpus-per-task=1 on the MI250X fixture node: each task sees one GPU as ROCR_VISIBLE_DEVICES."""
    from spur.agent.discovery import discover_gpus
    from spur.agent.executor import gpu_ordinals_from

    ordinals = gpu_ordinals_from(discover_gpus(Path(__file__).parent / "fixtures" / "sysfs" / "amd-mi250x"))
    show = (
        'echo "$SLURM_LOCALID ${ROCR_VISIBLE_DEVICES-none} ${CUDA_VISIBLE_DEVICES-none}" > gpu-$SLURM_PROCID'
    )
    request = make_request(5, harness.work, argv=["sh", "-c", show], tasks=3, gpus=[0, 1, 2], gpus_per_task=1)
    with trio.fail_after(TIMEOUT):
        async with running(harness.make(gpu_ordinals=ordinals)) as ex:
            await ex.launch(request)
            report = await ex.wait_finished(5)
    assert report.exit_code == 0, report
    seen = [(harness.work / f"gpu-{rank}").read_text().strip() for rank in range(3)]
    assert seen == ["0 0 none", "1 1 none", "2 2 none"]


async def test_job_environment_reaches_the_script(harness: Harness) -> None:
    script = "#!/bin/sh\nenv > env.txt\npwd > pwd.txt\n"
    request = make_request(3, harness.work, script=script, gpus=[0, 2], environment={"MYVAR": "x y"})
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(request)
            await ex.wait_finished(3)
    env = dict(
        line.split("=", 1) for line in (harness.work / "env.txt").read_text().splitlines() if "=" in line
    )
    assert env["SLURM_JOB_ID"] == "3"
    assert env["SLURM_NODELIST"] == "n1"
    assert env["SPUR_JOB_ID"] == "3"
    assert env["CUDA_VISIBLE_DEVICES"] == "0,2"
    assert env["SLURM_CLUSTER_NAME"] == "testcluster"
    assert env["SLURM_PROCID"] == "0"
    assert env["MYVAR"] == "x y"
    assert (harness.work / "pwd.txt").read_text().strip() == str(harness.work)


async def test_script_without_shebang_runs_with_sh(harness: Harness) -> None:
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(make_request(4, harness.work, script="echo plain\n"))
            report = await ex.wait_finished(4)
    assert report.exit_code == 0
    assert (harness.work / "slurm-4.out").read_text() == "plain\n"


async def test_job_killed_by_signal_reports_the_signal(harness: Harness) -> None:
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(make_request(5, harness.work, script="#!/bin/sh\nkill -USR1 $$\nsleep 5\n"))
            report = await ex.wait_finished(5)
    assert (report.exit_code, report.signal, report.cancelled) == (0, signal.SIGUSR1, False)


async def test_job_survives_the_executor_and_orphans_die_with_it(harness: Harness) -> None:
    """Stray background processes of a finished job are killed (Slurm ends them with the job)."""
    script = "#!/bin/sh\nsleep 300 &\necho $! > bg.pid\n"
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(make_request(6, harness.work, script=script))
            await ex.wait_finished(6)
        bg = int((harness.work / "bg.pid").read_text())
        while Path(f"/proc/{bg}").exists() and "Z" not in Path(f"/proc/{bg}/stat").read_text().split()[2]:
            await trio.sleep(0.02)


# ---------------------------------------------------------------- signals, cancel, time limit

TRAP_TERM = """#!/bin/bash
trap 'echo got TERM' TERM
echo ready
while true; do sleep 0.1; done
"""


async def test_cancel_sends_term_then_kill(harness: Harness) -> None:
    with trio.fail_after(TIMEOUT):
        async with running(harness.make(grace=0.5)) as ex:
            await ex.launch(make_request(10, harness.work, script=TRAP_TERM))
            await wait_for_file(harness.work / "slurm-10.out", "ready")
            ex.signal(10, 0)
            report = await ex.wait_finished(10)
    assert report.cancelled and not report.timed_out
    assert report.signal == signal.SIGKILL
    assert "got TERM" in (harness.work / "slurm-10.out").read_text()


async def test_signal_is_delivered_without_cancelling(harness: Harness) -> None:
    script = "#!/bin/bash\ntrap 'echo got USR2; exit 7' USR2\necho ready\nwhile true; do sleep 0.1; done\n"
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(make_request(11, harness.work, script=script))
            await wait_for_file(harness.work / "slurm-11.out", "ready")
            ex.signal(11, signal.SIGUSR2, batch_only=True)  # scancel -b: the batch shell
            report = await ex.wait_finished(11)
            ex.signal(11, signal.SIGUSR2, batch_only=True)  # finished: a no-op
            with pytest.raises(UnknownJob):
                ex.signal(999, 0)
            await ex.launch(make_request(12, harness.work, script=TRAP_TERM))
            with pytest.raises(ValueError, match="invalid signal"):
                ex.signal(12, 4096)
            ex.signal(12, 0)
            await ex.wait_finished(12)
    assert (report.exit_code, report.signal, report.cancelled) == (7, 0, False)
    assert "got USR2" in (harness.work / "slurm-11.out").read_text()


async def test_time_limit_from_start_time(harness: Harness) -> None:
    """The limit counts from the job's start time, not from the launch."""
    request = make_request(13, harness.work, script=TRAP_TERM, time_limit=31)
    request.job.start_time = time.time() - 30  # 1 s left
    with trio.fail_after(TIMEOUT):
        async with running(harness.make(grace=0.3)) as ex:
            await ex.launch(request)
            report = await ex.wait_finished(13)
    assert report.timed_out and not report.cancelled
    assert report.signal == signal.SIGKILL  # the script ignores TERM
    assert "got TERM" in (harness.work / "slurm-13.out").read_text()


def test_long_time_limit_with_mock_clock(harness: Harness) -> None:
    # Trio time only moves when every task has been idle for 0.2 s of real time, so the real job
    # process gets to start (and to die of SIGTERM) between jumps.
    clock = trio.testing.MockClock(autojump_threshold=0.2)
    wall = MockWallClock()

    async def scenario() -> pb.JobStatusReport:
        with trio.fail_after(24 * 3600):  # mock seconds; still bounds the test in real time
            async with running(harness.make(clock=wall, grace=600)) as ex:
                request = make_request(14, harness.work, script="#!/bin/sh\necho ready\nsleep 100\n")
                request.job.time_limit_secs = 2 * 3600
                request.job.start_time = wall.wall()
                await ex.launch(request)
                report = await ex.wait_finished(14)
                assert trio.current_time() >= 2 * 3600
                return report

    report = trio.run(scenario, clock=clock)
    assert report.timed_out
    assert report.signal == signal.SIGTERM


# ---------------------------------------------------------------- interactive jobs


async def test_interactive_tasks_stream_output_and_exit(harness: Harness) -> None:
    argv = [
        "sh",
        "-c",
        "echo out-$SLURM_PROCID-$SLURM_LOCALID; echo err-$SLURM_PROCID >&2; exit $((SLURM_PROCID+2))",
    ]
    request = make_request(20, harness.work, argv=argv, tasks=2)
    request.first_task = 4
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(request)
            chunks = [c async for c in stream_output(ex.get(20), follow=True, poll_interval=0.02)]
    data: dict[tuple[int, str], bytes] = {}
    for c in chunks[:-3]:
        data[(c.task, c.stream)] = data.get((c.task, c.stream), b"") + c.data
    # Each task's own status precedes the node's (srun names every failed task, as Slurm does).
    assert [(c.stream, c.task, c.exit_code, c.signal) for c in chunks[-3:-1]] == [
        ("task_exit", 4, 6, 0),
        ("task_exit", 5, 7, 0),
    ]
    assert data == {
        (4, "stdout"): b"out-4-0\n",
        (4, "stderr"): b"err-4\n",
        (5, "stdout"): b"out-5-1\n",
        (5, "stderr"): b"err-5\n",
    }
    assert chunks[-1].stream == "exit"
    assert (chunks[-1].exit_code, chunks[-1].signal) == (7, 0)  # max of 6 and 7


async def test_interactive_missing_command(harness: Harness) -> None:
    request = make_request(21, harness.work, argv=["/nonexistent/prog"], tasks=1)
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(request)
            report = await ex.wait_finished(21)
            chunks = [c async for c in stream_output(ex.get(21), follow=False)]
    assert report.exit_code == 127 and report.launch_failed
    assert "/nonexistent/prog" in report.message
    assert b"No such file" in b"".join(c.data for c in chunks if c.stream == "stderr")


# ---------------------------------------------------------------- idempotency and launch failures


async def test_launch_is_idempotent(harness: Harness) -> None:
    script = "#!/bin/sh\necho ran >> runs.txt\n"
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            request = make_request(30, harness.work, script=script)
            assert await ex.launch(request) is False
            assert await ex.launch(request) is True
            await ex.wait_finished(30)
            assert await ex.launch(request) is True
            ex.mark_reported(30)  # acknowledged: the job dir goes, the id is still remembered
            assert not (harness.state_dir / "jobs" / "30").exists()
            assert await ex.launch(request) is True
    assert (harness.work / "runs.txt").read_text() == "ran\n"
    assert harness.report_count == 1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"stdout_pattern": "missing-dir/out-%j"}, "missing-dir of the output file"),
        ({"stderr_pattern": "/nonexistent/err"}, "/nonexistent of the error file"),
        ({"stdin_path": "nope.txt"}, "input file .*nope.txt does not exist"),
    ],
)
async def test_user_caused_launch_failures(harness: Harness, fields: dict[str, str], message: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            with pytest.raises(LaunchError, match=message):
                await ex.launch(make_request(40, harness.work, script="#!/bin/sh\n", **fields))
            report = await ex.wait_finished(40)
            assert await ex.launch(make_request(40, harness.work, script="#!/bin/sh\n")) is True
    assert report.launch_failed and report.exit_code == 1
    assert harness.reports[40].message == report.message


async def test_missing_work_dir_is_a_launch_failure(harness: Harness) -> None:
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            with pytest.raises(LaunchError, match="working directory .*/gone does not exist"):
                await ex.launch(make_request(41, harness.work / "gone", script="#!/bin/sh\n"))
    assert harness.reports[41].launch_failed


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")
async def test_root_agent_runs_job_as_its_user(harness: Harness) -> None:
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody'")
    top = Path(tempfile.mkdtemp(prefix="spur-agent-test-", dir="/tmp"))
    try:
        os.chmod(top, 0o755)
        work = top / "work"
        work.mkdir()
        os.chmod(work, 0o777)
        h = Harness(top / "state", work)
        request = make_request(
            50, work, script="#!/bin/sh\nid -u\nid -g\n", uid=nobody.pw_uid, gid=nobody.pw_gid
        )
        with trio.fail_after(TIMEOUT):
            async with running(h.make()) as ex:
                await ex.launch(request)
                report = await ex.wait_finished(50)
        assert report.exit_code == 0, (work / "slurm-50.out").read_text()
        out = work / "slurm-50.out"
        assert out.read_text().split() == [str(nobody.pw_uid), str(nobody.pw_gid)]
        assert out.stat().st_uid == nobody.pw_uid
    finally:
        import shutil

        shutil.rmtree(top, ignore_errors=True)


# ---------------------------------------------------------------- persistence and re-adoption

WAIT_RELEASE = "#!/bin/sh\necho started\nwhile [ ! -e release ]; do sleep 0.05; done\necho released\nexit 5\n"


async def test_running_job_is_adopted_by_a_new_executor(harness: Harness) -> None:
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(make_request(60, harness.work, script=WAIT_RELEASE))
            await wait_for_file(harness.work / "slurm-60.out", "started")
        assert harness.report_count == 0  # stopping the agent did not end the job
        async with running(harness.make()) as ex2:
            assert ex2.running_job_ids() == [60]
            assert await ex2.launch(make_request(60, harness.work, script=WAIT_RELEASE)) is True
            (harness.work / "release").touch()
            report = await ex2.wait_finished(60)
    assert report.exit_code == 5
    assert (harness.work / "slurm-60.out").read_text() == "started\nreleased\n"


async def test_job_that_ended_while_agent_was_down_is_reported(harness: Harness) -> None:
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(make_request(61, harness.work, script=WAIT_RELEASE))
            await wait_for_file(harness.work / "slurm-61.out", "started")
        (harness.work / "release").touch()
        await wait_for_file(harness.work / "slurm-61.out", "released")
        while not (harness.state_dir / "jobs" / "61" / "exit.json").exists():
            await trio.sleep(0.02)
        async with running(harness.make()) as ex2:
            report = await ex2.wait_finished(61)
    assert report.exit_code == 5 and not report.message


async def test_vanished_shim_without_exit_status_is_a_failure(harness: Harness) -> None:
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(make_request(62, harness.work, script=WAIT_RELEASE))
            await wait_for_file(harness.work / "slurm-62.out", "started")
        jd = JobDir(harness.state_dir / "jobs" / "62")
        shim_pid = jd.read("shim.json")["pid"]  # type: ignore[index]
        while (tasks := jd.read("tasks.json")) is None:  # written by the shim just after the job starts
            await trio.sleep(0.02)
        os.kill(shim_pid, signal.SIGKILL)
        os.killpg(tasks["pgid"], signal.SIGKILL)
        while Path(f"/proc/{shim_pid}").exists() and "Z" not in Path(f"/proc/{shim_pid}/stat").read_text():
            await trio.sleep(0.02)
        async with running(harness.make()) as ex2:
            report = await ex2.wait_finished(62)
    assert report.exit_code == 1
    assert "ended without recording an exit status" in report.message


async def test_unacknowledged_report_is_sent_again_after_restart(harness: Harness) -> None:
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(make_request(63, harness.work, script="#!/bin/sh\nexit 4\n"))
            first = await ex.wait_finished(63)
        harness.reports.clear()
        async with running(harness.make()) as ex2:
            assert harness.reports[63] == first  # handed to the reporter again on adoption
            ex2.mark_reported(63)
        harness.reports.clear()
        async with running(harness.make()) as ex3:
            assert harness.reports == {}
            assert ex3.jobs() == []
            assert await ex3.launch(make_request(63, harness.work, script="#!/bin/sh\n")) is True


async def test_termination_in_progress_continues_after_restart(harness: Harness) -> None:
    with trio.fail_after(TIMEOUT):
        async with running(harness.make(grace=0.5)) as ex:
            await ex.launch(make_request(64, harness.work, script=TRAP_TERM))
            await wait_for_file(harness.work / "slurm-64.out", "ready")
            ex.signal(64, 0)
            await wait_for_file(harness.work / "slurm-64.out", "got TERM")
        async with running(harness.make(grace=0.5)) as ex2:
            report = await ex2.wait_finished(64)
    assert report.cancelled and report.signal == signal.SIGKILL


async def test_interactive_output_kept_until_streamed(harness: Harness) -> None:
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(make_request(65, harness.work, argv=["echo", "hi"], tasks=1))
            await ex.wait_finished(65)
            ex.mark_reported(65)
            assert (harness.state_dir / "jobs" / "65" / "task-0.out").read_bytes() == b"hi\n"
            chunks = [c async for c in stream_output(ex.get(65), follow=True)]
            assert [c.stream for c in chunks] == ["stdout", "task_exit", "exit"]
            ex.mark_streamed(65)
            assert not (harness.state_dir / "jobs" / "65").exists()


# ---------------------------------------------------------------- the shim launcher (process backend)


async def test_shims_are_forked_detached_from_spurd_by_the_launcher(harness: Harness) -> None:
    """The shim is the launcher's fork, in a session of its own, holding only its stdio; the tasks it
    starts are waited for (the launcher's SIGCHLD disposition is not inherited).

    The shim closes the script's stdio handles only after the script started, and then writes its
    records (each write opens a file for a moment), so the script looks at the shim's descriptors until
    they are its stdio alone, for up to 5 s: a descriptor the shim kept would stay in every look."""
    script = (
        "#!/bin/sh\ncat /proc/$PPID/stat > shim.stat\n"
        "for i in $(seq 250); do\n"
        "  ls /proc/$PPID/fd > shim.fds; [ \"$(tr '\\n' ' ' < shim.fds)\" = '0 1 2 ' ] && break; sleep 0.02\n"
        "done\nsleep 0.2; exit 6\n"
    )
    executor = harness.make()
    with trio.fail_after(TIMEOUT):
        async with running(executor) as ex:
            await ex.launch(make_request(1, harness.work, script=script))
            report = await ex.wait_finished(1)
    assert report.exit_code == 6
    stat = (harness.work / "shim.stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    shim_pid, parent, session = int(stat.split()[0]), int(fields[1]), int(fields[3])
    launcher = executor.backend._launcher  # type: ignore[attr-defined]
    assert launcher is not None and parent == launcher.pid != os.getpid()
    assert session == shim_pid  # its own session
    # its stdio only: nothing of the launcher's pipes or of spurd's descriptors
    assert sorted(int(fd) for fd in (harness.work / "shim.fds").read_text().split()) == [0, 1, 2]


async def test_a_dead_launcher_is_replaced_at_the_next_launch(harness: Harness) -> None:
    executor = harness.make()
    with trio.fail_after(TIMEOUT):
        async with running(executor) as ex:
            await ex.launch(make_request(1, harness.work, script="#!/bin/sh\nexit 0\n"))
            assert (await ex.wait_finished(1)).exit_code == 0
            first = executor.backend._launcher  # type: ignore[attr-defined]
            first.kill()
            await first.wait()
            await ex.launch(make_request(2, harness.work, script="#!/bin/sh\nexit 4\n"))
            assert (await ex.wait_finished(2)).exit_code == 4
            assert executor.backend._launcher is not first  # type: ignore[attr-defined]


async def test_a_job_outlives_its_launcher(harness: Harness) -> None:
    """Killing the launcher (as a restart of spurd ends it) leaves running shims alone."""
    executor = harness.make()
    with trio.fail_after(TIMEOUT):
        async with running(executor) as ex:
            await ex.launch(make_request(1, harness.work, script="#!/bin/sh\necho started > s; sleep 0.5; exit 3\n"))
            await wait_for_file(harness.work / "s", "started")
            executor.backend._launcher.kill()  # type: ignore[attr-defined]
            assert (await ex.wait_finished(1)).exit_code == 3


def test_the_launcher_refuses_what_is_not_a_job_directory_and_ends_with_its_input(tmp_path: Path) -> None:
    import subprocess
    import sys

    from spur.agent.backends import shim_environment

    proc = subprocess.Popen(
        [sys.executable, "-S", "-m", "spur.agent.shim_launcher"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=shim_environment(),
    )
    out, _ = proc.communicate(f"{tmp_path}/nope\nrelative/path\n".encode(), timeout=TIMEOUT)
    assert out.decode().splitlines() == [
        f"error no job directory at {tmp_path}/nope",
        "error no job directory at relative/path",
    ]
    assert proc.returncode == 0
