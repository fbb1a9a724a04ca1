"""``salloc``: obtain an allocation, run a command (default ``$SHELL``) on this host inside it, release it.

The job is submitted as ``allocation_only`` (nothing runs on the nodes until the command starts steps
with srun). salloc prints Slurm's progress lines on stderr::

    salloc: Pending job allocation N
    salloc: job N queued and waiting for resources
    salloc: job N has been allocated resources
    salloc: Granted job allocation N
    salloc: Relinquishing job allocation N

("Pending"/"queued" only when the job has to wait), runs the command with the allocation's
``SLURM_*`` variables, then reports the command's exit status to the controller as the job's
(ReportJobStatus on the first allocated node), so the job ends COMPLETED or FAILED, and exits with the
command's exit code (128+N when a signal killed it). SIGINT/SIGTERM while waiting for the allocation
cancel the job; while the command runs SIGINT is left to the command (as Slurm does) and
SIGTERM/SIGHUP end the command and the allocation. If the job ends first (scancel, time limit), salloc
says ``Job allocation N has been revoked.`` and terminates the command.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping

from spur.cli.client import CliError, call_metadata, client_tls, controller_targets
from spur.cli.option_layers import parse_option_layers

PROG = "salloc"
USAGE = "Usage: salloc [OPTIONS(0)...] [ : [OPTIONS(N)...]] [command(0) [args(0)...]]"
OPERANDS = "command"


def option_docs():  # -> list[OptionDoc]
    """The option table of --help, the man page and completion (the parser's own table)."""
    from spur.cli.jobopt_docs import job_option_docs

    return job_option_docs(PROG)


TERMINAL = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY"}
)


def prepare(argv: list[str], environ: Mapping[str, str], cwd: str):  # -> (JobSpec, JobOptions, command)
    """Parse ``salloc ARGS`` into the allocation's JobSpec, the options and the command; CliError."""
    from spur.core.job_options import JobOptionError, build_job_spec

    opts, _cli_opts, command = parse_option_layers(PROG, argv, environ, USAGE)
    command = list(command) or [environ.get("SHELL") or "/bin/sh"]
    try:
        spec = build_job_spec(
            opts,
            script="",
            argv=[],
            cwd=cwd,
            environ=environ,
            command=PROG,
            session_id=os.getsid(0),
            command_line=[PROG, *argv],
        )
    except (JobOptionError, ValueError) as exc:
        raise CliError(f"salloc: error: {exc}") from None
    spec.interactive = True
    spec.allocation_only = True
    spec.argv = []
    spec.script = ""
    spec.name = opts.job_name or os.path.basename(command[0]) or PROG
    spec.command = " ".join(command)
    spec.signal = opts.signal or ""
    spec.dependency = opts.dependency or ""
    spec.qos = opts.qos or ""
    spec.environment.setdefault("SLURM_SUBMIT_HOST", socket.gethostname())
    return spec, opts, command


def allocation_environment(
    job, environ: Mapping[str, str], *, ntasks_given: bool, cluster_name: str = ""
) -> dict[str, str]:
    """The command's environment: ``environ`` plus the allocation's ``SLURM_*`` (and ``SPUR_*``) variables."""
    from spur.agent.environment import compress_counts, twin_name
    from spur.core.hostlist import compress

    alloc = list(job.allocation)
    nodelist = job.nodelist or compress([a.node for a in alloc])
    spec = job.spec
    slurm = {
        "SLURM_JOB_ID": str(job.job_id),
        "SLURM_JOBID": str(job.job_id),
        "SLURM_JOB_NAME": spec.name,
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_NODELIST": nodelist,
        "SLURM_JOB_NUM_NODES": str(len(alloc)),
        "SLURM_NNODES": str(len(alloc)),
        "SLURM_TASKS_PER_NODE": compress_counts(a.tasks for a in alloc),
        "SLURM_JOB_CPUS_PER_NODE": compress_counts(a.cpus for a in alloc),
        "SLURM_SUBMIT_DIR": spec.work_dir,
        "SLURM_SUBMIT_HOST": spec.environment.get("SLURM_SUBMIT_HOST", ""),
        "SLURM_JOB_PARTITION": job.partition or spec.partition,
    }
    if ntasks_given:
        ntasks = sum(a.tasks for a in alloc) or spec.num_tasks
        slurm["SLURM_NTASKS"] = slurm["SLURM_NPROCS"] = str(ntasks)
    if spec.cpus_per_task > 1:
        slurm["SLURM_CPUS_PER_TASK"] = str(spec.cpus_per_task)
    if spec.mem_per_node_mb:
        slurm["SLURM_MEM_PER_NODE"] = str(spec.mem_per_node_mb)
    if spec.account:
        slurm["SLURM_JOB_ACCOUNT"] = spec.account
    if cluster_name:
        slurm["SLURM_CLUSTER_NAME"] = cluster_name
    env = dict(environ)
    env.update(slurm)
    env.update({twin_name(k): v for k, v in slurm.items()})
    return env


