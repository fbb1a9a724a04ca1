"""spurd as a real process, talking gRPC on loopback to a fake controller run by the test."""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio

from spur.agent.jobdir import JobDir
from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import CallContext, Server
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import agent_stub

TIMEOUT = 20
REPO = Path(__file__).resolve().parent.parent


@dataclass
class FakeController:
    """Controller side of the agent protocol: records what the agent says, acknowledges everything."""

    registrations: list[pb.RegisterNodeRequest] = field(default_factory=list)
    heartbeats: list[pb.HeartbeatRequest] = field(default_factory=list)
    reports: list[pb.JobStatusReport] = field(default_factory=list)
    jobs: dict[int, pb.JobInfo] = field(default_factory=dict)  # what GetJobs answers
    changed: trio.Event = field(default_factory=trio.Event)

    def _notify(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def RegisterNode(
        self, request: pb.RegisterNodeRequest, context: CallContext
    ) -> pb.RegisterNodeResponse:
        self.registrations.append(request)
        self._notify()
        return pb.RegisterNodeResponse(heartbeat_interval_secs=1, cluster_name="fakecluster")

    async def Heartbeat(self, request: pb.HeartbeatRequest, context: CallContext) -> pb.HeartbeatResponse:
        self.heartbeats.append(request)
        self._notify()
        return pb.HeartbeatResponse(known=True)

    async def ReportJobStatus(self, request: pb.JobStatusReport, context: CallContext) -> pb.Empty:
        self.reports.append(request)
        self._notify()
        return pb.Empty()

    async def GetJobs(self, request: pb.GetJobsRequest, context: CallContext) -> pb.GetJobsResponse:
        return pb.GetJobsResponse(jobs=[self.jobs[i] for i in request.job_ids if i in self.jobs])

    async def wait_until(self, predicate) -> None:  # type: ignore[no-untyped-def]
        while not predicate():
            await self.changed.wait()


@dataclass
class Cluster:
    controller: FakeController
    controller_port: int
    state_dir: Path
    work: Path
    log: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start_agent(self, *extra: str) -> subprocess.Popen[bytes]:
        cmd = [
            sys.executable,
            "-m",
            "spur.agent.main",
            "-D",
            "--controller",
            f"http://127.0.0.1:{self.controller_port}",
            "--listen",
            "127.0.0.1:0",
            "--name",
            "node1",
            "--state-dir",
            str(self.state_dir),
            "--backend",
            "process",
            "--cpus",
            "4",
            "--memory-mb",
            "2048",
            "--kill-grace",
            "1",
            *extra,
        ]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with open(self.log, "ab") as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=REPO)
        self.procs.append(proc)
        return proc

    async def registered(self, count: int) -> pb.RegisterNodeRequest:
        await self.controller.wait_until(lambda: len(self.controller.registrations) >= count)
        return self.controller.registrations[count - 1]

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        jobs = self.state_dir / "jobs"
        for path in jobs.iterdir() if jobs.is_dir() else ():
            for name, key in (("tasks.json", "pgid"), ("shim.json", "pid")):
                value = (JobDir(path).read(name) or {}).get(key)
                if isinstance(value, int) and value > 1:
                    with contextlib.suppress(OSError):
                        (os.killpg if key == "pgid" else os.kill)(value, signal.SIGKILL)


@pytest.fixture
async def cluster(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Cluster]:
    controller = FakeController()
    server = Server()
    server.add_service(pb.DESCRIPTOR.services_by_name["Controller"], controller)
    port = await nursery.start(server.serve, "127.0.0.1", 0)
    work = tmp_path / "work"
    work.mkdir()
    c = Cluster(controller, port, tmp_path / "state", work, tmp_path / "spurd.log")
    try:
        yield c
    finally:
        c.stop_all()


@contextlib.asynccontextmanager
async def agent(port: int, metadata: dict[str, str] | None = None) -> AsyncIterator[object]:
    provider = (lambda: metadata) if metadata is not None else None
    async with open_channel(f"127.0.0.1:{port}", connect_timeout=5, metadata_provider=provider) as ch:
        yield agent_stub(ch)


