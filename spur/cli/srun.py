"""``srun`` / ``spur run``: run a command through the scheduler, stream its output, return its exit code.

Outside an allocation the job is submitted as an interactive job; once it runs, srun connects to the
agent of every allocated node and streams each task's stdout/stderr. Ctrl-C cancels the job. That
path runs without an event loop (:mod:`spur.cli.srun_follow`); job steps and ``--mpi=pmi2``'s own
allocation run under Trio.

Inside an allocation (``SLURM_JOB_ID`` in the environment, as in an sbatch script or a salloc shell,
or ``--jobid=N``) srun starts a *job step*: Controller.CreateStep picks nodes and tasks inside the
job's allocation, srun calls Agent.LaunchStep on every node of the step (each node's first global
rank), streams the tasks' output (a step with ``--output`` writes files on the nodes instead) and
exits with the largest task exit code (128+signal when a task was killed by a signal). Ctrl-C or
SIGTERM cancels the step, not the job.
"""

from __future__ import annotations

import os
import socket
import sys

from spur.cli.client import CliError, call_metadata, client_tls, controller_targets
from spur.cli.option_layers import parse_option_layers
from spur.cli.srun_follow import LAUNCH_WAIT_SECS, PARTITION_LIMIT_REASONS
from spur.trace import enable_from_environment

PROG = "srun"
USAGE = (
    "Usage: srun [OPTIONS(0)... [executable(0) [args(0)...]]] [ : [OPTIONS(N)...]] executable(N) [args(N)...]"
)
OPERANDS = "command"


def option_docs():  # -> list[OptionDoc]
    """The option table of --help, the man page and completion (the parser's own table)."""
    from spur.cli.jobopt_docs import job_option_docs

    return job_option_docs(PROG)


def prepare(argv: list[str], environ: dict[str, str], cwd: str):  # -> (JobSpec, JobOptions)
    from spur.core.job_options import JobOptionError, build_job_spec

    opts, _cli_opts, command = parse_option_layers(PROG, argv, environ, USAGE)
    if not command:
        raise CliError("srun: fatal: No command given to execute.", exit_code=1)
    try:
        spec = build_job_spec(
            opts,
            script="",
            argv=command,
            cwd=cwd,
            environ=environ,
            session_id=os.getsid(0),
            command_line=["srun", *argv],
        )
    except (JobOptionError, ValueError) as exc:
        raise CliError(f"srun: error: {exc}") from None
    spec.interactive = True
    spec.argv = list(command)
    spec.script = ""
    spec.name = spec.name or os.path.basename(command[0])
    spec.command = " ".join(command)
    spec.environment.setdefault("SLURM_SUBMIT_HOST", socket.gethostname())
    return spec, opts


def step_job_id(argv: list[str], environ: dict[str, str]) -> int | None:
    """The job whose allocation srun runs in (``--jobid``, else ``SLURM_JOB_ID``), or None.

    Raises CliError for a malformed option or variable.
    """
    from spur.core.job_options import JobOptionError, options_from_env, parse_job_options

    try:
        cli_opts, _command = parse_job_options(argv, command=PROG)
        env_opts = options_from_env(environ, command=PROG)
    except JobOptionError as exc:
        raise CliError(f"{exc}\n{exc.hint}" if exc.hint else str(exc), exit_code=exc.exit_code) from None
    return cli_opts.jobid or env_opts.jobid


