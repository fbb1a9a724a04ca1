"""``sbatch`` / ``spur submit``: submit a batch script.

Option precedence is Slurm's: command line > SBATCH_* environment > #SBATCH lines in the script.
"""

from __future__ import annotations

import os
import sys

from spur.cli.client import CliError, with_controller

PROG = "sbatch"

USAGE = "Usage: sbatch [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]"
OPERANDS = "file"


def option_docs():  # -> list[OptionDoc]
    """The option table of --help, the man page and completion (the parser's own table)."""
    from spur.cli.jobopt_docs import job_option_docs

    return job_option_docs(PROG)


def read_script(path: str | None) -> str:
    if path is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise CliError("sbatch: error: no batch script given and standard input is a terminal")
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return f.read()
    except OSError:
        raise CliError(f"sbatch: error: Unable to open file {path}") from None


def prepare(argv: list[str], environ: dict[str, str], cwd: str):  # -> (JobSpec, JobOptions)
    """Parse options + script into a JobSpec (no I/O besides reading the script); raises CliError."""
    from spur.lazymodule import defer

    # dataclasses imports both for nothing sbatch needs (spur.lazymodule): inspect for classes
    # without a docstring, copy for asdict/astuple.
    defer("inspect")
    defer("copy")
    from spur.core.job_options import (
        JobOptionError,
        build_job_spec,
        check_root_only,
        merge_options,
        options_from_env,
        parse_job_options,
        parse_script_options,
    )
    from spur.core.script import ScriptError, parse_sbatch_directives, validate_script, wrap_command

    try:
        cli_opts, rest = parse_job_options(argv, command=PROG)
    except JobOptionError as exc:
        raise CliError(f"{exc}\n{exc.hint}" if exc.hint else str(exc), exit_code=exc.exit_code) from None
    if cli_opts.help or cli_opts.usage or cli_opts.version:  # cmdinfo (and argparse) only then
        from spur.cli.cmdinfo import exit_on_meta

        exit_on_meta(PROG, cli_opts)
    if cli_opts.wrap is not None:
        script, script_path, script_args = wrap_command(cli_opts.wrap), None, []
    else:
        script_path = rest[0] if rest else None
        script = read_script(script_path)
        script_args = rest[1:]
    try:
        validate_script(script)
        directive_opts = parse_script_options(parse_sbatch_directives(script), command=PROG)
        env_opts = options_from_env(environ, command=PROG)
    except JobOptionError as exc:
        # Slurm's sbatch says the same wherever an option comes from (command line, environment, #SBATCH).
        text = str(exc) if str(exc).startswith(f"{PROG}:") else f"{PROG}: error: {exc}"
        raise CliError(f"{text}\n{exc.hint}" if exc.hint else text, exc.exit_code) from None
    except ScriptError as exc:
        text = str(exc)
        if not text.startswith(f"{PROG}:"):
            text = "\n".join(f"{PROG}: error: {line}" for line in text.split("\n"))
        raise CliError(text) from None
    opts = merge_options(directive_opts, env_opts, cli_opts)
    # As Slurm's sbatch: the submitting process's nice value travels with the job's environment.
    environ = {**environ, "SLURM_PRIO_PROCESS": str(os.getpriority(os.PRIO_PROCESS, 0))}
    try:
        check_root_only(opts, real_uid=os.getuid(), command=PROG)
    except JobOptionError as exc:
        raise CliError(str(exc), 255) from None
    try:
        spec = build_job_spec(
            opts,
            script=script,
            argv=script_args,
            cwd=cwd,
            environ=environ,
            script_path=script_path,
            session_id=os.getsid(0),
            command_line=["sbatch", *argv],
        )
    except (JobOptionError, ValueError) as exc:
        text = str(exc)
        code = exc.exit_code if isinstance(exc, JobOptionError) else 1
        raise CliError(text if text.startswith(f"{PROG}:") else f"{PROG}: error: {text}", code) from None
    spec.environment.setdefault("SLURM_SUBMIT_HOST", _hostname())
    spec.command = os.path.abspath(os.path.join(cwd, script_path)) if script_path else "(null)"
    return spec, opts


def _hostname() -> str:
    import _socket  # socket.gethostname itself; the socket module's import costs a call ~3 ms

    return _socket.gethostname()


def main(argv: list[str]) -> int:
    import gc

    # Start-up and one call create long-lived module objects and no garbage cycles: the collector's
    # passes over them (each a scan of every object alive) are pure cost here. On again before --wait.
    collecting = gc.isenabled()
    gc.disable()
    try:
        spec, opts = prepare(argv, dict(os.environ), os.getcwd())
        if opts.test_only:
            print(dry_run_message(spec), file=sys.stderr)
            return 0
        job_id = submit(spec)
    except CliError as exc:
        print(exc.message, file=sys.stderr)
        return exc.exit_code
    finally:
        if collecting:
            gc.enable()
    if opts.parsable:
        print(job_id)
    elif not opts.quiet:
        print(f"Submitted batch job {job_id}")
    sys.stdout.flush()
    if opts.wait:
        from spur.cli.waiting import wait_for_job

        job = wait_for_job(job_id)
        return job.exit_code if job.state in ("COMPLETED", "FAILED") else max(1, job.exit_code)
    return 0