def job_request(job_id: int, work: Path, *, script: str = "", argv: list[str] | None = None, tasks: int = 1):
    me = pwd.getpwuid(os.getuid())
    return pb.LaunchJobRequest(
        job=pb.JobInfo(
            job_id=job_id,
            user=me.pw_name,
            uid=me.pw_uid,
            gid=os.getgid(),
            time_limit_secs=-1,
            spec=pb.JobSpec(
                name=f"j{job_id}",
                script=script,
                argv=argv or [],
                interactive=argv is not None,
                work_dir=str(work),
            ),
            allocation=[pb.NodeAllocation(node="node1", cpus=2, tasks=tasks)],
        ),
        node="node1",
        batch=argv is None,
    )


async def wait_for_text(path: Path, text: str) -> None:
    while True:
        with contextlib.suppress(OSError):
            if text in path.read_text():
                return
        await trio.sleep(0.02)


async def wait_for_tasks(job_dir: JobDir) -> dict:
    """The shim writes tasks.json just after the job starts: poll for it (inside the caller's deadline)."""
    while (tasks := job_dir.read("tasks.json")) is None:
        await trio.sleep(0.02)
    return tasks  # type: ignore[return-value]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def log_on_failure(cluster: Cluster) -> Iterator[None]:
    yield
    if cluster.log.exists():
        print(cluster.log.read_text())


WAIT_RELEASE = "#!/bin/sh\necho started\nwhile [ ! -e release ]; do sleep 0.05; done\necho done\nexit 3\n"


async def test_registration_launch_and_report(cluster: Cluster, log_on_failure: None) -> None:
    with trio.fail_after(TIMEOUT):
        cluster.start_agent()
        reg = await cluster.registered(1)
        assert (reg.name, reg.cpus, reg.memory_mb, reg.address) == ("node1", 4, 2048, "127.0.0.1")
        assert reg.port > 0 and list(reg.running_job_ids) == []
        async with agent(reg.port) as stub:
            request = job_request(
                7, cluster.work, script="#!/bin/sh\necho cluster=$SLURM_CLUSTER_NAME\nexit 2\n"
            )
            response = await stub.LaunchJob(request, timeout=10)
            assert not response.already_running
            await cluster.controller.wait_until(
                lambda: any(r.job_id == 7 for r in cluster.controller.reports)
            )
            report = next(r for r in cluster.controller.reports if r.job_id == 7)
            assert (report.exit_code, report.node) == (2, "node1")
            assert (cluster.work / "slurm-7.out").read_text() == "cluster=fakecluster\n"
            again = await stub.LaunchJob(request, timeout=10)
            assert again.already_running
            # The acknowledged job's directory is cleaned up.
            while (cluster.state_dir / "jobs" / "7").exists():
                await trio.sleep(0.02)
            await cluster.controller.wait_until(lambda: len(cluster.controller.heartbeats) >= 1)
            assert cluster.controller.heartbeats[0].name == "node1"


async def test_rpc_errors(cluster: Cluster, log_on_failure: None) -> None:
    with trio.fail_after(TIMEOUT):
        cluster.start_agent()
        reg = await cluster.registered(1)
        async with agent(reg.port) as stub:
            for call in (
                stub.SignalJob(pb.SignalJobRequest(job_id=404), timeout=5),
                _drain(stub.StreamOutput(pb.StreamOutputRequest(job_id=404), timeout=5)),
            ):
                with pytest.raises(RpcError) as exc:
                    await call
                assert exc.value.code == StatusCode.NOT_FOUND
            bad = job_request(8, cluster.work / "missing", script="#!/bin/sh\n")
            with pytest.raises(RpcError) as exc:
                await stub.LaunchJob(bad, timeout=5)
            assert exc.value.code == StatusCode.FAILED_PRECONDITION
            assert "working directory" in exc.value.message and "does not exist" in exc.value.message
            await cluster.controller.wait_until(
                lambda: any(r.job_id == 8 for r in cluster.controller.reports)
            )
            report = next(r for r in cluster.controller.reports if r.job_id == 8)
            assert report.launch_failed and report.exit_code == 1 and "does not exist" in report.message


