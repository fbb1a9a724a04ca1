"""spurd's job supervision: launch, watch, signal, suspend, time limits, final status, re-adoption.

One :class:`Executor` per agent. It supervises *units*, keyed ``(job_id, step_id)``: a job's batch
script or interactive tasks (``step_id`` None) and each job step srun started on this node
(``step_id`` N). Every unit has a job dir (:mod:`spur.agent.jobdir`) and, while it runs, a supervision
task that waits on a pidfd of the unit's shim (works for shims adopted from an earlier agent, which
are not our children) and enforces the job's time limit. When the shim is gone the executor derives a
``JobStatusReport`` (from exit.json and kill.json; ``step_id`` set for a step), persists it as
report.json and hands it to ``on_final`` (the reporter), which calls :meth:`Executor.mark_reported`
once the controller has it.

Contracts:

- The executor trusts its requests: the job record of a launch (user, uid, gid, restarts, allocation,
  time limit) is the controller's -- LaunchJob comes from the controller, and the Agent service
  rebuilds every LaunchStep from the controller's record before it gets here
  (:mod:`spur.agent.service`). In particular a unit's *run* (the job's restart count) is the
  controller's, so no caller can pass a larger one to have a finished unit launched again.
- ``launch`` is idempotent per job id and ``launch_step`` per (job id, step id): a unit this agent
  runs, ran, or still remembers returns ``already_running=True`` and starts nothing. A step may be
  launched whether or not this agent runs anything else of the job (salloc allocations, other nodes
  of a batch job).
- When a job's batch script (or interactive tasks) ends, the job's steps still running here are
  cancelled (the job is over).
- Suspend (SIGSTOP) / resume (SIGCONT) act on every unit of the job; suspended time does not count
  toward the time limit (:mod:`spur.agent.suspension`).
- ``--signal=[B:]SIG@secs``: SIG goes to a unit ``secs`` before its time limit; the launch spec says
  which units get it (B: the batch script only; otherwise the steps, as Slurm does).
- Requeue is a cancel whose report says ``message="requeued"`` and ``cancelled=False``.
- A launch the job's user caused to fail raises :class:`~spur.agent.launchspec.LaunchError` *after*
  recording a launch-failed final status (exit code 1 with the message), which is reported like any
  other end of a job.
- Time limit: counted from the job's start time; at the limit the unit's process group gets SIGTERM,
  and SIGKILL ``kill_grace`` seconds later; the report says ``timed_out``. Cancel (signal 0) is the
  same sequence and says ``cancelled``. Any other signal is delivered as is.
- Restarting spurd never kills jobs: on start every job dir without an acknowledged report is adopted.
- Job state is kept per cluster id (:mod:`spur.agent.clusters`): the units, job dirs and tombstones of
  the cluster whose launches this agent serves now (``cluster_id``), with those of earlier clusters
  still supervised and reported (each report names its cluster). A launch naming another cluster
  switches to that cluster's state, so job ids of a new cluster never collide with an old one's.
  State from before cluster ids (``<state_dir>/jobs``, ``done``) is the "unknown cluster" ("").
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
from google.protobuf import json_format

from spur.agent.backends import Backend, BackendError
from spur.agent.clusters import ClusterDirs
from spur.agent.environment import GpuOrdinal
from spur.agent.jobdir import JobDir, dir_name, parse_dir_name, process_matches
from spur.agent.launchspec import (
    LaunchError,
    LaunchSpec,
    UserInfo,
    build_launch_spec,
    build_step_launch_spec,
    check_paths,
    resolve_user,
)
from spur.agent.suspension import SuspensionBook

if TYPE_CHECKING:
    pass
from spur.agent.systemd import UNIT_END_FILE, unit_out_of_memory
from spur.core.clock import Clock
from spur.rpc.proto import spur_pb2
from spur.trace import span

__all__ = ["Executor", "TrackedJob", "UnitKey", "UnknownJob"]

log = logging.getLogger("spur.agent.executor")

# How often a shim watched through its pidfd is also checked directly.
SHIM_RECHECK_SECS = 2.0
_SHIM_RECHECK_MAX_SECS = 30.0
_SHIM_START_TIMEOUT = 30.0  # real seconds to wait for a shim's shim.json (systemd, or adopted mid-start)
_POLL = 0.02
_TOMBSTONE_TTL = 7 * 86400


UnitKey = tuple[int, int | None]  # (job_id, step_id or None for the batch script / interactive tasks)

REQUEUED = "requeued"


class UnknownJob(Exception):
    """No job (or step) with this id on this agent."""


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


@dataclass(eq=False)
class TrackedJob:
    """A unit (job or step) this agent knows about (running or finished and not yet cleaned up)."""

    job_id: int
    jobdir: JobDir
    spec: LaunchSpec | None
    step_id: int | None = None
    shim: dict[str, Any] | None = None  # identity of the shim process
    kill_reason: str | None = None  # "cancel" | "timeout" | "requeue" once termination began
    report: spur_pb2.JobStatusReport | None = None
    finished: trio.Event = field(default_factory=trio.Event)
    nursery: trio.Nursery | None = None
    reported: bool = False
    streamed: bool = False
    run: int = 0  # the job's restart count when launched: a requeued job is a new run of the same id
    cluster: str = ""  # id of the cluster that launched it ("" = unknown: state from before cluster ids)

    @property
    def key(self) -> UnitKey:
        return (self.job_id, self.step_id)

    @property
    def name(self) -> str:
        return f"job {self.job_id}" if self.step_id is None else f"step {self.job_id}.{self.step_id}"

    @property
    def interactive(self) -> bool:
        return bool(self.spec and self.spec.interactive)

    @property
    def captures_output(self) -> bool:
        """Output is kept in the job dir until a client streamed it (interactive jobs, streamed steps)."""
        return bool(self.spec and self.spec.captures_output)

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
        shim_recheck_secs: float | None = None,
    ) -> None:
        self.clusters = ClusterDirs(state_dir)
        self.cluster_id = self.clusters.current()
        self.node_name = node_name
        self.backend = backend
        self.on_final = on_final
        self.kill_grace = kill_grace
        self.gpu_ordinals = dict(gpu_ordinals or {})
        self.cluster_name = cluster_name
        self.clock = clock or Clock()
        self.interactive_retention = interactive_retention
        # Besides waiting on a shim's pidfd, look at the process directly this often (doubling up to
        # _SHIM_RECHECK_MAX_SECS), so a missed wake-up cannot strand a finished job. None: never.
        self.shim_recheck_secs = shim_recheck_secs
        self.suspensions = SuspensionBook(state_dir / "suspend")
        self._books: dict[str, dict[UnitKey, TrackedJob]] = {self.cluster_id: {}}
        self._nursery: trio.Nursery | None = None

    # ------------------------------------------------------------------ clusters

    @property
    def jobs_dir(self) -> Path:
        """Job dirs of the current cluster."""
        return self.clusters.jobs_dir(self.cluster_id)

    @property
    def tombstones(self) -> Path:
        """Ended-unit markers of the current cluster."""
        return self.clusters.done_dir(self.cluster_id)

    @property
    def _jobs(self) -> dict[UnitKey, TrackedJob]:
        """Units of the current cluster."""
        return self._books.setdefault(self.cluster_id, {})

    def use_cluster(self, cluster_id: str) -> bool:
        """Serve launches of ``cluster_id`` from now on (its own job state); True when it changed.

        Units of the previous cluster keep running and are still reported, under their cluster id.
        """
        if not cluster_id or cluster_id == self.cluster_id:
            return False
        try:
            self.clusters.set_current(cluster_id)
        except (OSError, ValueError) as e:
            raise BackendError(f"cannot keep job state for cluster {cluster_id}: {e}") from e
        log.info(
            "now serving cluster %s (job state of cluster %s kept apart)",
            cluster_id,
            self.cluster_id or "unknown",
        )
        self.cluster_id = cluster_id
        self._books.setdefault(cluster_id, {})
        return True

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Adopt the jobs in the state dir, then supervise until cancelled (jobs keep running)."""
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self.tombstones.mkdir(parents=True, exist_ok=True)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for cluster in self.clusters.known():
                self._prune_tombstones(self.clusters.done_dir(cluster))
                jobs_dir = self.clusters.jobs_dir(cluster)
                if not jobs_dir.is_dir():
                    continue
                found = [(parse_dir_name(p.name), p) for p in jobs_dir.iterdir() if p.is_dir()]
                for _key, path in sorted(
                    ((k, p) for k, p in found if k is not None), key=lambda kp: (kp[0][0], kp[0][1] or -1)
                ):
                    await self._adopt(JobDir(path), cluster)
            task_status.started()
            await trio.sleep_forever()

    def _prune_tombstones(self, tombstones: Path) -> None:
        cutoff = self.clock.wall() - _TOMBSTONE_TTL
        if not tombstones.is_dir():
            return
        for path in tombstones.iterdir():
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < cutoff:
                    path.unlink()

    # ------------------------------------------------------------------ queries

    def get(self, job_id: int, step_id: int | None = None) -> TrackedJob:
        job = self._jobs.get((job_id, step_id))
        if job is None:
            what = f"job {job_id}" if step_id is None else f"step {job_id}.{step_id}"
            raise UnknownJob(f"{what} is not known on node {self.node_name}")
        return job

    def jobs(self) -> list[TrackedJob]:
        return sorted(self._jobs.values(), key=lambda j: (j.job_id, -1 if j.step_id is None else j.step_id))

    def units_of(self, job_id: int) -> list[TrackedJob]:
        """Every unit of ``job_id`` this agent tracks (batch/interactive first, then steps)."""
        return [j for j in self.jobs() if j.job_id == job_id]

    def _reported_units(self) -> list[TrackedJob]:
        """Units heartbeats speak for: the current cluster's, plus those of the unknown cluster ("",
        state from before cluster ids), which may well be the current cluster's own."""
        units = list(self._jobs.values())
        if self.cluster_id:
            units += self._books.get("", {}).values()
        return units

    def running_job_ids(self) -> list[int]:
        """Jobs with anything still running here (a batch script, tasks or a step)."""
        return sorted({j.job_id for j in self._reported_units() if not j.finished.is_set()})

    def unreported_job_ids(self) -> list[int]:
        """Jobs whose batch script or tasks ended here with a final report not yet acknowledged."""
        return sorted(
            {
                j.job_id
                for j in self._reported_units()
                if j.step_id is None and j.finished.is_set() and not j.reported
            }
        )

    def knows(self, job_id: int, step_id: int | None = None) -> bool:
        return (job_id, step_id) in self._jobs or (self.tombstones / dir_name(job_id, step_id)).exists()

    def _tombstone_run(self, job_id: int, step_id: int | None) -> int:
        """The run whose end this node recorded for the unit; -1 when none (0 for old empty stones)."""
        try:
            text = (self.tombstones / dir_name(job_id, step_id)).read_text().strip()
        except OSError:
            return -1
        return int(text) if text.isdigit() else 0

    def _known_run(self, job_id: int, step_id: int | None, run: int) -> bool:
        """True when this run of the unit was already launched here (so a launch is a duplicate)."""
        existing = self._jobs.get((job_id, step_id))
        if existing is not None:
            if existing.run < run and existing.finished.is_set():
                self._cleanup(existing)  # an earlier run, reported and requeued by the controller
            else:
                return True
        return self._tombstone_run(job_id, step_id) >= run

    # ------------------------------------------------------------------ launch

    async def launch(self, request: spur_pb2.LaunchJobRequest) -> bool:
        """Start the job of ``request`` on this node; return True when it was already known.

        Raises LaunchError (user-caused, final status recorded) or BackendError (agent-side, recorded).
        """
        span(request.job.job_id, "agent.launch-received")
        script = "" if request.job.spec.interactive else request.job.spec.script
        return await self._start_unit(
            request.job.job_id,
            None,
            lambda: self._resolve(request),
            script,
            request.job.suspended_secs,
            run=request.job.restarts,
        )

    async def launch_step(self, request: spur_pb2.LaunchStepRequest) -> bool:
        """Start this node's tasks of the step of ``request`` (built from the controller's record, see
        the module docstring); return True when it was already known.

        Raises LaunchError (user-caused, final status recorded) or BackendError (agent-side, recorded).
        """
        return await self._start_unit(
            request.job.job_id,
            request.step.step_id,
            lambda: self._resolve_step(request),
            "",
            request.job.suspended_secs,
            run=request.job.restarts,
        )

    async def _start_unit(
        self,
        job_id: int,
        step_id: int | None,
        resolve: Callable[[], LaunchSpec],
        script: str,
        suspended_secs: float,
        *,
        run: int = 0,
    ) -> bool:
        assert self._nursery is not None, "Executor.run() is not running"
        if self._known_run(job_id, step_id, run):
            return True
        jobdir = JobDir(self.jobs_dir / dir_name(job_id, step_id))
        if jobdir.exists():  # left by a launch that was interrupted before tracking began
            await self._adopt(jobdir, self.cluster_id)
            return True
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        job = TrackedJob(job_id, jobdir, None, step_id, run=run, cluster=self.cluster_id)
        self._jobs[job.key] = job  # reserve the key before any await
        try:
            try:
                jobdir.create()
                jobdir.write("run.json", {"run": run})
                spec = resolve()
                job.spec = spec
                jobdir.write("spec.json", spec.to_json())
                check_paths(spec)
                if script:
                    self._write_script(jobdir, script, spec)
            except OSError as e:
                raise BackendError(
                    f"cannot prepare the job directory {jobdir.path}: {e.strerror or e}"
                ) from e
            self.suspensions.note_known(job_id, suspended_secs)
            # Shielded from here on: the caller (a LaunchJob handler) is cancelled when the controller
            # that sent it dies, and a shim started without supervision would never be reported.
            with trio.CancelScope(shield=True):
                job.shim = await self.backend.start(jobdir, spec)
        except (LaunchError, BackendError) as e:
            log.warning("%s: launch failed: %s", job.name, e)
            self._finish(job, self._failure_report(job, str(e), launch_failed=True))
            raise
        log.info("%s: started (%s backend)", job.name, self.backend.name)
        span(job_id, "agent.started")
        with trio.CancelScope(shield=True):
            await self._nursery.start(self._supervise, job)
        return False

    def _user(self, job: spur_pb2.JobInfo, node: str) -> UserInfo:
        return resolve_user(job.uid, job.user, euid=os.geteuid(), node=node)

    def _resolve(self, request: spur_pb2.LaunchJobRequest) -> LaunchSpec:
        return self._resolve_with(build_launch_spec, request)

    def _resolve_step(self, request: spur_pb2.LaunchStepRequest) -> LaunchSpec:
        return self._resolve_with(build_step_launch_spec, request)

    def _resolve_with(
        self, build: Callable[..., LaunchSpec], request: spur_pb2.LaunchJobRequest | spur_pb2.LaunchStepRequest
    ) -> LaunchSpec:
        """Run a launch-spec builder for a job or step request with this node's facts."""
        node = request.node or self.node_name
        return build(
            request,
            node=node,
            user=self._user(request.job, node),
            cluster_name=self.cluster_name(),
            euid=os.geteuid(),
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

    async def _adopt(self, jobdir: JobDir, cluster: str) -> None:
        key = (jobdir.job_id, jobdir.step_id)
        book = self._books.setdefault(cluster, {})
        if key in book:
            return
        data = jobdir.read("spec.json")
        spec = LaunchSpec.from_json(data) if data else None
        job = TrackedJob(jobdir.job_id, jobdir, spec, jobdir.step_id, cluster=cluster)
        job.run = int((jobdir.read("run.json") or {}).get("run", 0))
        book[key] = job
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
                log.info("%s: re-sending final status", job.name)
                self.on_final(job.report)
            return
        if spec is None:
            self._finish(
                job, self._failure_report(job, "job directory has no launch spec", launch_failed=True)
            )
            return
        job.shim = jobdir.read("shim.json") or jobdir.read("launch.json")
        log.info("%s: re-adopting", job.name)
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
        await self.backend.finish(job.jobdir)
        self._finish(job, self._final_report(job))
        if job.step_id is None:
            for step in list(self._book_of(job).values()):
                if step.job_id != job.job_id:
                    continue
                if step.step_id is not None and step.kill_reason is None and step.nursery is not None:
                    log.info("%s: the job ended; cancelling the step", step.name)
                    self._begin_termination(step, "cancel", self.kill_grace)

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
            return
        try:
            recheck = self.shim_recheck_secs
            while True:
                with trio.move_on_after(recheck if recheck is not None else math.inf):
                    await trio.lowlevel.wait_readable(fd)
                    break
                recheck = min((recheck or SHIM_RECHECK_SECS) * 2, _SHIM_RECHECK_MAX_SECS)
                # A missed wake-up must not strand a finished job: look at the process itself too.
                if not process_matches(job.shim) or _is_zombie(int(job.shim["pid"])):
                    break
        finally:
            os.close(fd)

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

    async def _enforce_time_limit(self, job: TrackedJob) -> None:
        """Warn (``--signal``) and then end ``job`` at its time limit, not counting suspended time."""
        spec = job.spec
        assert spec is not None
        suspension = self.suspensions.get(job.job_id)
        warned = spec.warn_signal == 0
        while job.kill_reason is None:
            changed = suspension.changed
            if suspension.suspended:
                await changed.wait()
                continue
            now = self.clock.wall()
            deadline = spec.start_time + spec.time_limit_secs + suspension.suspended_secs(now)
            if not warned and now >= deadline - spec.warn_secs:
                warned = True
                log.info(
                    "%s: sending signal %d, %ds before the time limit",
                    job.name,
                    spec.warn_signal,
                    spec.warn_secs,
                )
                self._signal_unit(job, spec.warn_signal)
                continue
            if now >= deadline:
                log.info("%s: time limit of %ds reached", job.name, spec.time_limit_secs)
                self._begin_termination(job, "timeout", self.kill_grace)
                return
            wake = deadline if warned else deadline - spec.warn_secs
            with trio.move_on_after(max(0.0, wake - now)):
                await changed.wait()

    def _begin_termination(self, job: TrackedJob, reason: str, grace: float) -> None:
        job.kill_reason = reason
        job.jobdir.write("kill.json", {"reason": reason, "sent": self.clock.wall(), "grace": grace})
        assert job.nursery is not None
        job.nursery.start_soon(self._deliver, job, signal.SIGTERM)
        if self.suspensions.get(job.job_id).suspended:  # stopped processes must run to see SIGTERM
            job.nursery.start_soon(self._deliver, job, signal.SIGCONT)
        job.nursery.start_soon(self._kill_after, job, grace)

    async def _kill_after(self, job: TrackedJob, delay: float) -> None:
        await trio.sleep(delay)
        await self._deliver(job, signal.SIGKILL)

    def _pgid_now(self, job: TrackedJob) -> int:
        tasks = job.jobdir.read("tasks.json")
        if tasks and isinstance(tasks.get("pgid"), int) and tasks["pgid"] > 0:
            return int(tasks["pgid"])
        return 0

    async def _job_pgid(self, job: TrackedJob) -> int:
        """The job's process group, waiting while the shim is still starting the tasks."""
        while not (pgid := self._pgid_now(job)):
            await trio.sleep(_POLL)
        return pgid

    def _killpg(self, job: TrackedJob, pgid: int, signum: int) -> None:
        try:
            os.killpg(pgid, signum)
        except OSError as e:
            if e.errno != errno.ESRCH:
                log.warning("%s: cannot send signal %d to group %d: %s", job.name, signum, pgid, e)

    async def _deliver(self, job: TrackedJob, signum: int) -> None:
        self._killpg(job, await self._job_pgid(job), signum)

    def _signal_unit(self, job: TrackedJob, signum: int) -> None:
        """Send ``signum`` to ``job``'s process group now, or as soon as the shim has started it."""
        if job.finished.is_set() or job.nursery is None:
            return
        pgid = self._pgid_now(job)
        if pgid:
            self._killpg(job, pgid, signum)
        else:
            job.nursery.start_soon(self._deliver, job, signum)

    # ------------------------------------------------------------------ control

    @staticmethod
    def steps_only(signum: int, step_id: int | None, batch_only: bool, full: bool) -> bool:
        """Whether a signal reaches only the job's steps (and interactive tasks), not its batch
        script: as Slurm's scancel, for a signal other than KILL given without a step, ``-b`` or
        ``--full``. Cancelling (0) and KILL reach every unit."""
        return signum not in (0, signal.SIGKILL) and step_id is None and not batch_only and not full

    def select(
        self, job_id: int, step_id: int | None = None, *, batch_only: bool = False, steps_only: bool = False
    ) -> list[TrackedJob]:
        """The units a signal of ``job_id`` reaches: ``step_id``'s, the batch script's (``batch_only``),
        the steps' and interactive tasks' (``steps_only``; may be none) or all of the job's.
        UnknownJob when the job has no unit here."""
        if step_id is not None:
            return [self.get(job_id, step_id)]
        if batch_only:
            return [self.get(job_id)]
        units = self.units_of(job_id)
        if not units:
            raise UnknownJob(f"job {job_id} is not known on node {self.node_name}")
        if steps_only:
            return [u for u in units if u.step_id is not None or (u.spec is not None and u.spec.interactive)]
        return units

    def signal(
        self,
        job_id: int,
        signum: int,
        grace: float = 0.0,
        *,
        step_id: int | None = None,
        batch_only: bool = False,
        full: bool = False,
    ) -> None:
        """Cancel (``signum == 0``) or signal a job's units on this node.

        ``step_id``: only that step; ``batch_only``: only the batch script (or interactive tasks);
        a signal other than KILL without either reaches only the steps and interactive tasks unless
        ``full`` (:meth:`steps_only`); otherwise every unit of the job. Unknown job/step ->
        UnknownJob; finished units are skipped; an invalid signal number -> ValueError.
        """
        if signum != 0 and not 0 < signum < signal.NSIG:
            raise ValueError(f"invalid signal number {signum}")
        steps_only = self.steps_only(signum, step_id, batch_only, full)
        for job in self.select(job_id, step_id, batch_only=batch_only, steps_only=steps_only):
            if job.finished.is_set() or job.nursery is None:
                continue
            if signum == 0:
                if job.kill_reason is None:
                    log.info("%s: cancelling", job.name)
                    self._begin_termination(job, "cancel", grace if grace > 0 else self.kill_grace)
            elif batch_only and step_id is None and not (job.spec is not None and job.spec.interactive):
                self._signal_shell(job, signum)
            else:
                self._signal_unit(job, signum)

    def _signal_shell(self, job: TrackedJob, signum: int) -> None:
        """``scancel -b``: the batch script's shell alone, not its children (they are in its process
        group), as Slurm's; as soon as the shim has started it."""
        if job.finished.is_set() or job.nursery is None:
            return

        async def deliver() -> None:
            await self._job_pgid(job)
            tasks = job.jobdir.read("tasks.json") or {}
            for pid in tasks.get("pids") or []:
                if isinstance(pid, int) and pid > 0:
                    try:
                        os.kill(pid, signum)
                    except OSError as e:
                        if e.errno != errno.ESRCH:
                            log.warning("%s: cannot send signal %d to %d: %s", job.name, signum, pid, e)

        job.nursery.start_soon(deliver)

    def requeue(self, job_id: int, grace: float = 0.0) -> None:
        """End every unit of the job like a cancel; the reports say ``requeued`` (not cancelled)."""
        for job in self.select(job_id):
            if not job.finished.is_set() and job.nursery is not None and job.kill_reason is None:
                log.info("%s: requeue: terminating", job.name)
                reason = "requeue" if job.step_id is None else "cancel"
                self._begin_termination(job, reason, grace if grace > 0 else self.kill_grace)

    def set_time_limit(self, job_id: int, secs: int) -> None:
        """Give every running unit of the job a new time limit (seconds from its start; <= 0 unlimited).

        The change is saved in each unit's spec so a restarted agent keeps it. UnknownJob if none.
        """
        units = self.select(job_id)
        for job in units:
            if job.spec is None or job.finished.is_set():
                continue
            had_limit = job.spec.time_limit_secs > 0
            job.spec.time_limit_secs = secs
            job.jobdir.write("spec.json", job.spec.to_json())
            if secs > 0 and not had_limit and job.nursery is not None:
                job.nursery.start_soon(self._enforce_time_limit, job)
        log.info("job %d: time limit set to %ss", job_id, secs)
        self.suspensions.get(job_id).poke()

    def suspend(self, job_id: int) -> None:
        """SIGSTOP every running unit of the job; its time limit stops running. UnknownJob if none."""
        units = self.select(job_id)
        if self.suspensions.suspend(job_id, self.clock.wall()):
            log.info("job %d: suspended", job_id)
        for job in units:
            self._signal_unit(job, signal.SIGSTOP)

    def resume(self, job_id: int) -> None:
        """SIGCONT every running unit of the job; its time limit runs again. UnknownJob if none."""
        units = self.select(job_id)
        if self.suspensions.resume(job_id, self.clock.wall()):
            log.info("job %d: resumed", job_id)
        for job in units:
            self._signal_unit(job, signal.SIGCONT)

    # ------------------------------------------------------------------ final status

    def _new_report(self, job: TrackedJob) -> spur_pb2.JobStatusReport:
        report = spur_pb2.JobStatusReport(job_id=job.job_id, node=self.node_name, cluster_id=job.cluster)
        if job.step_id is not None:
            report.step_id = job.step_id
        return report

    def _failure_report(
        self, job: TrackedJob, message: str, *, launch_failed: bool
    ) -> spur_pb2.JobStatusReport:
        report = self._new_report(job)
        report.exit_code = 1
        report.end_time = self.clock.wall()
        report.message = message
        report.launch_failed = launch_failed
        return report

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
            report = self._new_report(job)
            report.exit_code = int(exit_status.get("exit_code", 1))
            report.signal = int(exit_status.get("signal", 0))
            report.end_time = float(exit_status.get("end_time") or self.clock.wall())
            report.message = str(exit_status.get("message", ""))
            report.launch_failed = bool(exit_status.get("launch_failed", False))
        report.timed_out = reason == "timeout"
        report.cancelled = reason == "cancel"
        if unit_out_of_memory(job.jobdir.read(UNIT_END_FILE)):  # the systemd backend's record
            report.out_of_memory = True
            report.message = report.message or "a process of the job was killed by the OOM killer (systemd: Result=oom-kill)"
        if reason == "requeue":
            report.message = REQUEUED
        return report

    def _finish(self, job: TrackedJob, report: spur_pb2.JobStatusReport) -> None:
        span(report.job_id, "agent.finished")
        job.report = report
        if job.jobdir.exists():
            job.jobdir.write(
                "report.json", json_format.MessageToDict(report, preserving_proto_field_name=True)
            )
        job.finished.set()
        log.info(
            "%s: finished exit_code=%d signal=%d%s%s",
            job.name,
            report.exit_code,
            report.signal,
            " timed_out" if report.timed_out else "",
            " cancelled" if report.cancelled else "",
        )
        self.on_final(report)

    # ------------------------------------------------------------------ cleanup

    def _book_of(self, job: TrackedJob) -> dict[UnitKey, TrackedJob]:
        return self._books.setdefault(job.cluster, {})

    def mark_reported(self, job_id: int, step_id: int | None = None, *, cluster: str | None = None) -> None:
        """The controller acknowledged the final status of ``job_id`` (or of its step ``step_id``)
        of ``cluster`` (default: the current cluster)."""
        book = self._books.get(self.cluster_id if cluster is None else cluster, {})
        job = book.get((job_id, step_id))
        if job is None or job.reported:
            return
        job.reported = True
        if job.jobdir.exists():
            job.jobdir.mark_reported()
        self._schedule_cleanup(job)

    def mark_streamed(self, job_id: int, step_id: int | None = None) -> None:
        """A client received the whole output and exit status of ``job_id`` (or of its step)."""
        job = self._jobs.get((job_id, step_id))
        if job is None:
            return
        job.streamed = True
        if job.reported:
            self._cleanup(job)

    def _schedule_cleanup(self, job: TrackedJob) -> None:
        if not job.captures_output or job.streamed:
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
        book = self._book_of(job)
        if book.get(job.key) is not job:
            return
        tombstones = self.clusters.done_dir(job.cluster)
        with contextlib.suppress(OSError):
            tombstones.mkdir(parents=True, exist_ok=True)
            (tombstones / dir_name(job.job_id, job.step_id)).write_text(str(job.run))
        job.jobdir.remove()
        del book[job.key]
        if not any(j.job_id == job.job_id for j in book.values()):
            self.suspensions.forget(job.job_id)

    async def wait_finished(self, job_id: int, step_id: int | None = None) -> spur_pb2.JobStatusReport:
        job = self.get(job_id, step_id)
        await job.finished.wait()
        assert job.report is not None
        return job.report


def gpu_ordinals_from(gpus: Sequence[Any]) -> dict[int, GpuOrdinal]:
    """Map discovery's ``Gpu`` records to the ordinals the environment builder needs."""
    return {g.index: GpuOrdinal(g.vendor, g.vendor_index) for g in gpus}
