"""spurd's job supervision: launch, watch, signal, time limits, final status, re-adoption.

One :class:`Executor` per agent. Every job has a job dir (:mod:`spur.agent.jobdir`) and, while it runs,
a supervision task that waits on a pidfd of the job's shim (works for shims adopted from an earlier
agent, which are not our children) and enforces the time limit. When the shim is gone the executor
derives a ``JobStatusReport`` (from exit.json and kill.json), persists it as report.json and hands it to
``on_final`` (the reporter), which calls :meth:`Executor.mark_reported` once the controller has it.

Contracts:

- ``launch`` is idempotent per job id: a job this agent runs, ran, or still remembers returns
  ``already_running=True`` and starts nothing.
- A launch the job's user caused to fail raises :class:`~spur.agent.launchspec.LaunchError` *after*
  recording a launch-failed final status (exit code 1 with the message), which is reported like any
  other end of a job.
- Time limit: counted from the job's start time; at the limit the job's process group gets SIGTERM, and
  SIGKILL ``kill_grace`` seconds later; the report says ``timed_out``. Cancel (signal 0) is the same
  sequence and says ``cancelled``. Any other signal is delivered as is.
- Restarting spurd never kills jobs: on start every job dir without an acknowledged report is adopted.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from google.protobuf import json_format

from spur.agent.backends import Backend, BackendError
from spur.agent.environment import GpuOrdinal
from spur.agent.jobdir import JobDir, process_matches
from spur.agent.launchspec import LaunchError, LaunchSpec, build_launch_spec, check_paths, resolve_user
from spur.core.clock import Clock
from spur.rpc.proto import spur_pb2

__all__ = ["Executor", "TrackedJob", "UnknownJob"]

log = logging.getLogger("spur.agent.executor")

_SHIM_START_TIMEOUT = 30.0  # real seconds to wait for a shim's shim.json (systemd, or adopted mid-start)
_POLL = 0.02
_TOMBSTONE_TTL = 7 * 86400


class UnknownJob(Exception):
    """No job with this id on this agent."""


@dataclass(eq=False)
class TrackedJob:
    """A job this agent knows about (running or finished and not yet cleaned up)."""

    job_id: int
    jobdir: JobDir
    spec: LaunchSpec | None
    shim: dict[str, Any] | None = None  # identity of the shim process
    child: Any = None  # Popen when this agent started the shim
    kill_reason: str | None = None  # "cancel" | "timeout" once termination began
    report: spur_pb2.JobStatusReport | None = None
    finished: trio.Event = field(default_factory=trio.Event)
    nursery: trio.Nursery | None = None
    reported: bool = False
    streamed: bool = False

    @property
    def interactive(self) -> bool:
        return bool(self.spec and self.spec.interactive)

    @property
    def start_time(self) -> float:
        return self.spec.start_time if self.spec else 0.0

    @property
    def pid(self) -> int:
        tasks = self.jobdir.read("tasks.json") or {}
        pgid = tasks.get("pgid")
        if isinstance(pgid, int) and pgid > 0:
            return pgid
        return int((self.shim or {}).get("pid") or 0)


class Executor:
    def __init__(
        self,
        *,
        state_dir: Path,
        node_name: str,
        backend: Backend,
        on_final: Callable[[spur_pb2.JobStatusReport], None],
        kill_grace: float = 30.0,
        gpu_ordinals: dict[int, GpuOrdinal] | None = None,
        cluster_name: Callable[[], str] = lambda: "spur",
        clock: Clock | None = None,
        interactive_retention: float = 600.0,
    ) -> None:
        self.jobs_dir = state_dir / "jobs"
        self.tombstones = state_dir / "done"
        self.node_name = node_name
        self.backend = backend
        self.on_final = on_final
        self.kill_grace = kill_grace
        self.gpu_ordinals = dict(gpu_ordinals or {})
        self.cluster_name = cluster_name
        self.clock = clock or Clock()
        self.interactive_retention = interactive_retention
        self._jobs: dict[int, TrackedJob] = {}
        self._nursery: trio.Nursery | None = None

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Adopt the jobs in the state dir, then supervise until cancelled (jobs keep running)."""
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self.tombstones.mkdir(parents=True, exist_ok=True)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._prune_tombstones()
            for path in sorted(self.jobs_dir.iterdir(), key=lambda p: p.name):
                if path.name.isdigit() and path.is_dir():
                    await self._adopt(JobDir(path))
            task_status.started()
            await trio.sleep_forever()

    def _prune_tombstones(self) -> None:
        cutoff = self.clock.wall() - _TOMBSTONE_TTL
        for path in self.tombstones.iterdir():
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < cutoff:
                    path.unlink()

    # ------------------------------------------------------------------ queries

    def get(self, job_id: int) -> TrackedJob:
        job = self._jobs.get(job_id)
        if job is None:
            raise UnknownJob(f"job {job_id} is not known on node {self.node_name}")
        return job

    def jobs(self) -> list[TrackedJob]:
        return sorted(self._jobs.values(), key=lambda j: j.job_id)

    def running_job_ids(self) -> list[int]:
        return [j.job_id for j in self.jobs() if not j.finished.is_set()]

    def knows(self, job_id: int) -> bool:
        return job_id in self._jobs or (self.tombstones / str(job_id)).exists()

    # ------------------------------------------------------------------ launch

    async def launch(self, request: spur_pb2.LaunchJobRequest) -> bool:
        """Start the job of ``request`` on this node; return True when it was already known.

        Raises LaunchError (user-caused, final status recorded) or BackendError (agent-side, recorded).
        """
        assert self._nursery is not None, "Executor.run() is not running"
        job_id = request.job.job_id
        if self.knows(job_id):
            return True
        jobdir = JobDir(self.jobs_dir / str(job_id))
        if jobdir.exists():  # left by a launch that was interrupted before tracking began
            await self._adopt(jobdir)
            return True
        job = TrackedJob(job_id, jobdir, None)
        self._jobs[job_id] = job  # reserve the id before any await
        try:
            try:
                jobdir.create()
                spec = self._resolve(request)
                job.spec = spec
                jobdir.write("spec.json", spec.to_json())
                check_paths(spec)
                if not spec.interactive:
                    self._write_script(jobdir, request.job.spec.script, spec)
            except OSError as e:
                raise BackendError(
                    f"cannot prepare the job directory {jobdir.path}: {e.strerror or e}"
                ) from e
            job.shim, job.child = await self.backend.start(jobdir, spec)
        except (LaunchError, BackendError) as e:
            log.warning("job %d: launch failed: %s", job_id, e)
            self._finish(job, self._failure_report(job, str(e), launch_failed=True))
            raise
        log.info("job %d: started (%s backend)", job_id, self.backend.name)
        await self._nursery.start(self._supervise, job)
        return False

    def _resolve(self, request: spur_pb2.LaunchJobRequest) -> LaunchSpec:
        euid = os.geteuid()
        node = request.node or self.node_name
        user = resolve_user(request.job.uid, request.job.user, euid=euid, node=node)
        return build_launch_spec(
            request,
            node=node,
            user=user,
            cluster_name=self.cluster_name(),
            euid=euid,
            gpu_ordinals=self.gpu_ordinals,
            received_at=self.clock.wall(),
        )

    @staticmethod
    def _write_script(jobdir: JobDir, script: str, spec: LaunchSpec) -> None:
        fd = os.open(jobdir.script, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(script)
        if spec.drop_privileges:
            os.chown(jobdir.script, spec.uid, spec.gid)

    # ------------------------------------------------------------------ adoption

    async def _adopt(self, jobdir: JobDir) -> None:
        job_id = jobdir.job_id
        if job_id in self._jobs:
            return
        data = jobdir.read("spec.json")
        spec = LaunchSpec.from_json(data) if data else None
        job = TrackedJob(job_id, jobdir, spec)
        self._jobs[job_id] = job
        kill = jobdir.read("kill.json") or {}
        job.kill_reason = kill.get("reason")
        report = jobdir.read("report.json")
        if report is not None:
            job.report = json_format.ParseDict(report, spur_pb2.JobStatusReport(), ignore_unknown_fields=True)
            job.finished.set()
            if jobdir.reported_at() is not None:
                job.reported = True
                self._schedule_cleanup(job)
            else:
                log.info("job %d: re-sending final status", job_id)
                self.on_final(job.report)
            return
        if spec is None:
            self._finish(
                job, self._failure_report(job, "job directory has no launch spec", launch_failed=True)
            )
            return
        job.shim = jobdir.read("shim.json") or jobdir.read("launch.json")
        log.info("job %d: re-adopting", job_id)
        assert self._nursery is not None
        await self._nursery.start(self._supervise, job)

    # ------------------------------------------------------------------ supervision

    async def _supervise(self, job: TrackedJob, *, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as nursery:
            job.nursery = nursery
            task_status.started()
            if job.spec and job.spec.time_limit_secs > 0:
                nursery.start_soon(self._enforce_time_limit, job)
            kill = job.jobdir.read("kill.json")
            if kill:  # termination began before an agent restart: finish it
                remaining = float(kill.get("sent", 0)) + float(kill.get("grace", 0)) - self.clock.wall()
                nursery.start_soon(self._kill_after, job, max(0.0, remaining))
            await self._wait_shim(job)
            nursery.cancel_scope.cancel()
        job.nursery = None
        self._finish(job, self._final_report(job))

    async def _wait_shim(self, job: TrackedJob) -> None:
        """Return once the job's shim has exited (or was never there)."""
        if job.shim is None:
            job.shim = await self._await_shim_identity(job)
            if job.shim is None:
                return
        pid = int(job.shim["pid"])
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            fd = -1
        if fd < 0 or not process_matches(job.shim):
            if fd >= 0:
                os.close(fd)
            self._reap(job)
            return
        try:
            await trio.lowlevel.wait_readable(fd)
        finally:
            os.close(fd)
        self._reap(job)

    async def _await_shim_identity(self, job: TrackedJob) -> dict[str, Any] | None:
        deadline = time.monotonic() + _SHIM_START_TIMEOUT  # real time: the shim is a real process
        while time.monotonic() < deadline:
            ident = job.jobdir.read("shim.json")
            if ident is not None:
                return ident
            if job.jobdir.has("exit.json"):
                return None
            await trio.sleep(_POLL)
        return None

    @staticmethod
    def _reap(job: TrackedJob) -> None:
        if job.child is not None:
            with contextlib.suppress(OSError):
                job.child.wait(timeout=5)
            job.child = None

    async def _enforce_time_limit(self, job: TrackedJob) -> None:
        assert job.spec is not None
        deadline = job.spec.start_time + job.spec.time_limit_secs
        await trio.sleep(max(0.0, deadline - self.clock.wall()))
        if job.kill_reason is None:
            log.info("job %d: time limit of %ds reached", job.job_id, job.spec.time_limit_secs)
            self._begin_termination(job, "timeout", self.kill_grace)

    def _begin_termination(self, job: TrackedJob, reason: str, grace: float) -> None:
        job.kill_reason = reason
        job.jobdir.write("kill.json", {"reason": reason, "sent": self.clock.wall(), "grace": grace})
        assert job.nursery is not None
        job.nursery.start_soon(self._deliver, job, signal.SIGTERM)
        job.nursery.start_soon(self._kill_after, job, grace)

    async def _kill_after(self, job: TrackedJob, delay: float) -> None:
        await trio.sleep(delay)
        await self._deliver(job, signal.SIGKILL)
        await self.backend.kill_all(job.job_id, signal.SIGKILL)

    async def _job_pgid(self, job: TrackedJob) -> int:
        """The job's process group, waiting while the shim is still starting the tasks."""
        while True:
            tasks = job.jobdir.read("tasks.json")
            if tasks and isinstance(tasks.get("pgid"), int) and tasks["pgid"] > 0:
                return int(tasks["pgid"])
            await trio.sleep(_POLL)

    async def _deliver(self, job: TrackedJob, signum: int) -> None:
        pgid = await self._job_pgid(job)
        try:
            os.killpg(pgid, signum)
        except OSError as e:
            if e.errno != errno.ESRCH:
                log.warning("job %d: cannot send signal %d to group %d: %s", job.job_id, signum, pgid, e)

    # ------------------------------------------------------------------ control

    def signal(self, job_id: int, signum: int, grace: float = 0.0) -> None:
        """Cancel (``signum == 0``) or signal a job. Unknown job -> UnknownJob; finished -> no-op."""
        job = self.get(job_id)
        if job.finished.is_set() or job.nursery is None:
            return
        if signum == 0:
            if job.kill_reason is None:
                log.info("job %d: cancelling", job_id)
                self._begin_termination(job, "cancel", grace if grace > 0 else self.kill_grace)
            return
        if not 0 < signum < signal.NSIG:
            raise ValueError(f"invalid signal number {signum}")
        job.nursery.start_soon(self._deliver, job, signum)

    # ------------------------------------------------------------------ final status

    def _failure_report(
        self, job: TrackedJob, message: str, *, launch_failed: bool
    ) -> spur_pb2.JobStatusReport:
        return spur_pb2.JobStatusReport(
            job_id=job.job_id,
            node=self.node_name,
            exit_code=1,
            end_time=self.clock.wall(),
            message=message,
            launch_failed=launch_failed,
        )

    def _final_report(self, job: TrackedJob) -> spur_pb2.JobStatusReport:
        exit_status = job.jobdir.read("exit.json")
        kill = job.jobdir.read("kill.json") or {}
        reason = kill.get("reason") or job.kill_reason
        if exit_status is None:
            pid = (job.shim or {}).get("pid", "?")
            report = self._failure_report(
                job,
                f"the job supervisor (pid {pid}) ended without recording an exit status "
                "(killed, or the node rebooted)",
                launch_failed=False,
            )
        else:
            report = spur_pb2.JobStatusReport(
                job_id=job.job_id,
                node=self.node_name,
                exit_code=int(exit_status.get("exit_code", 1)),
                signal=int(exit_status.get("signal", 0)),
                end_time=float(exit_status.get("end_time") or self.clock.wall()),
                message=str(exit_status.get("message", "")),
                launch_failed=bool(exit_status.get("launch_failed", False)),
            )
        report.timed_out = reason == "timeout"
        report.cancelled = reason == "cancel"
        return report

    def _finish(self, job: TrackedJob, report: spur_pb2.JobStatusReport) -> None:
        job.report = report
        if job.jobdir.exists():
            job.jobdir.write(
                "report.json", json_format.MessageToDict(report, preserving_proto_field_name=True)
            )
        job.finished.set()
        log.info(
            "job %d: finished exit_code=%d signal=%d%s%s",
            job.job_id,
            report.exit_code,
            report.signal,
            " timed_out" if report.timed_out else "",
            " cancelled" if report.cancelled else "",
        )
        self.on_final(report)

    # ------------------------------------------------------------------ cleanup

    def mark_reported(self, job_id: int) -> None:
        """The controller acknowledged the final status of ``job_id``."""
        job = self._jobs.get(job_id)
        if job is None or job.reported:
            return
        job.reported = True
        if job.jobdir.exists():
            job.jobdir.mark_reported()
        self._schedule_cleanup(job)

    def mark_streamed(self, job_id: int) -> None:
        """A client received the whole output and exit status of ``job_id``."""
        job = self._jobs.get(job_id)
        if job is None:
            return
        job.streamed = True
        if job.reported:
            self._cleanup(job)

    def _schedule_cleanup(self, job: TrackedJob) -> None:
        if not job.interactive or job.streamed:
            self._cleanup(job)
            return
        reported_at = job.jobdir.reported_at() or self.clock.wall()
        delay = max(0.0, reported_at + self.interactive_retention - self.clock.wall())
        assert self._nursery is not None
        self._nursery.start_soon(self._cleanup_later, job, delay)

    async def _cleanup_later(self, job: TrackedJob, delay: float) -> None:
        await trio.sleep(delay)
        self._cleanup(job)

    def _cleanup(self, job: TrackedJob) -> None:
        if self._jobs.get(job.job_id) is not job:
            return
        with contextlib.suppress(OSError):
            (self.tombstones / str(job.job_id)).touch()
        job.jobdir.remove()
        del self._jobs[job.job_id]

    async def wait_finished(self, job_id: int) -> spur_pb2.JobStatusReport:
        job = self.get(job_id)
        await job.finished.wait()
        assert job.report is not None
        return job.report


def gpu_ordinals_from(gpus: Sequence[Any]) -> dict[int, GpuOrdinal]:
    """Map discovery's ``Gpu`` records to the ordinals the environment builder needs."""
    return {g.index: GpuOrdinal(g.vendor, g.vendor_index) for g in gpus}