async def _drain(stream) -> list[pb.OutputChunk]:  # type: ignore[no-untyped-def]
    return [chunk async for chunk in stream]


async def test_interactive_stream_output(cluster: Cluster, log_on_failure: None) -> None:
    argv = ["sh", "-c", "echo hello-$SLURM_PROCID; echo warn-$SLURM_PROCID >&2"]
    with trio.fail_after(TIMEOUT):
        cluster.start_agent()
        reg = await cluster.registered(1)
        async with agent(reg.port) as stub:
            await stub.LaunchJob(job_request(9, cluster.work, argv=argv, tasks=2), timeout=10)
            chunks = await _drain(
                stub.StreamOutput(pb.StreamOutputRequest(job_id=9, follow=True), timeout=10)
            )
    got: dict[tuple[int, str], bytes] = {}
    for c in chunks[:-3]:
        got[(c.task, c.stream)] = got.get((c.task, c.stream), b"") + c.data
    assert [(c.stream, c.task, c.exit_code) for c in chunks[-3:-1]] == [
        ("task_exit", 0, 0),
        ("task_exit", 1, 0),
    ]
    assert got == {
        (0, "stdout"): b"hello-0\n",
        (0, "stderr"): b"warn-0\n",
        (1, "stdout"): b"hello-1\n",
        (1, "stderr"): b"warn-1\n",
    }
    assert chunks[-1].stream == "exit" and chunks[-1].exit_code == 0


async def test_job_survives_agent_kill_and_is_readopted(cluster: Cluster, log_on_failure: None) -> None:
    with trio.fail_after(TIMEOUT):
        first = cluster.start_agent()
        reg = await cluster.registered(1)
        async with agent(reg.port) as stub:
            await stub.LaunchJob(job_request(11, cluster.work, script=WAIT_RELEASE), timeout=10)
        await wait_for_text(cluster.work / "slurm-11.out", "started")
        first.kill()  # SIGKILL: no chance to clean up
        first.wait()
        pgid = (await wait_for_tasks(JobDir(cluster.state_dir / "jobs" / "11")))["pgid"]
        assert _alive(pgid)

        cluster.start_agent()
        reg2 = await cluster.registered(2)
        assert list(reg2.running_job_ids) == [11]
        async with agent(reg2.port) as stub:
            status = await stub.Status(pb.Empty(), timeout=5)
            assert [(j.job_id, j.finished) for j in status.jobs] == [(11, False)]
            assert status.name == "node1"
            assert not cluster.controller.reports
            (cluster.work / "release").touch()
            await cluster.controller.wait_until(lambda: bool(cluster.controller.reports))
        report = cluster.controller.reports[0]
        assert (report.job_id, report.exit_code, report.signal) == (11, 3, 0)
        assert (cluster.work / "slurm-11.out").read_text() == "started\ndone\n"


async def test_sigterm_stops_agent_but_not_jobs(cluster: Cluster, log_on_failure: None) -> None:
    with trio.fail_after(TIMEOUT):
        proc = cluster.start_agent()
        reg = await cluster.registered(1)
        async with agent(reg.port) as stub:
            await stub.LaunchJob(job_request(12, cluster.work, script=WAIT_RELEASE), timeout=10)
        await wait_for_text(cluster.work / "slurm-12.out", "started")
        proc.send_signal(signal.SIGTERM)
        rc = await trio.to_thread.run_sync(proc.wait)
        assert rc == 0
        pgid = (await wait_for_tasks(JobDir(cluster.state_dir / "jobs" / "12")))["pgid"]
        assert _alive(pgid)
        assert "shutting down (running jobs keep running)" in cluster.log.read_text()


