"""What the shim needs to run one job (or one job step) on this node, resolved from a launch request.

spurd resolves everything (environment, output paths, user and groups) up front and writes the result
as ``spec.json``, so the shim is a dumb executor and a launch failure the user caused is found before
any process starts. :func:`build_launch_spec` (LaunchJobRequest) and :func:`build_step_launch_spec`
(LaunchStepRequest) are pure; :func:`resolve_user` and :func:`check_paths` do
the (read-only) system lookups.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spur.agent.environment import (
    GpuOrdinal,
    build_job_environment,
    build_step_environment,
    task_gpu_bindings,
)
from spur.core.serde import from_plain, to_plain

if TYPE_CHECKING:
    from spur.rpc.proto import spur_pb2

__all__ = [
    "LaunchError",
    "LaunchSpec",
    "UserInfo",
    "WarningSignal",
    "build_launch_spec",
    "build_step_launch_spec",
    "check_paths",
    "resolve_user",
    "warning_signal",
]


class LaunchError(Exception):
    """A launch that cannot run for a reason the job (or its user) caused; the message says which."""


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: int
    gid: int
    home: str = ""
    shell: str = ""
    groups: tuple[int, ...] = ()


@dataclass
class LaunchSpec:
    """One job (or job step) on one node. Paths are absolute; ``stderr_path == ""`` means stderr joins
    stdout.

    A step (``step_id >= 0``) runs ``argv`` as ``ntasks`` tasks like an interactive job; task ``i`` of
    this node writes stdout to ``task_stdout[i]`` and stderr to ``task_stderr[i]`` when those are set
    (``""``: captured in the job dir for StreamOutput; stderr ``""`` with stdout set joins stdout).
    ``warn_signal`` is sent ``warn_secs`` before the time limit (``--signal``); 0 = none.
    """

    job_id: int
    job_name: str
    node: str
    user: str
    uid: int
    gid: int
    groups: list[int] = field(default_factory=list)
    work_dir: str = "/"
    interactive: bool = False
    argv: list[str] = field(default_factory=list)  # interactive command
    stdout_path: str = ""  # batch only
    stderr_path: str = ""  # batch only
    stdin_path: str = "/dev/null"  # batch only
    environment: dict[str, str] = field(default_factory=dict)  # job level; the shim adds per-task vars
    first_task: int = 0  # global rank of this node's first task
    ntasks: int = 1  # tasks on this node (batch: 1)
    start_time: float = 0.0
    time_limit_secs: int = -1  # <= 0: unlimited
    mem_mb: int = 0  # this node's memory allocation (systemd backend enforces it)
    umask: int = 0o022
    # Drop privileges to uid/gid before running tasks (spurd is root and the job is another user's).
    drop_privileges: bool = False
    open_append: bool = False  # --open-mode=append: output files are appended to, not truncated
    step_id: int = -1  # >= 0: a job step
    task_stdout: list[str] = field(default_factory=list)
    task_stderr: list[str] = field(default_factory=list)
    warn_signal: int = 0
    warn_secs: int = 0
    suspended_secs: float = 0.0  # time the job had spent suspended when this was resolved
    kill_on_bad_exit: bool = False  # step -K: the first task that fails ends this node's other tasks
    # PMI direct launch (step --mpi=pmi2): srun's fence server and token, the step's rank count and
    # its tasks on each node in order (for PMI_process_mapping). No server: no PMI.
    pmi_server: str = ""
    pmi_token: str = ""
    pmi_size: int = 0
    pmi_tasks_per_node: list[int] = field(default_factory=list)
    # --gpus-per-task: each local task's own GPU variables (empty: every task sees the node's GPUs).
    task_gpus: list[dict[str, str]] = field(default_factory=list)

    @property
    def is_step(self) -> bool:
        return self.step_id >= 0

    @property
    def captures_output(self) -> bool:
        """Some task output is kept in the job dir for StreamOutput (interactive jobs, streamed steps)."""
        return self.interactive or (self.is_step and not all(self.task_stdout))

    @property
    def ranks(self) -> range:
        return range(self.first_task, self.first_task + self.ntasks)

    def to_json(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LaunchSpec:
        return from_plain(cls, dict(data))


def resolve_user(uid: int, name: str, *, euid: int, node: str) -> UserInfo:
    """Who the job runs as. A non-root agent can only run its own user's jobs."""
    try:
        entry: pwd.struct_passwd | None = pwd.getpwuid(uid)
    except KeyError:
        entry = None
    if euid != 0 and uid != euid:
        me = _user_name(euid)
        raise LaunchError(
            f"spurd on {node} runs as uid {euid} ({me}), not root, so it can only run that user's jobs; "
            f"this job belongs to uid {uid} ({name or '?'}). Run spurd as root to run other users' jobs."
        )
    if entry is None:
        raise LaunchError(f"user id {uid} ({name or 'no name'}) does not exist on node {node}")
    groups: tuple[int, ...] = ()
    if euid == 0:
        try:
            groups = tuple(os.getgrouplist(entry.pw_name, entry.pw_gid))
        except OSError:
            groups = ()
    return UserInfo(entry.pw_name, uid, entry.pw_gid, entry.pw_dir, entry.pw_shell, groups)


