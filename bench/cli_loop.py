"""CLI cost as scripts see it: ``sbatch``/``squeue`` in a loop, and what their cold start imports.

    python -m bench.cli_loop [--calls 200] [--squeue-calls 30] [--repeat 2] [--top 15]

Starts a real spurctld (no agents), then runs ``sbatch --wrap true`` ``--calls`` times one after
another (a fresh interpreter each time, exactly as a shell loop does) and ``squeue`` ``--squeue-calls``
times, and prints ms/call (median over ``--repeat`` loops). Then runs each command once under
``python -X importtime`` and prints its total import time and the top modules by cumulative time.
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


def _env(address: str) -> dict[str, str]:
    env = dict(os.environ)
    env["SPUR_CONTROLLER"] = address
    env.pop("SPUR_CONF", None)
    return env


def loop(cmd: list[str], calls: int, env: dict[str, str], cwd: Path) -> float:
    """Run ``cmd`` ``calls`` times in sequence; ms per call. A failing call stops the loop (reported)."""
    began = time.perf_counter()
    for _ in range(calls):
        proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd} exited {proc.returncode}: {proc.stderr.strip()}")
    return 1000 * (time.perf_counter() - began) / calls


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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--squeue-calls", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args(argv)
    with controller(wal_fsync=True, scheduler_interval_secs=60) as ctl:
        env = _env(ctl.address)
        cwd = ctl.root
        sbatch = [str(BIN / "sbatch"), "--wrap", "true"]
        squeue = [str(BIN / "squeue")]
        python = [sys.executable, "-c", "pass"]
        rows = []
        for label, cmd, calls in (
            ("python -c pass (floor)", python, args.squeue_calls),
            ("sbatch --wrap true", sbatch, args.calls),
            (f"squeue ({args.calls}+ jobs queued)", squeue, args.squeue_calls),
        ):
            runs = [loop(cmd, calls, env, cwd) for _ in range(args.repeat)]
            rows.append((label, calls, median(runs), " ".join(f"{r:.0f}" for r in runs)))
        print_table(
            ["command", "calls/loop", "ms/call (median)", "loops"],
            rows,
            title="CLI in a shell-style loop (fresh interpreter per call), controller on loopback",
        )
        for name, cmd in (("squeue", squeue), ("sbatch --wrap true", sbatch)):
            total, ranked = import_profile([cmd[0], *cmd[1:]], env, cwd)
            print_table(
                ["module (as imported by the program)", "cumulative ms", "self ms"],
                [(m, cum, own) for m, cum, own in ranked[: args.top]],
                title=f"{name}: python -X importtime, {total:.0f} ms of imports in total",
            )


if __name__ == "__main__":
    sys.exit(main())
