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
    import trio

    try:
        spec, opts, command = prepare(argv, os.environ, os.getcwd())
    except CliError as exc:
        print(exc.message, file=sys.stderr)
        return exc.exit_code
    try:
        return trio.run(_run, spec, command, opts.ntasks is not None)
    except CliError as exc:
        print(exc.message, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


async def _run(spec, command: list[str], ntasks_given: bool) -> int:
    import signal
    import time

    import trio

    from spur.rpc.channel import open_channel
    from spur.rpc.convert import spec_to_proto
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError
    from spur.rpc.stub import controller_stub

    call_metadata()  # a credential problem is one clear error before anything starts
    try:
        async with open_channel(
            controller_targets()[0], metadata_provider=call_metadata, tls=client_tls()
        ) as ch:
            ctl = controller_stub(ch)
            from spur.cli.busy import submit_retrying

            try:
                resp = await submit_retrying(  # refused while the controller is full: back off, retry
                    lambda: ctl.SubmitJob(pb.SubmitJobRequest(spec=spec_to_proto(spec)), timeout=30), PROG
                )
            except RpcError as exc:
                from spur.cli.client import submit_failure

                raise CliError(submit_failure(PROG, "Job submit/allocate failed: ", exc.message)) from None
            job_id = resp.job_id
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
                job = await _wait_for_allocation(ctl, job_id, signals)
                if job is None:
                    return 1
                _say(f"Granted job allocation {job_id}")
                env = allocation_environment(job, os.environ, ntasks_given=ntasks_given)
                rc, sig, revoked = await _run_command(ctl, job_id, command, env, signals)
            if not revoked:
                _say(f"Relinquishing job allocation {job_id}")
                report = pb.JobStatusReport(
                    job_id=job_id,
                    node=job.allocation[0].node,
                    exit_code=rc,
                    signal=sig,
                    end_time=time.time(),
                )
                try:
                    await ctl.ReportJobStatus(report, timeout=30)
                except RpcError as exc:
                    _say(f"error: could not release job allocation {job_id}: {exc.message}")
            return 128 + sig if sig else rc
    except RpcError as exc:
        raise CliError(f"salloc: error: {exc.message}") from None


async def _wait_for_allocation(ctl, job_id: int, signals):  # -> pb.JobInfo | None
    """Follow the job until it holds its allocation; None when it ended or a signal cancelled it."""
    import trio

    from spur.rpc.proto import spur_pb2 as pb

    result: list = []
    said_pending = False
    revoked = False

    async with trio.open_nursery() as nursery:

        async def cancel_on_signal() -> None:
            nonlocal revoked
            async for _ in signals:
                revoked = True
                _say(f"Job allocation {job_id} has been revoked.")
                with trio.move_on_after(10):
                    await ctl.CancelJob(pb.CancelJobRequest(job_id=job_id), timeout=10)
                nursery.cancel_scope.cancel()
                return

        async def follow() -> None:
            nonlocal said_pending
            async for info in ctl.WatchJob(pb.GetJobsRequest(job_ids=[job_id])):
                if info.state == "PENDING" and not said_pending:
                    if info.reason in ("PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit"):
                        _say("Requested partition configuration not available now")
                    _say(f"Pending job allocation {job_id}")
                    _say(f"job {job_id} queued and waiting for resources")
                    said_pending = True
                elif info.state == "RUNNING" and info.allocation:
                    if said_pending:
                        _say(f"job {job_id} has been allocated resources")
                    result.append(info)
                    break
                elif info.state in TERMINAL or info.state == "COMPLETING":
                    if revoked:
                        return  # our own Ctrl-C: the signal handler says so and ends the wait
                    _say(
                        f"error: Job allocation {job_id} ended {info.state} before it started: {info.reason}"
                    )
                    break
            nursery.cancel_scope.cancel()

        nursery.start_soon(cancel_on_signal)
        nursery.start_soon(follow)
    return result[0] if result else None


async def _run_command(ctl, job_id: int, command: list[str], env: dict[str, str], signals):
    """Run ``command`` here; returns (exit code, signal, revoked: the job ended first)."""
    import signal as signal_mod

    import trio

    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError

    try:
        proc = await trio.lowlevel.open_process(command, env=env, stdin=None, stdout=None, stderr=None)
    except OSError as exc:
        _say(f"error: cannot run {command[0]}: {exc.strerror or exc}")
        return 127, 0, False
    revoked = False
    async with trio.open_nursery() as nursery:

        async def on_signal() -> None:
            async for signum in signals:
                if signum == signal_mod.SIGINT:
                    continue  # the command's own business (it got it from the terminal too)
                proc.send_signal(signal_mod.SIGTERM)

        async def watch_job() -> None:
            nonlocal revoked
            try:
                async for info in ctl.WatchJob(pb.GetJobsRequest(job_ids=[job_id])):
                    if info.state in TERMINAL or info.state == "COMPLETING":
                        revoked = True
                        _say(f"Job allocation {job_id} has been revoked.")
                        proc.send_signal(signal_mod.SIGTERM)
                        return
            except RpcError:
                return  # lost the controller: the command keeps its allocation until it exits

        nursery.start_soon(on_signal)
        nursery.start_soon(watch_job)
        rc = await proc.wait()
        nursery.cancel_scope.cancel()
    return (0, -rc, revoked) if rc < 0 else (rc, 0, revoked)