def job_gid(requested: int, user: UserInfo) -> int:
    """The group a job runs as: the submitter's gid when it is one of the user's groups on this node,
    else the user's primary group (a caller cannot pick a group it is not in, e.g. gid 0)."""
    return requested if requested == user.gid or requested in user.groups else user.gid


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "?"


def _resolve(path: str, work_dir: str) -> str:
    return os.path.normpath(os.path.join(work_dir, path))


@dataclass(frozen=True)
class WarningSignal:
    signum: int
    secs: int
    batch_only: bool


def warning_signal(text: str) -> WarningSignal | None:
    """``JobSpec.signal`` (``[B:]SIG[@secs]``) parsed, or None when empty. Raises LaunchError."""
    if not text:
        return None
    from spur.core.job_options import parse_signal_spec

    try:
        parsed = parse_signal_spec(text)
    except ValueError as e:
        raise LaunchError(str(e)) from None
    return WarningSignal(parsed.signal, parsed.time, parsed.batch_only)


def _array_ids(job: spur_pb2.JobInfo) -> tuple[int | None, int | None]:
    if not job.HasField("array_task_id"):
        return None, None
    return job.array_job_id or job.job_id, job.array_task_id


def _work_dir(path: str, user: UserInfo) -> str:
    work_dir = path or user.home or "/"
    if not os.path.isabs(work_dir):
        raise LaunchError(f"working directory {work_dir!r} is not an absolute path")
    return work_dir


def _umask(environment: Mapping[str, str]) -> int:
    raw_umask = environment.get("SLURM_UMASK", "")
    if not raw_umask:
        return 0o022
    try:
        return int(raw_umask, 8) & 0o777
    except ValueError:
        raise LaunchError(f"SLURM_UMASK={raw_umask!r} is not an octal umask") from None


def _time_limit(job: spur_pb2.JobInfo) -> int:
    return job.time_limit_secs if job.time_limit_secs > 0 else -1


