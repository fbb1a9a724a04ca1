"""``srun`` / ``spur run``: run a command through the scheduler, stream its output, return its exit code.

The job is submitted as an interactive job; once it runs, srun connects to the agent of every
allocated node and streams each task's stdout/stderr. Ctrl-C cancels the job.
"""

from __future__ import annotations

import os
import socket
import sys

from spur.cli.client import CliError, controller_targets

PROG = "srun"


def prepare(argv: list[str], environ: dict[str, str], cwd: str):  # -> (JobSpec, JobOptions)
    from spur.core.job_options import (
        JobOptionError,
        build_job_spec,
        merge_options,
        options_from_env,
        parse_job_options,
    )

    try:
        cli_opts, command = parse_job_options(argv, command=PROG)
        env_opts = options_from_env(environ, command=PROG)
    except JobOptionError as exc:
        raise CliError(f"{exc}\n{exc.hint}" if exc.hint else str(exc), exit_code=1) from None
    if cli_opts.help:
        print("Usage: srun [OPTIONS...] executable [args...]")
        raise SystemExit(0)
    if not command:
        raise CliError("srun: fatal: No command given to execute.", exit_code=1)
    opts = merge_options(env_opts, cli_opts)
    try:
        spec = build_job_spec(opts, script="", argv=command, cwd=cwd, environ=environ)
    except (JobOptionError, ValueError) as exc:
        raise CliError(f"srun: error: {exc}") from None
    spec.interactive = True
    spec.argv = list(command)
    spec.script = ""
    spec.name = spec.name or os.path.basename(command[0])
    spec.command = " ".join(command)
    spec.environment.setdefault("SLURM_SUBMIT_HOST", socket.gethostname())
    return spec, opts


def main(argv: list[str]) -> int:
    try:
        spec, opts = prepare(argv, dict(os.environ), os.getcwd())
    except CliError as exc:
        print(exc.message, file=sys.stderr)
        return exc.exit_code
    import trio

    try:
        return trio.run(_run, spec, bool(getattr(opts, "label", False)))
    except CliError as exc:
        print(exc.message, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


async def _run(spec, label: bool) -> int:
    import signal

    import trio

    from spur.auth.identity import identity_metadata
    from spur.controller.convert import spec_to_proto
    from spur.core.nurseries import helper_nursery
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError
    from spur.rpc.stub import controller_stub

    md = identity_metadata()
    target = controller_targets()[0]
    try:
        async with open_channel(target, metadata_provider=lambda: md) as ch:
            ctl = controller_stub(ch)
            try:
                resp = await ctl.SubmitJob(pb.SubmitJobRequest(spec=spec_to_proto(spec)), timeout=30)
            except RpcError as exc:
                raise CliError(f"srun: error: Unable to allocate resources: {exc.message}") from None
            job_id = resp.job_id
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async with helper_nursery() as nursery:
                    nursery.start_soon(_cancel_on_signal, signals, ctl, job_id, nursery.cancel_scope)
                    code = await _follow(ctl, ch, job_id, label)
                    nursery.cancel_scope.cancel()
            return code
    except RpcError as exc:
        raise CliError(f"srun: error: {exc.message}") from None


async def _cancel_on_signal(signals, ctl, job_id: int, scope) -> None:
    from spur.rpc.proto import spur_pb2 as pb

    async for _ in signals:
        print(f"srun: interrupt: cancelling job {job_id}", file=sys.stderr)
        try:
            await ctl.CancelJob(pb.CancelJobRequest(job_id=job_id), timeout=10)
        finally:
            scope.cancel()
        return


async def _follow(ctl, ch, job_id: int, label: bool) -> int:
    import trio

    from spur.rpc.proto import spur_pb2 as pb

    said_waiting = False
    info = None
    async for info in ctl.WatchJob(pb.GetJobsRequest(job_ids=[job_id])):
        if info.state == "PENDING" and not said_waiting:
            print(f"srun: job {job_id} queued and waiting for resources", file=sys.stderr)
            said_waiting = True
        if info.state in ("RUNNING", "COMPLETING") and info.allocation:
            if said_waiting:
                print(f"srun: job {job_id} has been allocated resources", file=sys.stderr)
            break
        if info.state not in ("PENDING", "RUNNING", "COMPLETING"):
            raise CliError(f"srun: error: job {job_id} ended {info.state} before it started: {info.reason}")
    nodes = await ctl.GetNodes(pb.GetNodesRequest(names=[a.node for a in info.allocation]), timeout=10)
    results: list[tuple[int, int]] = []
    async with trio.open_nursery() as nursery:
        for node in nodes.nodes:
            nursery.start_soon(_stream_node, node, job_id, label, results)
    final = None
    async for update in ctl.WatchJob(pb.GetJobsRequest(job_ids=[job_id])):
        final = update
    exit_code = max((code for code, _ in results), default=0)
    sig = max((s for _, s in results), default=0)
    if final is not None and final.state == "TIMEOUT":
        print(f"srun: error: job {job_id}: time limit exceeded", file=sys.stderr)
    if final is not None and final.state == "CANCELLED":
        print(f"srun: error: job {job_id} was cancelled", file=sys.stderr)
    if sig:
        return 128 + sig
    if final is not None and final.state in ("CANCELLED", "TIMEOUT", "NODE_FAIL") and exit_code == 0:
        return 1
    return exit_code


async def _stream_node(node, job_id: int, label: bool, results: list) -> None:
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError
    from spur.rpc.stub import agent_stub

    out, err = sys.stdout.buffer, sys.stderr.buffer
    try:
        async with open_channel(f"{node.address}:{node.port}") as ch:
            async for chunk in agent_stub(ch).StreamOutput(
                pb.StreamOutputRequest(job_id=job_id, follow=True)
            ):
                if chunk.stream == "exit":
                    results.append((chunk.exit_code, chunk.signal))
                    continue
                stream = out if chunk.stream == "stdout" else err
                data = chunk.data
                if label:
                    data = b"".join(
                        f"{chunk.task}: ".encode() + line for line in data.splitlines(keepends=True)
                    )
                stream.write(data)
                stream.flush()
    except RpcError as exc:
        print(f"srun: error: {node.name}: lost output stream: {exc.message}", file=sys.stderr)
        results.append((1, 0))