def prepare_step(argv: list[str], environ: dict[str, str], cwd: str):  # -> (pb.StepSpec, JobOptions)
    """Build the StepSpec of ``srun ARGS`` inside an allocation (pure apart from parsing); CliError."""
    from spur.core import hostlist
    from spur.core.job_options import export_environment
    from spur.rpc.proto import spur_pb2 as pb

    # Inside an allocation SLURM_JOB_NAME names the job, not each of its steps (Slurm ignores it too).
    opts, cli_opts, command = parse_option_layers(PROG, argv, environ, USAGE, drop_env=("job_name",))
    if not command:
        raise CliError("srun: fatal: No command given to execute.", exit_code=1)
    if opts.mpi:
        from spur.core.mpi import check_mpi_type

        try:
            check_mpi_type(opts.mpi)
        except ValueError as exc:
            raise CliError(f"srun: error: {exc}") from None
    ntasks = opts.ntasks or 0
    nodes = opts.nodes_min or 0
    if cli_opts.nodes_min is None and ntasks and nodes > ntasks:
        nodes = 0  # the allocation's node count came from the environment: fewer tasks than nodes
    try:
        environment = export_environment(opts.export, environ)
        nodelist = hostlist.expand(opts.nodelist) if opts.nodelist else []
    except ValueError as exc:
        raise CliError(f"srun: error: {exc}") from None

    def pattern(value: str | None) -> str:
        return "/dev/null" if value == "none" else value or ""

    work_dir = os.path.normpath(os.path.join(cwd, opts.chdir)) if opts.chdir else cwd
    spec = pb.StepSpec(
        argv=list(command),
        name=opts.job_name or os.path.basename(command[0]),
        num_tasks=ntasks,
        num_nodes=nodes,
        cpus_per_task=opts.cpus_per_task or 0,
        stdout_pattern=pattern(opts.output),
        stderr_pattern=pattern(opts.error),
        environment=environment,
        unbuffered=bool(opts.unbuffered),
        label=bool(opts.label),
        overlap=bool(opts.overlap),
        work_dir=work_dir,
        nodelist=nodelist,
        ntasks_per_node=opts.ntasks_per_node or 0,
        kill_on_bad_exit=bool(opts.kill_on_bad_exit),
        mpi=opts.mpi or "",
    )
    return spec, opts


def _mpi_list_asked(argv: list[str]) -> bool:
    """``--mpi=list`` (or ``--mpi list``) among srun's own options, before the command."""
    from spur.core.job_options import JobOptionError, parse_job_options

    try:
        opts, _command = parse_job_options(argv, command=PROG)
    except JobOptionError:
        return False  # the real parse reports it
    return opts.mpi == "list"