def submit(spec) -> int:
    from spur.cli.busy import Busy, retry_while_busy
    from spur.rpc.lite import spec_request
    from spur.rpc.status import RpcError, StatusCode

    request = spec_request(spec)  # the wire request, without loading protobuf

    async def body(stub):
        try:
            resp = await stub.SubmitJob(request, timeout=30)
        except RpcError as exc:
            if exc.code is StatusCode.RESOURCE_EXHAUSTED:  # nothing was submitted: back off, retry
                raise Busy(exc.message) from None
            raise
        return resp.job_id

    from spur.cli.client import submit_failure

    try:
        return retry_while_busy(lambda: with_controller(body, lite=True), PROG)
    except Busy as exc:
        raise CliError(submit_failure(PROG, "Batch job submission failed: ", exc.message)) from None
    except CliError as exc:
        if exc.message.startswith("Unable to contact"):
            raise CliError(f"sbatch: error: Batch job submission failed: {exc.message}") from None
        raise CliError(submit_failure(PROG, "Batch job submission failed: ", exc.message)) from None


def estimate_start(
    spec, partitions, nodes, jobs, now: float, prog: str = PROG
) -> tuple[float, list[str], int, str]:
    """Where and when ``spec`` would start: (time, node names, processors, partition). Pure.

    Free CPUs and memory of the partition's usable nodes now; if the job does not fit, the earliest
    end (start + time limit) of running jobs that frees enough. Raises CliError with Slurm's text
    when the request can never fit the partition.
    """
    from spur.cli.client import SUBMIT_FAILED, submit_failure
    from spur.state.feasibility import (
        NODE_CONFIG_UNAVAILABLE,
        PartitionSummary,
        partition_reason,
        submit_refusal,
    )

    part = next((p for p in partitions if p.name == spec.partition), None) if spec.partition else None
    if part is None and not spec.partition:
        part = next((p for p in partitions if p.is_default), partitions[0] if partitions else None)
    if part is None:
        raise CliError(
            f"{prog}: error: invalid partition specified: {spec.partition}\n"
            f"{prog}: error: {SUBMIT_FAILED[prog]}Invalid partition name specified"
        )
    # The controller's own checks at submission (spur.state.feasibility), on its current view.
    summary = PartitionSummary.of(n for n in nodes if n.name in set(part.nodes))
    configured = None
    if part.nodes_expr.strip().upper() not in ("ALL", ""):
        from spur.core.hostlist import expand

        configured = set(expand(part.nodes_expr))
    refusal = submit_refusal(spec, summary, {n.name for n in nodes}, configured, part.enforce_limits or "NO")
    if refusal is None and partition_reason(spec, summary):
        refusal_text = NODE_CONFIG_UNAVAILABLE  # it would pend on its partition: no start time to give
    else:
        refusal_text = refusal.message if refusal else ""
    if refusal_text:
        raise CliError(submit_failure(prog, SUBMIT_FAILED[prog], refusal_text))
    tasks = spec.tasks
    want_nodes = max(1, spec.num_nodes)
    per_node_cpus = -(-tasks // want_nodes) * max(1, spec.cpus_per_task)
    mem = spec.mem_per_node_mb or spec.mem_per_cpu_mb * per_node_cpus
    members = [n for n in nodes if n.name in set(part.nodes)]
    if spec.nodelist:
        members = [n for n in members if n.name in set(spec.nodelist)]
    members = [n for n in members if n.name not in set(spec.exclude)]
    usable = [
        n
        for n in members
        if n.state in ("idle", "mixed", "allocated") and n.cpus >= per_node_cpus and n.memory_mb >= mem
    ]
    if len(usable) < want_nodes:
        raise CliError(f"{prog}: error: {SUBMIT_FAILED[prog]}Requested node configuration is not available")
    free = {n.name: (n.cpus - n.alloc_cpus, n.memory_mb - n.alloc_mem_mb) for n in usable}
    releases = sorted(
        (j.start_time + j.time_limit_secs, a.node, a.cpus, a.mem_mb)
        for j in jobs
        if j.state in ("RUNNING", "SUSPENDED", "COMPLETING") and j.time_limit_secs >= 0
        for a in j.allocation
        if a.node in free
    )
    when = now
    for i in range(len(releases) + 1):
        fits = sorted(name for name, (c, m) in free.items() if c >= per_node_cpus and m >= mem)
        if len(fits) >= want_nodes:
            return max(when, now), fits[:want_nodes], tasks * max(1, spec.cpus_per_task), part.name
        if i == len(releases):
            break
        when, node, cpus, mem_mb = releases[i]
        c, m = free[node]
        free[node] = (c + cpus, m + mem_mb)
    raise CliError(f"{prog}: error: {SUBMIT_FAILED[prog]}Requested node configuration is not available")


def dry_run_message(spec, prog: str = PROG) -> str:
    """``sbatch --test-only``: Slurm's estimate line, from the controller's current view; submits nothing."""
    import time

    from spur.core.hostlist import compress
    from spur.core.timespec import format_timestamp
    from spur.rpc.proto import spur_pb2 as pb

    async def body(stub):
        parts = await stub.GetPartitions(pb.GetPartitionsRequest(), timeout=30)
        nodes = await stub.GetNodes(pb.GetNodesRequest(), timeout=30)
        jobs = await stub.GetJobs(pb.GetJobsRequest(include_finished=True), timeout=30)
        return parts.partitions, nodes.nodes, jobs.jobs

    try:
        partitions, nodes, jobs = with_controller(body)
    except CliError as exc:
        raise CliError(f"{prog}: error: {exc.message}") from None
    now = time.time()
    start, names, cpus, part = estimate_start(spec, partitions, nodes, jobs, max(now, spec.begin_time), prog)
    # The id the job would get: ids are handed out in order and never reused.
    next_id = max((j.job_id for j in jobs), default=0) + 1
    return (
        f"{prog}: Job {next_id} to start at {format_timestamp(start)} using {cpus} processors on nodes "
        f"{compress(names)} in partition {part}"
    )