async def test_cancel_over_rpc(cluster: Cluster, log_on_failure: None) -> None:
    script = "#!/bin/bash\ntrap 'echo got TERM' TERM\necho ready\nwhile true; do sleep 0.1; done\n"
    with trio.fail_after(TIMEOUT):
        cluster.start_agent()
        reg = await cluster.registered(1)
        async with agent(reg.port) as stub:
            await stub.LaunchJob(job_request(13, cluster.work, script=script), timeout=10)
            await wait_for_text(cluster.work / "slurm-13.out", "ready")
            await stub.SignalJob(pb.SignalJobRequest(job_id=13, signal=0, grace_secs=0.3), timeout=5)
            await cluster.controller.wait_until(lambda: bool(cluster.controller.reports))
    report = cluster.controller.reports[0]
    assert report.cancelled and report.signal == signal.SIGKILL
    assert "got TERM" in (cluster.work / "slurm-13.out").read_text()


def test_bad_flag_exits_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "spur.agent.main", "--memory-mb", "0"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "spurd: error: invalid --memory-mb 0: must be at least 1"


STEP_ARGV = ["sh", "-c", "echo step-$SLURM_STEP_ID-task-$SLURM_PROCID; exit 6"]


def _step_job(
    job_id: int, work: Path, *, uid: int, tasks: int, argv: list[str] = STEP_ARGV, restarts: int = 0
) -> pb.JobInfo:
    return pb.JobInfo(
        job_id=job_id,
        user="someone",
        uid=uid,
        gid=os.getgid(),
        state="RUNNING",
        restarts=restarts,
        time_limit_secs=-1,
        spec=pb.JobSpec(name="alloc", work_dir=str(work), interactive=True, allocation_only=True),
        allocation=[pb.NodeAllocation(node="node1", cpus=2, tasks=1)],
        steps=[
            pb.StepInfo(
                step_id=0,
                state="RUNNING",
                spec=pb.StepSpec(argv=argv),
                allocation=[pb.NodeAllocation(node="node1", cpus=2, tasks=tasks)],
            )
        ],
    )


async def _refused(call: Awaitable[object]) -> RpcError:
    with pytest.raises(RpcError) as exc:
        await call
    return exc.value