def build_launch_spec(
    request: spur_pb2.LaunchJobRequest,
    *,
    node: str,
    user: UserInfo,
    cluster_name: str,
    euid: int,
    gpu_ordinals: Mapping[int, GpuOrdinal] | None = None,
    received_at: float,
) -> LaunchSpec:
    """Resolve ``request`` for this node. Raises :class:`LaunchError` for a request that cannot run."""
    from spur.core.hostlist import compress
    from spur.core.output_path import default_output_name, expand_output_pattern

    job = request.job
    spec = job.spec
    alloc = next((a for a in job.allocation if a.node == node), None)
    if alloc is None:
        raise LaunchError(f"node {node} is not part of the allocation of job {job.job_id}")
    if spec.interactive:
        if not spec.argv:
            raise LaunchError(f"job {job.job_id} is interactive but has no command to run")
    elif not spec.script:
        raise LaunchError(f"batch job {job.job_id} has no script")
    work_dir = _work_dir(spec.work_dir, user)

    nodelist = job.nodelist or compress([a.node for a in job.allocation])
    environment = build_job_environment(
        job,
        node=node,
        cluster_name=cluster_name,
        nodelist=nodelist,
        gpu_ordinals=gpu_ordinals,
        home=user.home,
        shell=user.shell,
    )
    array_job_id, array_task_id = _array_ids(job)
    stdout_path = stderr_path = ""
    stdin_path = "/dev/null"
    if not spec.interactive:

        def expand(pattern: str) -> str:
            return _resolve(
                expand_output_pattern(
                    pattern,
                    job_id=job.job_id,
                    job_name=spec.name or "",
                    user=user.name,
                    node=node,
                    array_job_id=array_job_id,
                    array_task_id=array_task_id,
                ),
                work_dir,
            )

        stdout_path = expand(
            spec.stdout_pattern or default_output_name(job.job_id, array_job_id, array_task_id)
        )
        stderr_path = expand(spec.stderr_pattern) if spec.stderr_pattern else ""
        if stderr_path == stdout_path:
            stderr_path = ""
        stdin_path = _resolve(spec.stdin_path, work_dir) if spec.stdin_path else "/dev/null"

    # --signal: the batch shell gets it only with B:; an interactive job's tasks are its "step".
    warn = warning_signal(spec.signal) if _time_limit(job) > 0 else None
    if warn is not None and not (warn.batch_only or spec.interactive):
        warn = None
    return LaunchSpec(
        job_id=job.job_id,
        job_name=spec.name,
        node=node,
        user=user.name,
        uid=user.uid,
        gid=job_gid(job.gid, user),
        groups=list(user.groups),
        work_dir=work_dir,
        interactive=spec.interactive,
        argv=list(spec.argv),
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        stdin_path=stdin_path,
        environment=environment,
        first_task=request.first_task,
        ntasks=max(1, alloc.tasks) if spec.interactive else 1,
        task_gpus=task_gpu_bindings(
            list(alloc.gpus), gpu_ordinals or {}, ntasks=max(1, alloc.tasks), gpus_per_task=spec.gpus_per_task
        )
        if spec.interactive
        else [],
        start_time=job.start_time or received_at,
        time_limit_secs=_time_limit(job),
        mem_mb=alloc.mem_mb,
        umask=_umask(spec.environment),
        drop_privileges=euid == 0 and user.uid != 0,
        open_append=spec.open_mode == "append",
        warn_signal=warn.signum if warn else 0,
        warn_secs=warn.secs if warn else 0,
        suspended_secs=job.suspended_secs,
    )