def _say(message: str) -> None:
    print(f"salloc: {message}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    try:
        spec, opts, command = prepare(argv, os.environ, os.getcwd())
    except CliError as exc:
        print(exc.message, file=sys.stderr)
        return exc.exit_code
    try:
        return _run(spec, command, opts.ntasks is not None)
    except CliError as exc:
        print(exc.message, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


def _run(spec, command: list[str], ntasks_given: bool) -> int:
    """Submit, wait for the allocation, run the command inside it, release it; salloc's exit code.

    Blocking, like srun's interactive path (:mod:`spur.cli.srun_follow`): one WatchJob stream follows
    the job from submission to the end of the command, beside the signals and the command's pidfd."""
    import signal
    import time

    from spur.cli.interactive import call_once, submit
    from spur.cli.signal_pipe import SignalPipe
    from spur.rpc.blocking import BlockingChannel
    from spur.rpc.convert import spec_to_proto
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError

    metadata = call_metadata()  # a credential problem is one clear error before anything starts
    target, tls = controller_targets()[0], client_tls()
    try:
        with BlockingChannel(target, metadata=metadata, tls=tls) as ctl:
            request = pb.SubmitJobRequest(spec=spec_to_proto(spec))
            job_id = submit(ctl, request, PROG, "Job submit/allocate failed: ")
            with SignalPipe(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
                watch = ctl.stream(
                    "/spur.v1.Controller/WatchJob", pb.GetJobsRequest(job_ids=[job_id]), pb.JobInfo
                )
                job = _wait_for_allocation(watch, job_id, signals, target, tls)
                if job is None:
                    return 1
                _say(f"Granted job allocation {job_id}")
                env = allocation_environment(job, os.environ, ntasks_given=ntasks_given)
                rc, sig, revoked = _run_command(watch, job_id, command, env, signals)
        if not revoked:
            _say(f"Relinquishing job allocation {job_id}")
            report = pb.JobStatusReport(
                job_id=job_id, node=job.allocation[0].node, exit_code=rc, signal=sig, end_time=time.time()
            )
            try:
                call_once(target, tls, "ReportJobStatus", report, pb.Empty, 30)
            except RpcError as exc:
                _say(f"error: could not release job allocation {job_id}: {exc.message}")
        return 128 + sig if sig else rc
    except RpcError as exc:
        raise CliError(f"salloc: error: {exc.message}") from None


def _wait_for_allocation(watch, job_id: int, signals, target: str, tls):  # -> pb.JobInfo | None
    """Follow the job until it holds its allocation; None when it ended or a signal cancelled it."""
    from spur.cli.interactive import call_once
    from spur.rpc.blocking import wait_readable
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError

    said_pending = False
    while not watch.done:
        ready, fds = wait_readable([watch], [signals.fileno()])
        if fds and signals.take():
            _say(f"Job allocation {job_id} has been revoked.")
            try:
                call_once(
                    target, tls, "CancelJob", pb.CancelJobRequest(job_id=job_id), pb.CancelJobResponse, 10
                )
            except RpcError:
                pass  # unreachable: the allocation is released when the controller sees the job again
            return None
        for info in watch.read_available() if ready else ():
            if info.state == "PENDING" and not said_pending:
                if info.reason in ("PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit"):
                    _say("Requested partition configuration not available now")
                _say(f"Pending job allocation {job_id}")
                _say(f"job {job_id} queued and waiting for resources")
                said_pending = True
            elif info.state == "RUNNING" and info.allocation:
                if said_pending:
                    _say(f"job {job_id} has been allocated resources")
                return info
            elif info.state in TERMINAL or info.state == "COMPLETING":
                _say(f"error: Job allocation {job_id} ended {info.state} before it started: {info.reason}")
                return None
    return None


def _run_command(watch, job_id: int, command: list[str], env: dict[str, str], signals):
    """Run ``command`` here; returns (exit code, signal, revoked: the job ended first)."""
    import signal as signal_mod
    import subprocess

    from spur.rpc.blocking import wait_readable
    from spur.rpc.status import RpcError

    try:
        proc = subprocess.Popen(command, env=env)
    except OSError as exc:
        _say(f"error: cannot run {command[0]}: {exc.strerror or exc}")
        return 127, 0, False
    pidfd = os.pidfd_open(proc.pid)
    revoked = False
    following = [watch]
    try:
        while True:
            ready, fds = wait_readable(following, [signals.fileno(), pidfd])
            if pidfd in fds:
                break
            if signals.fileno() in fds:
                for signum in signals.take():
                    if signum != signal_mod.SIGINT:  # SIGINT is the command's own business (the terminal's)
                        proc.send_signal(signal_mod.SIGTERM)
            if not ready:
                continue
            try:
                updates = watch.read_available()
            except RpcError:
                following = []  # lost the controller: the command keeps its allocation until it exits
                continue
            if watch.done:
                following = []
            if not revoked and any(i.state in TERMINAL or i.state == "COMPLETING" for i in updates):
                revoked = True
                _say(f"Job allocation {job_id} has been revoked.")
                proc.send_signal(signal_mod.SIGTERM)
    finally:
        os.close(pidfd)
    rc = proc.wait()
    return (0, -rc, revoked) if rc < 0 else (rc, 0, revoked)