async def test_launch_step_over_rpc(cluster: Cluster, log_on_failure: None) -> None:
    """Only the controller's record runs: the caller's uid, restarts, task count and command are
    ignored, every call (a re-delivery too) is checked, and only the owner may start or signal."""
    from spur.auth.identity import Identity, identity_metadata

    me = os.getuid()
    cluster.controller.jobs[20] = _step_job(20, cluster.work, uid=me, tasks=2)
    cluster.controller.jobs[21] = _step_job(21, cluster.work, uid=me, tasks=1, argv=["sleep", "60"])
    stranger = identity_metadata(Identity(me + 4242, me + 4242, "stranger", "stranger"))
    forged_marker = cluster.work / "forged-ran"
    with trio.fail_after(TIMEOUT):
        cluster.start_agent()
        reg = await cluster.registered(1)
        async with agent(reg.port, identity_metadata()) as stub:
            # The caller claims uid 0, one task, a restart and its own command; the controller's wins.
            claimed = _step_job(
                20, cluster.work, uid=0, tasks=1, restarts=1, argv=["sh", "-c", f"touch {forged_marker}"]
            )
            request = pb.LaunchStepRequest(job=claimed, step=claimed.steps[0], node="node1", first_task=5)
            assert not (await stub.LaunchStep(request, timeout=10)).already_running
            chunks = await _drain(
                stub.StreamOutput(pb.StreamOutputRequest(job_id=20, step_id=0, follow=True), timeout=10)
            )
            assert sorted(c.data for c in chunks if c.stream == "stdout") == [
                b"step-0-task-0\n",
                b"step-0-task-1\n",
            ]
            assert chunks[-1].stream == "exit" and chunks[-1].exit_code == 6
            await cluster.controller.wait_until(
                lambda: any(r.job_id == 20 for r in cluster.controller.reports)
            )
            report = next(r for r in cluster.controller.reports if r.job_id == 20)
            assert report.HasField("step_id") and (report.step_id, report.exit_code) == (0, 6)
            # Re-delivery while the controller still lists the step as running: nothing starts again,
            # whatever restart count the caller claims.
            assert (await stub.LaunchStep(request, timeout=10)).already_running
            # Once the controller has the step's end, the step is over for every caller.
            cluster.controller.jobs[20].steps[0].state = "COMPLETED"
            exc = await _refused(stub.LaunchStep(request, timeout=10))
            assert exc.code == StatusCode.FAILED_PRECONDITION and "COMPLETED" in exc.message
            assert not forged_marker.exists()

            other = pb.LaunchStepRequest(job=claimed, step=claimed.steps[0], node="node1")
            other.job.job_id = 404
            exc = await _refused(stub.LaunchStep(other, timeout=10))
            assert exc.code == StatusCode.NOT_FOUND, exc.message
            other.job.job_id = 21
            other.step.step_id = 7  # a step the controller never created
            exc = await _refused(stub.LaunchStep(other, timeout=10))
            assert exc.code == StatusCode.NOT_FOUND and "step 21.7" in exc.message, exc.message
            other.step.step_id = 0
            async with agent(reg.port, stranger) as stranger_stub:
                exc = await _refused(stranger_stub.LaunchStep(other, timeout=10))
                assert exc.code == StatusCode.PERMISSION_DENIED, exc.message
                assert not (await stub.LaunchStep(other, timeout=10)).already_running
                # Another user may neither signal the step nor use the controller's actions.
                exc = await _refused(
                    stranger_stub.SignalJob(pb.SignalJobRequest(job_id=21, signal=0, step_id=0), timeout=5)
                )
                assert exc.code == StatusCode.PERMISSION_DENIED, exc.message
                exc = await _refused(
                    stranger_stub.SignalJob(pb.SignalJobRequest(job_id=21, action="suspend"), timeout=5)
                )
                assert exc.code == StatusCode.PERMISSION_DENIED, exc.message
            # The owner may cancel its own step.
            await stub.SignalJob(
                pb.SignalJobRequest(job_id=21, signal=0, step_id=0, grace_secs=0.2), timeout=5
            )
            await cluster.controller.wait_until(
                lambda: any(r.job_id == 21 and r.cancelled for r in cluster.controller.reports)
            )
            exc = await _refused(stub.SignalJob(pb.SignalJobRequest(job_id=20, action="freeze"), timeout=5))
            assert exc.code == StatusCode.INVALID_ARGUMENT


async def test_suspend_and_resume_over_rpc(cluster: Cluster, log_on_failure: None) -> None:
    with trio.fail_after(TIMEOUT):
        cluster.start_agent()
        reg = await cluster.registered(1)
        async with agent(reg.port) as stub:
            await stub.LaunchJob(job_request(22, cluster.work, script=WAIT_RELEASE), timeout=10)
            await wait_for_text(cluster.work / "slurm-22.out", "started")
            tasks = None
            while tasks is None:
                tasks = JobDir(cluster.state_dir / "jobs" / "22").read("tasks.json")
                await trio.sleep(0.02)
            pgid = tasks["pgid"]
            await stub.SignalJob(pb.SignalJobRequest(job_id=22, action="suspend"), timeout=5)
            while _state(pgid) != "T":
                await trio.sleep(0.02)
            await stub.SignalJob(pb.SignalJobRequest(job_id=22, action="resume"), timeout=5)
            while _state(pgid) not in "SR":
                await trio.sleep(0.02)
            await stub.SignalJob(pb.SignalJobRequest(job_id=22, action="requeue", grace_secs=0.3), timeout=5)
            await cluster.controller.wait_until(
                lambda: any(r.job_id == 22 for r in cluster.controller.reports)
            )
    report = next(r for r in cluster.controller.reports if r.job_id == 22)
    assert report.message == "requeued" and not report.cancelled


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
