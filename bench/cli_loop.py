"""CLI cost as scripts see it: ``sbatch``/``squeue``/``scontrol`` against ``python -c pass``.

    python -m bench.cli_loop [--queued 600] [--calls 40] [--repeat 3] [--top 12] [--no-profile]
                             [--baseline DIR]
    python -m bench.cli_loop --curve [--queues 0,600,2000,5000,10000] [--calls 10] [--baseline DIR]

Starts a real spurctld (no agents, so jobs stay PENDING), fills its queue to ``--queued`` jobs
(pipelined SubmitJob calls, not timed), then times fresh processes exactly as a shell loop starts
them: ``python -c pass`` (the floor), ``sbatch --wrap true``, ``squeue`` and ``scontrol show job N``.
The four commands take turns call by call (so load from other work on the machine falls on all of
them alike), ``--calls`` calls each per loop, ``--repeat`` loops. Printed: the machine's core count,
the median wall time per call of each command over all its calls, the median of each loop, and each
command's ratio to the floor (target: <= 2.0). ``--baseline DIR`` (a checkout of another commit,
e.g. ``git worktree add /tmp/base main``) adds the three Slurm commands run from that tree's ``spur``
package (``PYTHONPATH=DIR``, same interpreter, same controller) to the same rotation: before/after
figures from one run. Then each Slurm command runs once under ``python -X importtime``: its total
import time and the heaviest top-level imports.

Both trees are byte-compiled first (``compileall``), as ``pip install`` leaves an installed package:
an editable install under ``PYTHONDONTWRITEBYTECODE=1`` (as in this project's dev environment)
would otherwise compile every Spur module from source on every call, 30-80 ms that no installed
``sbatch`` pays.
``--curve``: the same four commands (and the baseline's three with ``--baseline``) timed at each
queue length of ``--queues`` (one controller, the queue filled up between levels; ``--calls``
calls each, interleaved), median ms per call -> ``bench/results/cli_vs_queue.{csv,png}``.
Figures only; nothing here asserts.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.common import controller, median, print_table
from integration.harness import BIN

_LINE = re.compile(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)")


def byte_compile(package_dir: Path) -> None:
    """Write the .pyc files of a package tree (what pip does at install time)."""
    import compileall

    compileall.compile_dir(str(package_dir), quiet=1)


def _env(address: str) -> dict[str, str]:
    env = dict(os.environ)
    env["SPUR_CONTROLLER"] = address
    env.pop("SPUR_CONF", None)
    return env


def timed_call(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    """Wall ms of one fresh process running ``cmd``; a failure raises (with its stderr)."""
    began = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    ms = 1000 * (time.perf_counter() - began)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} exited {proc.returncode}: {proc.stderr.strip()}")
    return ms


def import_profile(
    cmd: list[str], env: dict[str, str], cwd: Path
) -> tuple[float, list[tuple[str, float, float]]]:
    """(total import ms, [(top-level module, cumulative ms, self ms)]) for one run of ``cmd``."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *cmd], env=env, cwd=cwd, capture_output=True, text=True
    )
    top: dict[str, tuple[float, float]] = {}
    total = 0.0
    for line in proc.stderr.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        self_us, cum_us, indent, name = int(m[1]), int(m[2]), len(m[3]), m[4]
        if indent <= 1:  # a module imported by the program itself (not by another module)
            total += cum_us / 1000
            root = name.split(".")[0] if not name.startswith("spur.") else name
            prev = top.get(root, (0.0, 0.0))
            top[root] = (prev[0] + cum_us / 1000, prev[1] + self_us / 1000)
    ranked = sorted(((k, v[0], v[1]) for k, v in top.items()), key=lambda r: -r[1])
    return total, ranked


def fill_queue(address: str, count: int) -> int:
    """Submit ``count`` one-CPU ``true`` jobs (32 in flight on one connection); the last job id."""
    import trio

    from spur.rpc.proto import spur_pb2 as pb

    spec = pb.JobSpec(
        name="fill", script="#!/bin/sh\ntrue\n", work_dir="/tmp", num_nodes=1, num_tasks=1, cpus_per_task=1
    )
    ids: list[int] = []

    async def run() -> None:
        from spur.auth.identity import identity_metadata
        from spur.rpc.channel import open_channel
        from spur.rpc.stub import controller_stub

        md = identity_metadata()
        async with open_channel(address, metadata_provider=lambda: md) as ch:
            stub = controller_stub(ch)
            sem = trio.Semaphore(32)

            async def one() -> None:
                async with sem:
                    resp = await stub.SubmitJob(pb.SubmitJobRequest(spec=spec), timeout=60)
                    ids.append(resp.job_id)

            async with trio.open_nursery() as nursery:
                for _ in range(count):
                    nursery.start_soon(one)

    trio.run(run)
    return max(ids) if ids else 0


def time_rotation(
    commands: dict[str, list[str]], envs: dict[str, dict[str, str]], cwd: Path, calls: int, repeat: int
) -> dict[str, list[list[float]]]:
    """Each command ``calls`` times per loop, taking turns call by call, ``repeat`` loops (after one
    untimed warm-up call each): label -> per-loop lists of wall ms."""
    for label, cmd in commands.items():  # warm the page cache and .pyc files; not timed
        timed_call(cmd, envs[label], cwd)
    samples: dict[str, list[list[float]]] = {label: [] for label in commands}
    for _ in range(repeat):
        loop_samples: dict[str, list[float]] = {label: [] for label in commands}
        for _ in range(calls):
            for label, cmd in commands.items():
                loop_samples[label].append(timed_call(cmd, envs[label], cwd))
        for label, values in loop_samples.items():
            samples[label].append(values)
    return samples


