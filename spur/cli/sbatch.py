"""``sbatch`` / ``spur submit``: submit a batch script.

Option precedence is Slurm's: command line > SBATCH_* environment > #SBATCH lines in the script.
"""

from __future__ import annotations

import os
import sys

from spur.cli.client import CliError, with_controller

PROG = "sbatch"

USAGE = """Usage: sbatch [OPTIONS...] script [args...]

Common options:
  -J, --job-name=NAME      name of the job
  -p, --partition=NAME     partition to run in
  -N, --nodes=N            number of nodes
  -n, --ntasks=N           number of tasks
  -c, --cpus-per-task=N    CPUs per task
      --mem=SIZE           memory per node (K/M/G/T suffix; default MB)
  -t, --time=LIMIT         time limit (MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]], UNLIMITED)
  -o, --output=PATTERN     stdout file (%j job id, %x name, %u user, %N node, %A/%a array)
  -e, --error=PATTERN      stderr file
  -D, --chdir=DIR          working directory
      --wrap=COMMAND       wrap a command string in a sh script
      --gres=LIST          generic resources per node, e.g. gpu:2
  -G, --gpus=N             GPUs for the whole job
      --parsable           print only the job id
  -W, --wait               wait for the job to finish and exit with its exit code
  -h, --help               show this help
"""


def read_script(path: str | None) -> str:
    if path is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise CliError("sbatch: error: no batch script given and standard input is a terminal")
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return f.read()
    except OSError as exc:
        raise CliError(f"sbatch: error: Unable to open file {path}: {exc.strerror}") from None


def prepare(argv: list[str], environ: dict[str, str], cwd: str):  # -> (JobSpec, JobOptions)
    """Parse options + script into a JobSpec (no I/O besides reading the script); raises CliError."""
    from spur.core.job_options import (
        JobOptionError,
        build_job_spec,
        merge_options,
        options_from_env,
        parse_job_options,
        parse_script_options,
    )
    from spur.core.script import ScriptError, parse_sbatch_directives, validate_script, wrap_command

    try:
        cli_opts, rest = parse_job_options(argv, command=PROG)
    except JobOptionError as exc:
        raise CliError(f"{exc}\n{exc.hint}" if exc.hint else str(exc), exit_code=255) from None
    if cli_opts.help:
        print(USAGE, end="")
        raise SystemExit(0)
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
    except (ScriptError, JobOptionError) as exc:
        text = str(exc)
        raise CliError(text if text.startswith(f"{PROG}:") else f"{PROG}: error: {text}") from None
    opts = merge_options(directive_opts, env_opts, cli_opts)
    try:
        spec = build_job_spec(
            opts, script=script, argv=script_args, cwd=cwd, environ=environ, script_path=script_path
        )
    except (JobOptionError, ValueError) as exc:
        text = str(exc)
        raise CliError(text if text.startswith(f"{PROG}:") else f"{PROG}: error: {text}") from None
    spec.environment.setdefault("SLURM_SUBMIT_HOST", _hostname())
    spec.command = os.path.abspath(os.path.join(cwd, script_path)) if script_path else "(null)"
    return spec, opts


def _hostname() -> str:
    import socket

    return socket.gethostname()


def main(argv: list[str]) -> int:
    try:
        spec, opts = prepare(argv, dict(os.environ), os.getcwd())
        job_id = submit(spec)
    except CliError as exc:
        print(exc.message, file=sys.stderr)
        return exc.exit_code
    if opts.parsable:
        print(job_id)
    else:
        print(f"Submitted batch job {job_id}")
    sys.stdout.flush()
    if opts.wait:
        from spur.cli.waiting import wait_for_job

        job = wait_for_job(job_id)
        return job.exit_code if job.state in ("COMPLETED", "FAILED") else max(1, job.exit_code)
    return 0


def submit(spec) -> int:
    from spur.controller.convert import spec_to_proto
    from spur.rpc.proto import spur_pb2 as pb

    async def body(stub):
        resp = await stub.SubmitJob(pb.SubmitJobRequest(spec=spec_to_proto(spec)), timeout=30)
        return resp.job_id

    try:
        return with_controller(body)
    except CliError as exc:
        raise CliError(f"sbatch: error: Batch job submission failed: {exc.message}") from None