def main(argv: list[str]) -> int:
    enable_from_environment(stderr=True)
    environ = dict(os.environ)
    if _mpi_list_asked(argv):
        from spur.core.mpi import mpi_list_text

        sys.stdout.write(mpi_list_text())
        return 0
    try:
        job_id = step_job_id(argv, environ)
        if job_id is not None:
            step_spec, _opts = prepare_step(argv, environ, os.getcwd())
        else:
            spec, opts = prepare(argv, environ, os.getcwd())
    except CliError as exc:
        print(exc.message, file=sys.stderr)
        return exc.exit_code
    if job_id is not None:
        import trio

        try:
            return trio.run(run_step, job_id, step_spec)
        except CliError as exc:
            print(exc.message, file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            return 130

    if opts.mpi == "pmi2" and not opts.test_only:
        # Direct launch needs srun's step launch (it serves the PMI fences): as Slurm does, take an
        # allocation first, then run the command as its step 0.
        spec.allocation_only = True
        import trio

        try:
            return trio.run(_run_in_own_allocation, spec, argv, environ)
        except CliError as exc:
            print(exc.message, file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            return 130
    if opts.test_only:
        from spur.cli.sbatch import dry_run_message

        try:
            print(dry_run_message(spec, PROG), file=sys.stderr)
        except CliError as exc:
            print(exc.message, file=sys.stderr)
            return exc.exit_code
        return 0
    from spur.cli.srun_follow import run_job

    try:
        return run_job(spec, bool(getattr(opts, "label", False)))
    except CliError as exc:
        print(exc.message, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


async def _run_in_own_allocation(spec, argv: list[str], environ: dict[str, str]) -> int:
    """Submit ``spec`` as an allocation, run ``argv`` as its first step, then release it with the
    step's exit code (the job ends COMPLETED or FAILED like salloc's)."""
    import signal
    import time

    import trio

    from spur.cli.busy import submit_retrying
    from spur.core.nurseries import helper_nursery
    from spur.rpc.channel import open_channel
    from spur.rpc.convert import spec_to_proto
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError
    from spur.rpc.stub import controller_stub

    call_metadata()
    try:
        async with open_channel(
            controller_targets()[0], metadata_provider=call_metadata, tls=client_tls()
        ) as ch:
            ctl = controller_stub(ch)
            try:
                resp = await submit_retrying(
                    lambda: ctl.SubmitJob(pb.SubmitJobRequest(spec=spec_to_proto(spec)), timeout=30), PROG
                )
            except RpcError as exc:
                from spur.cli.client import submit_failure

                raise CliError(submit_failure(PROG, "Unable to allocate resources: ", exc.message)) from None
            job_id = resp.job_id
            phase = {"allocated": False, "revoked": False}
            allocated: list = []
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async with helper_nursery() as nursery:
                    nursery.start_soon(_cancel_on_signal, signals, ctl, job_id, nursery.cancel_scope, phase)
                    allocated.append(await _wait_allocated(ctl, job_id, phase))
                    nursery.cancel_scope.cancel()
            if phase["revoked"] or not allocated or allocated[0] is None:
                return 1
            rc = 1
            try:
                step_spec, _opts = prepare_step(argv, {**environ, "SLURM_JOB_ID": str(job_id)}, os.getcwd())
                rc = await run_step(job_id, step_spec, new_allocation=True)
            finally:  # the allocation ends with the step, whatever became of it
                report = pb.JobStatusReport(
                    job_id=job_id, node=allocated[0].allocation[0].node, exit_code=rc, end_time=time.time()
                )
                with trio.CancelScope(shield=True), trio.move_on_after(30):
                    try:
                        await ctl.ReportJobStatus(report, timeout=30)
                    except RpcError as exc:
                        print(
                            f"srun: error: could not release job allocation {job_id}: {exc.message}",
                            file=sys.stderr,
                        )
            return rc
    except RpcError as exc:
        raise CliError(f"srun: error: {exc.message}") from None


async def _wait_allocated(ctl, job_id: int, phase: dict[str, bool]):  # -> pb.JobInfo | None
    """Follow the job until it holds its allocation (None if it ended first), saying what Slurm's
    srun says while it waits."""
    from spur.rpc.proto import spur_pb2 as pb

    said_waiting = False
    async for info in ctl.WatchJob(pb.GetJobsRequest(job_ids=[job_id])):
        if info.state == "PENDING" and not said_waiting and info.reason not in ("", "None"):
            if info.reason in PARTITION_LIMIT_REASONS:
                print("srun: Requested partition configuration not available now", file=sys.stderr)
            print(f"srun: job {job_id} queued and waiting for resources", file=sys.stderr, flush=True)
            said_waiting = True
        if info.state == "RUNNING" and info.allocation:
            phase["allocated"] = True
            if said_waiting:
                print(f"srun: job {job_id} has been allocated resources", file=sys.stderr)
            return info
        if info.state not in ("PENDING", "RUNNING", "COMPLETING"):
            if phase.get("revoked"):
                return None
            raise CliError(f"srun: error: job {job_id} ended {info.state} before it started: {info.reason}")
    return None



async def _cancel_on_signal(signals, ctl, job_id: int, scope, phase: dict[str, bool]) -> None:
    """On SIGINT/SIGTERM cancel the job and stop following it, with Slurm's words."""
    import trio

    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError

    async for _ in signals:
        phase["revoked"] = True
        if phase["allocated"]:
            print("srun: forcing job termination", file=sys.stderr, flush=True)
        else:
            print(f"srun: Job allocation {job_id} has been revoked", file=sys.stderr, flush=True)
        try:
            with trio.move_on_after(10):
                await ctl.CancelJob(pb.CancelJobRequest(job_id=job_id), timeout=10)
        except RpcError as exc:
            print(f"srun: error: could not cancel job {job_id}: {exc.message}", file=sys.stderr)
        finally:
            print(f"srun: Force Terminated JobId={job_id}", file=sys.stderr, flush=True)
            scope.cancel()
        return


# ---------------------------------------------------------------- job steps


class OutputWriter:
    """Writes task output to this process's stdout/stderr, with ``--label`` prefixes on whole lines."""

    def __init__(self, label: bool) -> None:
        self.label = label
        self._partial: dict[tuple[int, str], bytes] = {}

    def write(self, task: int, stream: str, data: bytes) -> None:
        out = sys.stdout.buffer if stream == "stdout" else sys.stderr.buffer
        if self.label:
            key = (task, stream)
            lines = (self._partial.pop(key, b"") + data).splitlines(keepends=True)
            if lines and not lines[-1].endswith(b"\n"):
                self._partial[key] = lines.pop()
            data = b"".join(f"{task}: ".encode() + line for line in lines)
        out.write(data)
        out.flush()

    def close(self) -> None:
        for (task, stream), rest in sorted(self._partial.items()):
            out = sys.stdout.buffer if stream == "stdout" else sys.stderr.buffer
            out.write(f"{task}: ".encode() + rest + b"\n")
            out.flush()
        self._partial.clear()


def _ranks(first: int, count: int) -> str:
    return f"task {first}" if count == 1 else f"tasks {first}-{first + count - 1}"


async def run_step(job_id: int, spec, *, new_allocation: bool = False) -> int:  # spec: pb.StepSpec
    """Create the step, launch it on its nodes, forward its output; returns srun's exit code.

    ``new_allocation``: srun took the allocation itself a moment ago, so the controller may not count
    the job as launched yet; creating the step is retried for up to LAUNCH_WAIT_SECS meanwhile."""
    import contextlib
    import signal

    import trio

    from spur.core.nurseries import helper_nursery
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError, StatusCode
    from spur.rpc.stub import agent_stub, controller_stub

    call_metadata()  # a credential problem is one clear error before anything starts
    target = controller_targets()[0]
    try:
        async with open_channel(target, metadata_provider=call_metadata, tls=client_tls()) as ch:
            ctl = controller_stub(ch)
            deadline = trio.current_time() + (LAUNCH_WAIT_SECS if new_allocation else 0.0)
            delay = 0.05
            while True:
                try:
                    resp = await ctl.CreateStep(pb.CreateStepRequest(job_id=job_id, spec=spec), timeout=30)
                    break
                except RpcError as exc:
                    if exc.code == StatusCode.FAILED_PRECONDITION and trio.current_time() + delay < deadline:
                        await trio.sleep(delay)
                        delay = min(delay * 2, 1.0)
                        continue
                    raise CliError(
                        f"srun: error: Unable to create step for job {job_id}: {exc.message}"
                    ) from None
            step, job = resp.step, resp.job
            names = [a.node for a in step.allocation]
            nodes = {
                n.name: n for n in (await ctl.GetNodes(pb.GetNodesRequest(names=names), timeout=10)).nodes
            }
    except RpcError as exc:
        raise CliError(f"srun: error: {exc.message}") from None
    missing = [n for n in names if n not in nodes]
    if missing:
        raise CliError(f"srun: error: step {job_id}.{step.step_id}: unknown node(s) {','.join(missing)}")

    placements: list[tuple[str, int, int]] = []  # (node, first rank, tasks)
    rank = 0
    for a in step.allocation:
        placements.append((a.node, rank, a.tasks))
        rank += a.tasks
    writer = OutputWriter(spec.label)
    results: dict[str, tuple[int, int]] = {}
    failures: list[str] = []

    async with contextlib.AsyncExitStack() as stack:
        stubs = {}
        for name in names:
            node = nodes[name]
            channel = await stack.enter_async_context(
                open_channel(
                    f"{node.address}:{node.port}",
                    connect_timeout=5.0,
                    metadata_provider=call_metadata,
                    tls=client_tls(),
                )
            )
            stubs[name] = agent_stub(channel)

        pmi = None
        aborting: list[str] = []  # -K: the node whose task failed first
        aborted: list[tuple[int, int]] = []  # (rank, exit code) of a PMI abort: the step dies of SIGKILL
        if step.spec.mpi == "pmi2":
            from spur.cli.srun_pmi import PmiServer, local_address_towards

            def on_abort(rank: int, code: int, _message: str) -> None:
                if aborted or aborting:  # the step is ending already: the first failure decides
                    return
                aborted.append((rank, code))
                # Slurm kills the step with SIGKILL when a rank aborts (the aborting node did already).
                # Slurm's words; it waits KillWait + 2 seconds (30 by default, Spur's kill grace too).
                print(
                    "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
                    file=sys.stderr,
                )
                pmi_nursery.start_soon(cancel_step, signal.SIGKILL)

            pmi = PmiServer(sum(a.tasks for a in step.allocation), on_abort)
            pmi_nursery = await stack.enter_async_context(trio.open_nursery())
            stack.callback(pmi_nursery.cancel_scope.cancel)
            try:
                host = local_address_towards(nodes[names[0]].address)
                await pmi_nursery.start(pmi.serve, host)
            except OSError as exc:
                raise CliError(
                    f"srun: error: cannot open the PMI server of step {job_id}.{step.step_id}: {exc}"
                ) from None

        async def launch(name: str, first: int) -> None:
            request = pb.LaunchStepRequest(job=job, step=step, node=name, first_task=first)
            if pmi is not None:
                request.pmi_server, request.pmi_token = pmi.address, pmi.token
            try:
                await stubs[name].LaunchStep(request, timeout=30)
            except RpcError as exc:
                failures.append(
                    f"srun: error: {name}: cannot launch step {job_id}.{step.step_id}: {exc.message}"
                )

        async def cancel_step(signum: int = 0) -> None:
            with trio.move_on_after(10):
                async with trio.open_nursery() as nursery:
                    for name in names:
                        nursery.start_soon(_signal_step, stubs[name], job_id, step.step_id, signum)

        async with trio.open_nursery() as nursery:
            for name, first, _count in placements:
                nursery.start_soon(launch, name, first)
        if failures:
            for line in failures:
                print(line, file=sys.stderr)
            await cancel_step()
            return 1

        task_results: dict[str, list[tuple[int, int, int]]] = {}  # node -> (rank, exit code, signal)

        async def stream(name: str) -> None:
            request = pb.StreamOutputRequest(job_id=job_id, step_id=step.step_id, follow=True)
            try:
                async for chunk in stubs[name].StreamOutput(request):
                    if chunk.stream == "task_exit":
                        task_results.setdefault(name, []).append((chunk.task, chunk.exit_code, chunk.signal))
                    elif chunk.stream == "exit":
                        results[name] = (chunk.exit_code, chunk.signal)
                        failed = chunk.exit_code or chunk.signal
                        if spec.kill_on_bad_exit and failed and not aborting and not aborted:
                            # -K: one failed task ends the step on every node, in Slurm 22.05's words
                            # and order (integration/conformance srun/mpi_pmi2_die_kill_on_bad_exit).
                            aborting.append(name)
                            # The tasks that failed first; the ones -K ended here follow the banner.
                            tasks = task_results.get(name, [])
                            cause = (
                                [t for t in tasks if not t[2]]
                                if any(t[1] and not t[2] for t in tasks)
                                else tasks
                            )
                            for line in task_failure_lines(name, cause):
                                print(line, file=sys.stderr)
                            task_results[name] = [t for t in tasks if t not in cause]
                            print(
                                f"srun: launch/slurm: _step_signal: Terminating StepId={job_id}.{step.step_id}",
                                file=sys.stderr,
                            )
                            await cancel_step()
                    else:
                        writer.write(chunk.task, chunk.stream, chunk.data)
            except RpcError as exc:
                print(f"srun: error: {name}: lost output stream: {exc.message}", file=sys.stderr)
                results[name] = (1, 0)

        # As Slurm's srun: SIGUSR1/SIGUSR2 go on to the step's tasks (scancel --full reaches srun too).
        forwarded = (signal.SIGUSR1, signal.SIGUSR2)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, *forwarded) as signals:
            async with helper_nursery() as nursery:

                async def on_signal() -> None:
                    async for signum in signals:
                        if signum in forwarded:
                            nursery.start_soon(cancel_step, int(signum))
                            continue
                        print("srun: forcing job termination", file=sys.stderr)
                        await cancel_step()

                nursery.start_soon(on_signal)
                async with trio.open_nursery() as streams:
                    for name in names:
                        streams.start_soon(stream, name)
                nursery.cancel_scope.cancel()
        writer.close()

    exit_code, sig = 0, 0
    for name, first, count in placements:
        code, node_sig = results.get(name, (1, 0))
        if name in task_results:
            for line in task_failure_lines(name, task_results[name]):
                print(line, file=sys.stderr)
        elif node_sig and not (code and (name in aborting or aborted)):
            print(f"srun: error: {name}: {_ranks(first, count)}: {_signal_name(node_sig)}", file=sys.stderr)
        elif code:
            print(
                f"srun: error: {name}: {_ranks(first, count)}: Exited with exit code {code}", file=sys.stderr
            )
        exit_code, sig = max(exit_code, code), sig or node_sig
    if aborting:
        print(f"srun: Force Terminated StepId={job_id}.{step.step_id}", file=sys.stderr)
    # As Slurm's srun: a task killed by a signal (the ones -K or an abort ended too) outweighs exit codes.
    return 128 + sig if sig else exit_code


def task_failure_lines(node: str, tasks: list[tuple[int, int, int]]) -> list[str]:
    """srun's error lines for the failed tasks of one node, ``(rank, exit code, signal)`` each: the
    tasks that ended the same way share a line (``tasks 0,2-3: Killed``), in rank order."""
    groups: dict[str, list[int]] = {}
    for rank, code, sig in sorted(tasks):
        if sig:
            groups.setdefault(_signal_name(sig), []).append(rank)
        elif code:
            groups.setdefault(f"Exited with exit code {code}", []).append(rank)
    lines = []
    for what, ranks in sorted(groups.items(), key=lambda item: item[1][0]):
        spans: list[list[int]] = []
        for rank in ranks:
            if spans and spans[-1][1] == rank - 1:
                spans[-1][1] = rank
            else:
                spans.append([rank, rank])
        text = ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)
        lines.append(f"srun: error: {node}: {'task' if len(ranks) == 1 else 'tasks'} {text}: {what}")
    return lines


async def _signal_step(stub, job_id: int, step_id: int, signum: int = 0) -> None:
    """Cancel the step on one node (``signum`` 0), or send it ``signum``."""
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError

    try:
        await stub.SignalJob(pb.SignalJobRequest(job_id=job_id, signal=signum, step_id=step_id), timeout=10)
    except RpcError:
        pass  # gone already, or unreachable: the controller's cancel of the job still reaches it


def _signal_name(signum: int) -> str:
    import signal

    if signum == signal.SIGKILL:
        return "Killed"
    if signum == signal.SIGTERM:
        return "Terminated"
    try:
        return signal.strsignal(signum) or f"signal {signum}"
    except ValueError:
        return f"signal {signum}"