def curve(queues: list[int], calls: int, baseline: Path | None) -> None:
    """CLI ms per call vs queue length -> bench/results/cli_vs_queue.{csv,png} (see the docstring)."""
    from bench.series import RESULTS, write_series

    rows = []
    names = ["python -c pass", "sbatch --wrap true", "squeue", "scontrol show job N"]
    if baseline:
        names += [f"{n} (baseline)" for n in names[1:]]
    with controller(wal_fsync=True, scheduler_interval_secs=60) as ctl:
        env = _env(ctl.address)
        queued = last_id = 0
        for target in sorted(queues):
            if target > queued:
                last_id = fill_queue(ctl.address, target - queued)
                queued = target
            show = [str(BIN / "scontrol"), "show", "job", str(max(last_id, 1))]
            commands = {
                names[0]: [sys.executable, "-c", "pass"],
                names[1]: [str(BIN / "sbatch"), "--wrap", "true"],
                names[2]: [str(BIN / "squeue")],
                names[3]: show,
            }
            envs = {label: env for label in commands}
            if baseline:
                base_env = {**env, "PYTHONPATH": str(baseline.resolve())}
                for label in names[1:4]:
                    commands[f"{label} (baseline)"] = commands[label]
                    envs[f"{label} (baseline)"] = base_env
            samples = time_rotation(commands, envs, ctl.root, calls, 1)
            queued += 2 * calls + 2 if baseline else calls + 1  # the timed sbatch calls joined the queue
            medians = [median(samples[n][0]) for n in names]
            rows.append([target, *(round(m, 1) for m in medians)])
            print(
                f"{target:>6} queued: "
                + ", ".join(f"{n} {m:.0f} ms" for n, m in zip(names, medians, strict=True))
            )
    print(f"machine: {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f}")
    title = f"CLI ms per call vs jobs queued ({os.cpu_count()} cores, median of {calls} calls)"
    for path in write_series(
        os.path.join(RESULTS, "cli_vs_queue"),
        "jobs queued",
        "ms per call",
        ["queued", *names],
        rows,
        title=title,
    ):
        print(f"wrote {path}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queued", type=int, default=600, help="jobs in the queue while timing")
    ap.add_argument("--calls", type=int, default=40, help="calls of each command per loop")
    ap.add_argument("--repeat", type=int, default=3, help="loops")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--no-profile", action="store_true", help="skip the -X importtime tables")
    ap.add_argument("--baseline", type=Path, help="a checkout whose spur package to time alongside")
    ap.add_argument("--curve", action="store_true", help="ms per call vs queue length (CSV + PNG)")
    ap.add_argument("--queues", default="0,600,2000,5000,10000", help="queue lengths for --curve")
    args = ap.parse_args(argv)
    import spur

    byte_compile(Path(spur.__file__).parent)
    if args.baseline:
        byte_compile(args.baseline / "spur")
    if args.curve:
        curve([int(q) for q in args.queues.split(",")], args.calls, args.baseline)
        return
    with controller(wal_fsync=True, scheduler_interval_secs=60) as ctl:
        env = _env(ctl.address)
        cwd = ctl.root
        last_id = fill_queue(ctl.address, args.queued)
        commands = {
            "python -c pass (floor)": [sys.executable, "-c", "pass"],
            "sbatch --wrap true": [str(BIN / "sbatch"), "--wrap", "true"],
            f"squeue ({args.queued}+ jobs queued)": [str(BIN / "squeue")],
            f"scontrol show job {last_id}": [str(BIN / "scontrol"), "show", "job", str(last_id)],
        }
        envs = {label: env for label in commands}
        if args.baseline:
            base_env = {**env, "PYTHONPATH": str(args.baseline.resolve())}
            for label in list(commands)[1:]:
                commands[f"{label} (baseline)"] = commands[label]
                envs[f"{label} (baseline)"] = base_env
        samples = time_rotation(commands, envs, cwd, args.calls, args.repeat)
        medians = {label: median([v for loop in runs for v in loop]) for label, runs in samples.items()}
        floor = medians["python -c pass (floor)"]
        rows = []
        for label, runs in samples.items():
            loops = " ".join(f"{median(loop):.0f}" for loop in runs)
            rows.append((label, args.calls * args.repeat, medians[label], medians[label] / floor, loops))
        print(f"machine: {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f}, {sys.executable}")
        print_table(
            ["command", "calls", "ms/call (median)", "x floor", "median of each loop"],
            rows,
            title="CLI: fresh process per call (as a shell loop runs it), controller on loopback, same run",
        )
        if args.no_profile:
            return
        for label, cmd in list(commands.items())[1:4]:
            total, ranked = import_profile(cmd, env, cwd)
            print_table(
                ["module (as imported by the program)", "cumulative ms", "self ms"],
                [(m, cum, own) for m, cum, own in ranked[: args.top]],
                title=f"{label}: python -X importtime, {total:.0f} ms of imports in total",
            )


if __name__ == "__main__":
    sys.exit(main())