def build_step_launch_spec(
    request: spur_pb2.LaunchStepRequest,
    *,
    node: str,
    user: UserInfo,
    cluster_name: str,
    euid: int,
    gpu_ordinals: Mapping[int, GpuOrdinal] | None = None,
    received_at: float,
) -> LaunchSpec:
    """Resolve the step of ``request`` for this node. Raises :class:`LaunchError`.

    Output patterns are expanded per task (``%t`` global rank, ``%n`` node index in the step, ``%s``
    step id, ``%J`` ``jobid.stepid``) relative to the step's working directory (the job's when the
    step names none).
    """
    from spur.core.hostlist import compress
    from spur.core.output_path import expand_output_pattern

    job = request.job
    step = request.step
    sspec = step.spec
    salloc = list(step.allocation)
    node_index = next((i for i, a in enumerate(salloc) if a.node == node), None)
    if node_index is None:
        raise LaunchError(f"node {node} is not part of the allocation of step {job.job_id}.{step.step_id}")
    if not any(a.node == node for a in job.allocation):
        raise LaunchError(f"node {node} is not part of the allocation of job {job.job_id}")
    if not sspec.argv:
        raise LaunchError(f"step {job.job_id}.{step.step_id} has no command to run")
    mine = salloc[node_index]
    ntasks = max(1, mine.tasks)
    work_dir = _work_dir(sspec.work_dir or job.spec.work_dir, user)
    environment = build_step_environment(
        job,
        step,
        node=node,
        cluster_name=cluster_name,
        nodelist=job.nodelist or compress([a.node for a in job.allocation]),
        step_nodelist=compress([a.node for a in salloc]),
        gpu_ordinals=gpu_ordinals,
        home=user.home,
        shell=user.shell,
    )
    array_job_id, array_task_id = _array_ids(job)

    def expand(pattern: str, rank: int) -> str:
        if not pattern:
            return ""
        return _resolve(
            expand_output_pattern(
                pattern,
                job_id=job.job_id,
                job_name=job.spec.name or sspec.name or "",
                user=user.name,
                node=node,
                array_job_id=array_job_id,
                array_task_id=array_task_id,
                step_id=str(step.step_id),
                task_id=rank,
                node_id=node_index,
            ),
            work_dir,
        )

    ranks = range(request.first_task, request.first_task + ntasks)
    task_stdout = [expand(sspec.stdout_pattern, r) for r in ranks]
    task_stderr = [expand(sspec.stderr_pattern, r) for r in ranks]
    task_stderr = ["" if e == o else e for o, e in zip(task_stdout, task_stderr, strict=True)]
    warn = warning_signal(job.spec.signal) if _time_limit(job) > 0 else None
    if warn is not None and warn.batch_only:
        warn = None
    return LaunchSpec(
        job_id=job.job_id,
        job_name=sspec.name or job.spec.name,
        node=node,
        user=user.name,
        uid=user.uid,
        gid=job_gid(job.gid, user),
        groups=list(user.groups),
        work_dir=work_dir,
        interactive=False,
        argv=list(sspec.argv),
        environment=environment,
        first_task=request.first_task,
        ntasks=ntasks,
        task_gpus=task_gpu_bindings(
            list(mine.gpus) or _job_gpus(job, node),
            gpu_ordinals or {},
            ntasks=ntasks,
            gpus_per_task=job.spec.gpus_per_task,
        ),
        start_time=job.start_time or received_at,
        time_limit_secs=_time_limit(job),
        mem_mb=mine.mem_mb,
        umask=_umask(environment),
        drop_privileges=euid == 0 and user.uid != 0,
        open_append=job.spec.open_mode == "append",
        step_id=step.step_id,
        task_stdout=task_stdout,
        task_stderr=task_stderr,
        warn_signal=warn.signum if warn else 0,
        warn_secs=warn.secs if warn else 0,
        suspended_secs=job.suspended_secs,
        kill_on_bad_exit=sspec.kill_on_bad_exit,
        **_pmi_fields(request, environment),
    )


def _job_gpus(job: spur_pb2.JobInfo, node: str) -> list[int]:
    return next((list(a.gpus) for a in job.allocation if a.node == node), [])


def _pmi_fields(request: spur_pb2.LaunchStepRequest, environment: Mapping[str, str]) -> dict[str, Any]:
    """The PMI part of a step's launch spec: only for a pmi2 step whose srun serves the fences."""
    if environment.get("SLURM_MPI_TYPE") != "pmi2" or not request.pmi_server or not request.pmi_token:
        return {}
    tasks = [a.tasks for a in request.step.allocation]
    return {
        "pmi_server": request.pmi_server,
        "pmi_token": request.pmi_token,
        "pmi_size": sum(tasks),
        "pmi_tasks_per_node": tasks,
    }


def check_paths(spec: LaunchSpec) -> None:
    """Raise :class:`LaunchError` when a path the job needs is missing (checked as spurd sees it)."""
    if not os.path.isdir(spec.work_dir):
        raise LaunchError(f"working directory {spec.work_dir} does not exist on node {spec.node}")
    paths = [("output", spec.stdout_path), ("error", spec.stderr_path)]
    paths += [("output", p) for p in spec.task_stdout] + [("error", p) for p in spec.task_stderr]
    for what, path in paths:
        if path:
            parent = str(Path(path).parent)
            if not os.path.isdir(parent):
                raise LaunchError(f"directory {parent} of the {what} file {path} does not exist")
    if spec.stdin_path != "/dev/null" and not os.path.exists(spec.stdin_path):
        raise LaunchError(f"input file {spec.stdin_path} does not exist")
